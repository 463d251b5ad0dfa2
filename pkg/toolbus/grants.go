package toolbus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/mcpwire"
	"github.com/toolbus/toolbus/pkg/mcpwire/oauth"
	"github.com/toolbus/toolbus/pkg/tokens"
)

// requireTokenKey fails when store is the bucket without a key while the configuration
// needs one: a server with an "oauth" entry for a login (not the client credentials
// grant), or, when listStored (the executor, whose NATS user may list the bucket), a
// configured server whose login's grant is stored. Without the key such a server could
// only be answered "needs a login" after a good login, with nothing logged.
func requireTokenKey(ctx context.Context, cfg *config.Config, store oauth.TokenStore, listStored bool, log *slog.Logger) error {
	ts, ok := store.(*tokens.Store)
	if !ok || ts.Sealed() {
		return nil
	}
	var need []string
	for _, name := range cfg.ServerNames() {
		sc := cfg.MCPServers[name]
		if sc.Transport() == mcpwire.TransportHTTP && sc.OAuth != nil && sc.OAuth.GrantType() != oauth.GrantClientCredentials {
			need = append(need, name+" (its oauth entry)")
		}
	}
	var stored []string
	if listStored {
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		var err error
		stored, err = ts.Servers(lctx)
		cancel()
		if err != nil && !errors.Is(err, jetstream.ErrNoKeysFound) && log != nil {
			log.Warn("cannot list the stored OAuth grants to check that none needs the token key", "err", err)
		}
	}
	slices.Sort(stored)
	for _, name := range stored {
		if sc, ok := cfg.MCPServers[name]; ok && sc.Transport() == mcpwire.TransportHTTP && !slices.ContainsFunc(need, func(n string) bool { return strings.HasPrefix(n, name+" ") }) {
			if sc.IsEnabled() {
				need = append(need, name+" (a login's grant is stored)")
			}
		}
	}
	if len(need) == 0 {
		return nil
	}
	return fmt.Errorf("%s: OAuth grants are sealed with a token key, and none is given: %w", strings.Join(need, ", "), tokens.ErrNoKey)
}

// followGrants makes the pool see every change of the stored grants at once (a logout,
// a new login), not when its cached token expires.
func followGrants(store oauth.TokenStore, pool *mcpwire.Pool, log *slog.Logger) runFunc {
	return func(ctx context.Context) error {
		ts, ok := store.(*tokens.Store)
		if !ok {
			return nil
		}
		if err := ts.Watch(ctx, pool.GrantChanged); err != nil {
			log.Warn("executor: cannot watch the OAuth grants; a logout or a new login takes effect when the cached token expires", "err", err)
		}
		<-ctx.Done()
		return nil
	}
}
