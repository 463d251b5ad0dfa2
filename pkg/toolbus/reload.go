package toolbus

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"slices"
	"sort"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/catalog"
	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/executor"
	"github.com/toolbus/toolbus/pkg/mcpwire"
)

// ConfigPollInterval is how often [WatchConfig] looks at the configuration file.
const ConfigPollInterval = time.Second

// WatchConfig calls apply with the configuration at path once at the start and then
// whenever the file's content changes (it is read every [ConfigPollInterval]) or the
// channel reload returns is closed ([Toolbus.Reload]; reload may be nil), until ctx is
// done. A file that cannot be read, parsed or
// applied is reported and skipped: the configuration applied last stays in force. It
// returns nil when ctx is done.
//
// Reading a small file every second costs nothing and, unlike file system events or
// modification times, sees every change: editors that save by renaming, ConfigMaps
// replaced by a rename of their directory, and two writes within one clock tick.
func WatchConfig(ctx context.Context, path string, apply func(*config.Config) error, reload func() <-chan struct{}, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("config", path)
	if reload == nil {
		reload = func() <-chan struct{} { return nil }
	}

	// Applied at the start too, for a change between the caller's load and now;
	// applying an unchanged configuration changes nothing.
	// The reload channel is taken before each check, so that a reload asked for while a
	// check runs is not lost.
	w := &configWatch{path: path, apply: apply, log: log}
	asked := reload()
	w.check(true)
	tick := time.NewTicker(ConfigPollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-asked:
			asked = reload()
			log.Info("reloading the configuration, as asked")
			w.check(true)
		case <-tick.C:
			w.check(false)
		}
	}
}

type configWatch struct {
	path  string
	apply func(*config.Config) error
	log   *slog.Logger
	seen  [sha256.Size]byte // the content looked at last, applied or not
}

// check reads the file and applies it when its content changed since the last look, or
// always when force is set.
func (w *configWatch) check(force bool) {
	data, err := os.ReadFile(w.path)
	if err != nil {
		// Most often a file being replaced: the next look sees the new one.
		if force {
			w.log.Error("configuration not reloaded: cannot read it", "err", err)
		}
		return
	}
	sum := sha256.Sum256(data)
	if sum == w.seen && !force {
		return
	}
	w.seen = sum
	cfg, err := config.Parse(data, w.path, os.LookupEnv)
	if err != nil {
		w.log.Error("configuration not reloaded; the previous one stays in force", "err", err)
		return
	}
	if err := w.apply(cfg); err != nil {
		w.log.Error("configuration not applied; the previous one stays in force", "err", err)
	}
}

// ReloadPool returns the apply function of [WatchConfig] for an executor's pool, whose
// configuration was cur: the servers, routes and top-level allow- and block-lists are
// updated with [mcpwire.Pool.Update], leaving the servers that did not change (and their
// calls under way) alone. Changes to other sections are reported as needing a restart.
// (The executor's router takes the new lists, and the executor the new policy rules and
// limits, too: see watchPool's caller.)
func ReloadPool(pool *mcpwire.Pool, cur *config.Config, log *slog.Logger) func(*config.Config) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	prev := *cur
	return func(next *config.Config) error {
		if err := pool.Update(next.MCPServers, next.Routes, next.AllowedTools, next.BlockedTools); err != nil {
			return fmt.Errorf("%s: %w", next.Source, err)
		}
		added, changed, removed := diffServers(prev.MCPServers, next.MCPServers)
		if len(added)+len(changed)+len(removed) > 0 || !reflect.DeepEqual(prev.Routes, next.Routes) ||
			!reflect.DeepEqual(prev.AllowedTools, next.AllowedTools) || !reflect.DeepEqual(prev.BlockedTools, next.BlockedTools) {
			log.Info("configuration reloaded", "added", added, "changed", changed, "removed", removed,
				"routes", len(next.Routes), "allowedTools", len(next.AllowedTools), "blockedTools", len(next.BlockedTools))
		}
		if other := restartNeeded(&prev, next); len(other) > 0 {
			log.Warn("configuration sections changed that apply only after a restart", "sections", other)
		}
		prev = *next
		return nil
	}
}

// watchPool is the run of an executor's configuration watch; changed, when set, is
// called with the new configuration after each change was applied.
func watchPool(cfg *config.Config, pool *mcpwire.Pool, reload func() <-chan struct{}, changed func(*config.Config), log *slog.Logger) runFunc {
	apply := ReloadPool(pool, cfg, log)
	return func(ctx context.Context) error {
		return WatchConfig(ctx, cfg.Source, func(next *config.Config) error {
			if err := apply(next); err != nil {
				return err
			}
			if changed != nil {
				changed(next)
			}
			return nil
		}, reload, log)
	}
}

// mirrorInProcess keeps the in-process tools of router (local and engineering) in the
// catalog bucket, for the parser and `toolbus tools`.
func mirrorInProcess(kv jetstream.KeyValue, router *executor.Router, pool *mcpwire.Pool, log *slog.Logger) {
	for _, e := range InProcessCatalog(router, pool) {
		mirrorCatalog(kv, e.Key, e.Tools, log)
	}
}

// CatalogEntry is one key of the catalog bucket: a backend's tools.
type CatalogEntry struct {
	Key   string
	Tools []catalog.Tool
}

// InProcessCatalog is what the executor keeps in the catalog for its in-process
// backends (local, engineering, a program's own), each under its name: the tools the
// top-level lists permit (executor.Router.Offered; a Go tool of a server under that
// server, so that its qualified spellings resolve), leaving out the names a route sends
// to a server: the parser checks a call against the schema of the tool that runs it.
func InProcessCatalog(router *executor.Router, pool *mcpwire.Pool) []CatalogEntry {
	var out []CatalogEntry
	for _, b := range router.Backends() {
		if _, ok := b.(executor.MCPBackend); ok {
			continue // the pool keeps its servers' tools in the catalog itself
		}
		tools := router.Offered(context.Background(), b)
		if pool != nil {
			tools = slices.DeleteFunc(tools, func(t catalog.Tool) bool {
				server, routed := pool.Route(t.Name)
				return routed && server != ""
			})
		}
		out = append(out, CatalogEntry{Key: b.Name(), Tools: tools})
	}
	return out
}

func diffServers(old, next map[string]mcpwire.ServerConfig) (added, changed, removed []string) {
	for name, n := range next {
		o, ok := old[name]
		switch {
		case !ok:
			added = append(added, name)
		case !reflect.DeepEqual(o, n):
			changed = append(changed, name)
		}
	}
	for name := range old {
		if _, ok := next[name]; !ok {
			removed = append(removed, name)
		}
	}
	sort.Strings(added)
	sort.Strings(changed)
	sort.Strings(removed)
	return added, changed, removed
}

// restartNeeded names the sections other than mcpServers, routes, allowedTools,
// blockedTools, policy and limits that differ.
func restartNeeded(old, next *config.Config) []string {
	a, b := *old, *next
	a.MCPServers, a.Routes, a.AllowedTools, a.BlockedTools, a.Source = nil, nil, nil, nil, ""
	b.MCPServers, b.Routes, b.AllowedTools, b.BlockedTools, b.Source = nil, nil, nil, nil, ""
	a.Policy, a.Limits, b.Policy, b.Limits = config.Policy{}, nil, config.Policy{}, nil
	var ma, mb map[string]json.RawMessage
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if json.Unmarshal(ja, &ma) != nil || json.Unmarshal(jb, &mb) != nil {
		return nil
	}
	var out []string
	for k, v := range mb {
		if string(ma[k]) != string(v) {
			out = append(out, k)
		}
	}
	for k := range ma {
		if _, ok := mb[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}
