package executor

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/internal/bus"
	"github.com/toolbus/toolbus/pkg/engineering"
)

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
