// Package tokens keeps the OAuth grants of MCP servers where every toolbus replica finds
// them: the JetStream key-value bucket [messages.BucketAuth], one key per server, each
// grant sealed with AES-256-GCM under a key the operator provides
// (TOOLBUS_TOKEN_KEY, or the file TOOLBUS_TOKEN_KEY_FILE names: 32 random bytes,
// base64; `openssl rand -base64 32` makes one). NATS and whoever can read the bucket see
// only sealed bytes; the server's name is bound to its grant (GCM's additional data), so
// a sealed grant copied under another name does not open.
//
// A refresh is done by one replica at a time: the replica that finds the token expired
// takes a lease written into the key with a compare-and-set on its revision, refreshes,
// and writes the new grant in place of the lease; the others wait for it and use its
// grant, so a rotating refresh token is never used twice. A replica that dies holding
// the lease holds it for [Lease] at most.
package tokens

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/toolbus/toolbus/pkg/mcpwire/oauth"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/messages"
)

// Environment variables of the sealing key.
const (
	EnvKey     = "TOOLBUS_TOKEN_KEY"
	EnvKeyFile = "TOOLBUS_TOKEN_KEY_FILE"
)

// ErrNoKey: no sealing key was given, so no grant can be kept or read.
var ErrNoKey = errors.New("no token key: set " + EnvKey + " (32 random bytes, base64: `openssl rand -base64 32`) or " + EnvKeyFile + " to a file holding it, the same on every toolbus process")

// Lease is how long a replica may hold a refresh before the others take over.
const Lease = 30 * time.Second

// KeyFromEnv returns the sealing key of the environment (lookup is os.LookupEnv), or
// nil when none is set.
func KeyFromEnv(lookup func(string) (string, bool)) ([]byte, error) {
	text, ok := lookup(EnvKey)
	src := EnvKey
	if !ok || text == "" {
		path, ok := lookup(EnvKeyFile)
		if !ok || path == "" {
			return nil, nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvKeyFile, err)
		}
		text, src = string(b), path
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(text))
	if err != nil || len(key) != 32 {
		return nil, fmt.Errorf("%s: the token key must be 32 bytes, base64 (`openssl rand -base64 32`)", src)
	}
	return key, nil
}

// NewKey returns a random sealing key, for a process whose bucket dies with it (`toolbus
// run`'s embedded server).
func NewKey() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}

// Store is an [oauth.TokenStore] in the bucket.
type Store struct {
	kv   jetstream.KeyValue
	aead cipher.AEAD // nil without a key
	// ID names this process in the leases it takes.
	ID  string
	now func() time.Time
}

var _ oauth.TokenStore = (*Store)(nil)

// Open returns the store of the bucket (provisioned with the others), sealing with key;
// a nil key gives a store that holds nothing and says why ([ErrNoKey]) when asked to.
func Open(ctx context.Context, js jetstream.JetStream, key []byte) (*Store, error) {
	kv, err := js.KeyValue(ctx, messages.BucketAuth)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", messages.BucketAuth, err)
	}
	s := &Store{kv: kv, ID: bus.InstanceID(), now: time.Now}
	if key != nil {
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, err
		}
		if s.aead, err = cipher.NewGCM(block); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// record is a key's value: the sealed grant, and the lease of a refresh under way.
type record struct {
	Sealed     []byte    `json:"sealed,omitempty"`
	LeaseBy    string    `json:"lease_by,omitempty"`
	LeaseUntil time.Time `json:"lease_until,omitzero"`
}

func (s *Store) get(ctx context.Context, server string) (*record, uint64, error) {
	e, err := s.kv.Get(ctx, bus.Key(server))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	var r record
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return nil, 0, fmt.Errorf("%s/%s: %w", messages.BucketAuth, server, err)
	}
	return &r, e.Revision(), nil
}

func (s *Store) seal(server string, g *oauth.Grant) ([]byte, error) {
	if s.aead == nil {
		return nil, ErrNoKey
	}
	plain, err := json.Marshal(g)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, s.aead.NonceSize())
	_, _ = rand.Read(nonce)
	return s.aead.Seal(nonce, nonce, plain, []byte(server)), nil
}

func (s *Store) open(server string, sealed []byte) (*oauth.Grant, error) {
	if len(sealed) == 0 {
		return nil, nil
	}
	if s.aead == nil {
		return nil, ErrNoKey
	}
	n := s.aead.NonceSize()
	if len(sealed) < n {
		return nil, fmt.Errorf("the grant of %s is damaged", server)
	}
	plain, err := s.aead.Open(nil, sealed[:n], sealed[n:], []byte(server))
	if err != nil {
		return nil, fmt.Errorf("the grant of %s does not open with this token key (another key sealed it?)", server)
	}
	var g oauth.Grant
	if err := json.Unmarshal(plain, &g); err != nil {
		return nil, err
	}
	return &g, nil
}

// Sealed reports whether the store has a key, so that it can keep and read grants.
func (s *Store) Sealed() bool { return s.aead != nil }

// Watch calls changed with a server's name whenever its grant is written or deleted —
// a login, a logout, another replica's refresh — until ctx is done, watching again after
// a failure, and then with "": any grant may have changed meanwhile. It returns once the
// watch is set up.
func (s *Store) Watch(ctx context.Context, changed func(server string)) error {
	w, err := s.kv.WatchAll(ctx, jetstream.UpdatesOnly())
	if err != nil {
		return fmt.Errorf("watch %s: %w", messages.BucketAuth, err)
	}
	go func() {
		for {
			for e := range w.Updates() {
				if e != nil {
					changed(e.Key())
				}
			}
			_ = w.Stop()
			if ctx.Err() != nil {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			// What changed while no watch ran (a logout among it) is not known: every
			// grant may have.
			if again, err := s.kv.WatchAll(ctx, jetstream.UpdatesOnly()); err == nil {
				w = again
				changed("")
			}
		}
	}()
	return nil
}

// Load returns the server's grant, nil when there is none.
func (s *Store) Load(ctx context.Context, server string) (*oauth.Grant, error) {
	r, _, err := s.get(ctx, server)
	if err != nil || r == nil {
		return nil, err
	}
	return s.open(server, r.Sealed)
}

// Save stores a login's grant, in place of any other (and of a lease).
func (s *Store) Save(ctx context.Context, server string, g *oauth.Grant) error {
	sealed, err := s.seal(server, g)
	if err != nil {
		return err
	}
	b, _ := json.Marshal(record{Sealed: sealed})
	_, err = s.kv.Put(ctx, bus.Key(server), b)
	return err
}

// Delete forgets the server's grant.
func (s *Store) Delete(ctx context.Context, server string) error {
	err := s.kv.Delete(ctx, bus.Key(server))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	return err
}

// Servers lists the servers that have a grant.
func (s *Store) Servers(ctx context.Context) ([]string, error) {
	lister, err := s.kv.ListKeys(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for k := range lister.Keys() {
		out = append(out, k)
	}
	return out, nil
}

// Refresh replaces the grant whose token stale holds, taking the key's lease first; see
// the package comment.
func (s *Store) Refresh(ctx context.Context, server string, stale *oauth.Grant, refresh func(*oauth.Grant) (*oauth.Grant, error)) (*oauth.Grant, error) {
	key := bus.Key(server)
	for {
		r, rev, err := s.get(ctx, server)
		if err != nil || r == nil {
			return nil, err
		}
		cur, err := s.open(server, r.Sealed)
		if err != nil || cur == nil {
			return cur, err
		}
		if !oauth.SameToken(cur, stale) {
			return cur, nil // refreshed by another replica, or a new login
		}
		now := s.now()
		if r.LeaseBy != "" && r.LeaseBy != s.ID && now.Before(r.LeaseUntil) {
			// Another replica is refreshing: wait for its grant.
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("waiting for %s's refresh of %s: %w", r.LeaseBy, server, ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		leased := *r
		leased.LeaseBy, leased.LeaseUntil = s.ID, now.Add(Lease)
		b, _ := json.Marshal(leased)
		rev, err = s.kv.Update(ctx, key, b, rev)
		if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			continue // someone else wrote first: look again
		}
		if err != nil {
			return nil, err
		}
		next, ferr := refresh(cur)
		done := record{Sealed: r.Sealed} // the lease given back
		if ferr == nil {
			if done.Sealed, err = s.seal(server, next); err != nil {
				return nil, err
			}
		}
		b, _ = json.Marshal(done)
		if _, err := s.kv.Update(ctx, key, b, rev); err != nil && ferr == nil {
			// A login replaced the grant meanwhile: it wins.
			if g, lerr := s.Load(ctx, server); lerr == nil && g != nil {
				return g, nil
			}
			return nil, err
		}
		if ferr != nil {
			return nil, ferr
		}
		return next, nil
	}
}
