package healthd

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/messages"
)

// lease is the leader's lease: the key [messages.HealthLeaderKey] of the health bucket,
// written with compare-and-set. The leader renews it every third of its TTL; the others
// watch its revision and take it over, with compare-and-set on the revision they saw,
// once it has not changed for a whole TTL by their own clock. No replica compares
// another's clock to its own, so clock skew between hosts does not matter.
type lease struct {
	kv  jetstream.KeyValue
	id  string
	ttl time.Duration

	mu    sync.Mutex
	rev   uint64    // revision of our last write; 0 when we do not hold the lease
	since time.Time // when that write was sent: the lease holds until since + ttl
}

type leaseValue struct {
	Holder    string    `json:"holder"`
	RenewedAt time.Time `json:"renewed_at"`
	TTLMS     int64     `json:"ttl_ms"`
}

func (l *lease) value() []byte {
	b, _ := json.Marshal(leaseValue{Holder: l.id, RenewedAt: time.Now().UTC(), TTLMS: l.ttl.Milliseconds()})
	return b
}

// held reports whether this replica holds the lease now.
func (l *lease) held() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rev != 0 && time.Since(l.since) < l.ttl
}

func (l *lease) set(rev uint64, since time.Time) {
	l.mu.Lock()
	l.rev, l.since = rev, since
	l.mu.Unlock()
}

// acquire blocks until this replica holds the lease, or ctx is done.
func (l *lease) acquire(ctx context.Context, log *slog.Logger) error {
	var seen uint64
	var seenAt time.Time
	poll := time.NewTicker(l.ttl / 3)
	defer poll.Stop()
	for {
		e, err := l.kv.Get(ctx, messages.HealthLeaderKey)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			sent := time.Now()
			if rev, err := l.kv.Create(ctx, messages.HealthLeaderKey, l.value()); err == nil {
				l.set(rev, sent)
				return nil
			}
		case err != nil:
			if ctx.Err() == nil {
				log.Warn("health: reading the lease", "err", err)
			}
		case e.Revision() != seen:
			seen, seenAt = e.Revision(), time.Now()
		case time.Since(seenAt) >= l.ttl:
			// The holder has not renewed for a whole TTL: take over, unless another
			// replica was faster.
			sent := time.Now()
			if rev, err := l.kv.Update(ctx, messages.HealthLeaderKey, l.value(), seen); err == nil {
				log.Info("health: took the lease over", "previous", holder(e))
				l.set(rev, sent)
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-poll.C:
		}
	}
}

// renew extends the lease. A conflict means another replica took it over: the lease is
// then lost at once. Other errors (NATS away) leave it to expire on its own.
func (l *lease) renew(ctx context.Context) error {
	l.mu.Lock()
	rev := l.rev
	l.mu.Unlock()
	if rev == 0 {
		return nil
	}
	sent := time.Now()
	next, err := l.kv.Update(ctx, messages.HealthLeaderKey, l.value(), rev)
	switch {
	case err == nil:
		l.set(next, sent)
	case errors.Is(err, jetstream.ErrKeyRevisionMismatch), errors.Is(err, jetstream.ErrKeyExists), errors.Is(err, jetstream.ErrKeyNotFound):
		l.set(0, time.Time{})
	}
	return err
}

// release gives the lease up, so that another replica takes over at once.
func (l *lease) release(ctx context.Context) {
	l.mu.Lock()
	rev := l.rev
	l.rev = 0
	l.mu.Unlock()
	if rev != 0 {
		_ = l.kv.Delete(ctx, messages.HealthLeaderKey, jetstream.LastRevision(rev))
	}
}

func holder(e jetstream.KeyValueEntry) string {
	var v leaseValue
	_ = json.Unmarshal(e.Value(), &v)
	return v.Holder
}
