package tokens_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"github.com/toolbus/toolbus/pkg/mcpwire/oauth"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/oauth2"

	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/tokens"
)

func jetStream(t *testing.T) jetstream.JetStream {
	t.Helper()
	_, js := bustest.Provisioned(t)
	return js
}

func grant(access, refresh string) *oauth.Grant {
	return &oauth.Grant{
		URL: "https://mcp.example/mcp", ClientID: "toolbus-client", ClientSecret: "client-secret-value",
		TokenURL: "https://auth.example/token", Scopes: []string{"read"},
		Token: &oauth2.Token{AccessToken: access, RefreshToken: refresh, TokenType: "Bearer", Expiry: time.Now().Add(time.Hour)},
	}
}

// The bucket holds sealed bytes only: no token, refresh token or client secret is
// readable by whoever reads NATS, and a grant opens under its own name and key only.
func TestSealed(t *testing.T) {
	ctx := context.Background()
	js := jetStream(t)
	key := tokens.NewKey()
	s, err := tokens.Open(ctx, js, key)
	if err != nil {
		t.Fatal(err)
	}
	g := grant("access-token-secret", "refresh-token-secret")
	if err := s.Save(ctx, "notes", g); err != nil {
		t.Fatal(err)
	}
	kv, _ := js.KeyValue(ctx, messages.BucketAuth)
	e, err := kv.Get(ctx, "notes")
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"access-token-secret", "refresh-token-secret", "client-secret-value", "toolbus-client"} {
		if bytes.Contains(e.Value(), []byte(secret)) {
			t.Errorf("the bucket shows %q", secret)
		}
	}
	got, err := s.Load(ctx, "notes")
	if err != nil || got.Token.AccessToken != "access-token-secret" || got.Token.RefreshToken != "refresh-token-secret" || got.ClientSecret != "client-secret-value" {
		t.Fatalf("Load = %+v, %v", got, err)
	}
	// Another key does not open it; no key says how to give one.
	other, _ := tokens.Open(ctx, js, tokens.NewKey())
	if _, err := other.Load(ctx, "notes"); err == nil || !strings.Contains(err.Error(), "does not open") {
		t.Errorf("another key: %v", err)
	}
	none, _ := tokens.Open(ctx, js, nil)
	if _, err := none.Load(ctx, "notes"); !errors.Is(err, tokens.ErrNoKey) {
		t.Errorf("no key: %v", err)
	}
	if err := none.Save(ctx, "x", g); !errors.Is(err, tokens.ErrNoKey) {
		t.Errorf("no key, Save: %v", err)
	}
	// A sealed grant copied under another server's name does not open.
	if _, err := kv.Put(ctx, "search", e.Value()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(ctx, "search"); err == nil {
		t.Error("a grant moved to another name opened")
	}
	if g, err := s.Load(ctx, "missing"); g != nil || err != nil {
		t.Errorf("missing: %v, %v", g, err)
	}
	if err := s.Delete(ctx, "notes"); err != nil {
		t.Fatal(err)
	}
	if g, _ := s.Load(ctx, "notes"); g != nil {
		t.Error("Delete left the grant")
	}
}

// Replicas that find the token expired at once refresh it once: one takes the lease,
// the others wait and use its grant, so a rotating refresh token is used once.
func TestRefreshOnce(t *testing.T) {
	ctx := context.Background()
	js := jetStream(t)
	key := tokens.NewKey()
	first, _ := tokens.Open(ctx, js, key)
	stale := grant("old-access", "refresh-1")
	if err := first.Save(ctx, "notes", stale); err != nil {
		t.Fatal(err)
	}
	var refreshes atomic.Int32
	var wg sync.WaitGroup
	got := make([]*oauth.Grant, 8)
	errs := make([]error, 8)
	for i := range got {
		replica, _ := tokens.Open(ctx, js, key) // a replica of its own: its own lease id
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = replica.Refresh(ctx, "notes", stale, func(cur *oauth.Grant) (*oauth.Grant, error) {
				if cur.Token.RefreshToken != "refresh-1" {
					return nil, errors.New("refreshed with " + cur.Token.RefreshToken)
				}
				refreshes.Add(1)
				time.Sleep(50 * time.Millisecond) // the token endpoint
				return grant("new-access", "refresh-2"), nil
			})
		}()
	}
	wg.Wait()
	if n := refreshes.Load(); n != 1 {
		t.Errorf("%d refreshes, want 1", n)
	}
	for i := range got {
		if errs[i] != nil || got[i] == nil || got[i].Token.AccessToken != "new-access" {
			t.Errorf("replica %d: %+v, %v", i, got[i], errs[i])
		}
	}
	// A refresh that fails gives the lease back: the next replica may try.
	stale2, _ := first.Load(ctx, "notes")
	_, err := first.Refresh(ctx, "notes", stale2, func(*oauth.Grant) (*oauth.Grant, error) {
		return nil, &oauth2.RetrieveError{ErrorCode: "invalid_grant"}
	})
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) {
		t.Fatalf("failed refresh: %v", err)
	}
	second, _ := tokens.Open(ctx, js, key)
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	g, err := second.Refresh(rctx, "notes", stale2, func(*oauth.Grant) (*oauth.Grant, error) { return grant("third", "refresh-3"), nil })
	if err != nil || g.Token.AccessToken != "third" {
		t.Fatalf("after a failed refresh: %+v, %v", g, err)
	}
}

func TestKeyFromEnv(t *testing.T) {
	key := tokens.NewKey()
	text := base64.StdEncoding.EncodeToString(key)
	file := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(file, []byte(text+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	for _, tt := range []struct {
		name string
		env  map[string]string
		want []byte
		err  bool
	}{
		{"none", nil, nil, false},
		{"variable", map[string]string{tokens.EnvKey: text}, key, false},
		{"file", map[string]string{tokens.EnvKeyFile: file}, key, false},
		{"short", map[string]string{tokens.EnvKey: base64.StdEncoding.EncodeToString(key[:16])}, nil, true},
		{"not base64", map[string]string{tokens.EnvKey: "secret"}, nil, true},
		{"missing file", map[string]string{tokens.EnvKeyFile: file + ".gone"}, nil, true},
	} {
		got, err := tokens.KeyFromEnv(env(tt.env))
		if (err != nil) != tt.err || !bytes.Equal(got, tt.want) {
			t.Errorf("%s: %x, %v", tt.name, got, err)
		}
		if err != nil && strings.Contains(err.Error(), text) {
			t.Errorf("%s: the error shows the key", tt.name)
		}
	}
}
