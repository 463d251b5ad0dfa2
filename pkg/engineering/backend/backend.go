// Package backend runs the engineering calculators (pkg/engineering) as one backend of
// toolbus's executor, from outside the executor's core, and keeps each conversation's
// activation in a JetStream key-value bucket so that every executor replica sees it:
// [KVSessions], and [CachedSessions], which serves reads from memory behind a watch.
//
// toolbus.Start builds it when the configuration's engineering section is on (the
// default); a program that wants the suite with options of its own turns that off and
// adds it as one of its backends:
//
//	sessions := &backend.CachedSessions{KVSessions: backend.KVSessions{KV: kv}}
//	go sessions.Follow(ctx)
//	suite := engineering.New(&engineering.Options{Sessions: sessions, Expose: engineering.ExposeFlat})
//	cfg.Engineering.Enabled = new(false)
//	tb, err := toolbus.Start(ctx, toolbus.Options{Config: cfg, Backends: []executor.Backend{backend.New(suite)}})
package backend

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/engineering"
	"github.com/toolbus/toolbus/pkg/executor"
	"github.com/toolbus/toolbus/pkg/messages"
)

// Backend runs the engineering suite's visible tools.
type Backend struct{ Suite *engineering.Suite }

// New returns the backend of suite.
func New(suite *engineering.Suite) Backend { return Backend{Suite: suite} }

var _ executor.Backend = Backend{}

// Name is "engineering".
func (Backend) Name() string { return "engineering" }

func (b Backend) Tools(context.Context) []messages.ToolInfo { return b.Suite.Tools() }

func (b Backend) Resolve(_ context.Context, name string) (executor.Route, bool, error) {
	if !b.Suite.Has(name) {
		return executor.Route{}, false, nil
	}
	info := messages.ToolInfo{Name: name}
	for _, t := range b.Suite.Tools() {
		if t.Name == name {
			info = t
			break
		}
	}
	return executor.Route{Server: "engineering", Info: info, Run: func(ctx context.Context, conversation string, args json.RawMessage) (json.RawMessage, error) {
		return b.Suite.Call(ctx, conversation, name, args)
	}}, true, nil
}

// KVSessions keeps engineering sessions in a JetStream key-value bucket, keyed by
// conversation. Updates are compare-and-set, so concurrent replicas never lose an
// activation.
type KVSessions struct{ KV jetstream.KeyValue }

var _ engineering.SessionStore = KVSessions{}

// Get returns the session of conversation, or the zero session.
func (s KVSessions) Get(ctx context.Context, conversation string) (engineering.Session, error) {
	sess, _, err := bus.GetJSON[engineering.Session](ctx, s.KV, bus.Key(conversation))
	return sess, err
}

// Update applies fn to the session of conversation atomically.
func (s KVSessions) Update(ctx context.Context, conversation string, fn func(*engineering.Session) error) error {
	_, err := bus.UpdateJSON(ctx, s.KV, bus.Key(conversation), func(sess *engineering.Session) (bool, error) {
		return true, fn(sess)
	})
	return err
}

// CachedSessions is KVSessions with the sessions in use held in memory and kept current
// by a watch of the bucket, so that checking a calculator's domain, which every
// execute_tool does, costs no round trip. The watch delivers every update of the bucket
// in revision order; an entry is replaced only by a newer revision, so a slow read can
// never bring back an older session. A session the cache says does not allow a
// calculator is read again from the bucket before the call is refused (GetFresh): an
// activation made through another replica a moment ago is never missed. Entries unused
// for IdleTTL are dropped.
type CachedSessions struct {
	KVSessions
	// IdleTTL bounds how long an unused session stays in memory. Default 10 minutes.
	IdleTTL time.Duration
	// Logger reports a watch that cannot be started; nil discards.
	Logger *slog.Logger

	watching atomic.Bool // the watch is running: entries are kept current
	mu       sync.Mutex
	entries  map[string]*cachedSession // by key
}

type cachedSession struct {
	sess engineering.Session
	rev  uint64
	used time.Time
}

var _ engineering.SessionStore = (*CachedSessions)(nil)

// Follow watches the bucket until ctx is done. Until the watch is running (and while
// it is being restarted) Get reads the bucket every time.
func (s *CachedSessions) Follow(ctx context.Context) error {
	ttl := s.IdleTTL
	if ttl <= 0 {
		ttl = 10 * time.Minute
	}
	sweep := time.NewTicker(max(ttl/4, time.Second))
	defer sweep.Stop()
	for failures := 0; ctx.Err() == nil; failures++ {
		w, err := s.KV.WatchAll(ctx, jetstream.UpdatesOnly())
		if err == nil {
			s.follow(ctx, w, sweep.C, ttl)
			_ = w.Stop()
			failures = 0
		} else if s.Logger != nil && ctx.Err() == nil && failures%50 == 0 {
			s.Logger.Warn("cannot watch the sessions bucket; reading it on every call", "err", err, "failures", failures+1)
		}
		s.watching.Store(false)
		select {
		case <-ctx.Done():
		case <-time.After(min(time.Duration(failures+1)*100*time.Millisecond, 2*time.Second)):
		}
	}
	return nil
}

func (s *CachedSessions) follow(ctx context.Context, w jetstream.KeyWatcher, sweep <-chan time.Time, ttl time.Duration) {
	// What was remembered before the watch began may have changed since.
	s.mu.Lock()
	clear(s.entries)
	s.mu.Unlock()
	s.watching.Store(true)
	for {
		select {
		case <-ctx.Done():
			return
		case <-sweep:
			s.sweep(time.Now().Add(-ttl))
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e == nil {
				continue
			}
			var sess engineering.Session
			if e.Operation() == jetstream.KeyValuePut {
				if err := json.Unmarshal(e.Value(), &sess); err != nil {
					s.drop(e.Key())
					continue
				}
			}
			s.store(e.Key(), sess, e.Revision(), false)
		}
	}
}

// Get returns the session of conversation from memory, reading the bucket on a miss.
func (s *CachedSessions) Get(ctx context.Context, conversation string) (engineering.Session, error) {
	if !s.watching.Load() {
		return s.KVSessions.Get(ctx, conversation)
	}
	key := bus.Key(conversation)
	s.mu.Lock()
	if e := s.entries[key]; e != nil {
		e.used = time.Now()
		sess := cloneSession(e.sess)
		s.mu.Unlock()
		return sess, nil
	}
	s.mu.Unlock()
	return s.GetFresh(ctx, conversation)
}

// GetFresh reads the session of conversation from the bucket and remembers it.
func (s *CachedSessions) GetFresh(ctx context.Context, conversation string) (engineering.Session, error) {
	key := bus.Key(conversation)
	sess, rev, err := bus.GetJSON[engineering.Session](ctx, s.KV, key)
	if err != nil || !s.watching.Load() {
		return sess, err
	}
	s.store(key, cloneSession(sess), rev, true)
	return sess, nil
}

// Update applies fn in the bucket; the watch (or the next read) brings the new session.
func (s *CachedSessions) Update(ctx context.Context, conversation string, fn func(*engineering.Session) error) error {
	err := s.KVSessions.Update(ctx, conversation, fn)
	s.drop(bus.Key(conversation))
	return err
}

// cloneSession copies s, so that a caller changing what Get returned cannot change the cache.
func cloneSession(s engineering.Session) engineering.Session {
	return engineering.Session{ActiveDomains: slices.Clone(s.ActiveDomains), AllowedTools: slices.Clone(s.AllowedTools)}
}

// store keeps sess at rev unless a newer revision is held.
// A read (used) counts as a use; a watched update of a key nobody reads is kept until
// the sweep, so that a read racing with it cannot store the older value afterwards.
func (s *CachedSessions) store(key string, sess engineering.Session, rev uint64, used bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.entries == nil {
		s.entries = map[string]*cachedSession{}
	}
	e := s.entries[key]
	if e == nil {
		e = &cachedSession{used: time.Now()}
		s.entries[key] = e
	} else if rev < e.rev {
		return
	}
	e.sess, e.rev = sess, rev
	if used {
		e.used = time.Now()
	}
}

func (s *CachedSessions) drop(key string) {
	s.mu.Lock()
	delete(s.entries, key)
	s.mu.Unlock()
}

func (s *CachedSessions) sweep(before time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, e := range s.entries {
		if e.used.Before(before) {
			delete(s.entries, k)
		}
	}
}
