package order

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/bus"
)

// Origin is the message that first used a response id in its conversation: the parser
// records it in the response's key when it reads the response ([Claim]); the
// formatter's progress keeps it there, and so does the answered mark ([Finish]), for as
// long as the gather bucket keeps the key (its TTL after the key's last write).
//
// It tells a redelivery of that message (the same stream sequence: its ack was lost, or
// its delivery handed back) from another message that uses the same id — published
// again after JetStream's duplicate window forgot the first, or with another
// Nats-Msg-Id. The first is handled as it always was; the second is not the response
// its id names, and is refused (see parser.Stage.Parse).
type Origin struct {
	// Seq is the message's sequence in its stream; Chunk says the stream is the
	// chunks' (the message is chunk 1 of a streamed response), not whole responses'.
	// A conversation's responses, and its chunks, are each in one stream, so the two
	// name the message.
	Seq   uint64 `json:"seq"`
	Chunk bool   `json:"chunk,omitempty"`
	// At is when the parser first read it.
	At time.Time `json:"at"`
}

// Recorded reports whether o names a message: the key of a response that was not
// claimed (a mark written by a delivery that claimed nothing) holds none.
func (o Origin) Recorded() bool { return !o.At.IsZero() }

// Same reports whether o and p name the same message.
func (o Origin) Same(p Origin) bool {
	return o.Recorded() && p.Recorded() && o.Seq == p.Seq && o.Chunk == p.Chunk
}

// Use is what the key of a response id says when a message claims it ([Claim]).
type Use struct {
	// Origin is the message that used the id first; not Recorded when the key holds
	// none.
	Origin Origin
	// Answered: the response's output is stored (the key is its answered mark), at
	// AnsweredAt when the mark says (zero otherwise).
	Answered   bool
	AnsweredAt time.Time
}

// Claim records o as the message that uses the id of response (by its scoped id) and
// returns what the response's key in the gather bucket says then: o itself when o is
// the first to claim it (the key is created with o, create-only), else the message
// that claimed it first — o again for a redelivery — and whether that response is
// answered. One write for a new response; a read besides when the key exists.
func Claim(ctx context.Context, kv jetstream.KeyValue, response string, o Origin) (Use, error) {
	key := bus.Key(response)
	body, err := json.Marshal(answeredMark{Origin: &o})
	if err != nil {
		return Use{}, err
	}
	for range 3 {
		if _, err := kv.Create(ctx, key, body); err == nil {
			return Use{Origin: o}, nil
		} else if !errors.Is(err, jetstream.ErrKeyExists) {
			return Use{}, fmt.Errorf("%s/%s: %w", kv.Bucket(), key, err)
		}
		m, rev, err := bus.GetJSON[answeredMark](ctx, kv, key)
		if err != nil {
			return Use{}, err
		}
		if rev != 0 {
			u := Use{Answered: m.Answered, AnsweredAt: m.At}
			if m.Origin != nil {
				u.Origin = *m.Origin
			}
			return u, nil
		}
		// Deleted or expired between the two: claim it again.
	}
	return Use{}, fmt.Errorf("%s/%s: the key exists, and is not there when read", kv.Bucket(), key)
}

// FinishFrom is [Finish] by a writer that knows the response's origin (the parser,
// which claimed it): the mark is written without reading the key first.
func FinishFrom(ctx context.Context, kv jetstream.KeyValue, response string, o Origin, keys ...string) error {
	var origin *Origin
	if o.Recorded() {
		origin = &o
	}
	return finish(ctx, kv, response, answeredMark{Origin: origin}, keys)
}

// Claim is [Claim] in the store's bucket: the parser keeps its plans, and which message
// first used each response id, in the gather bucket.
func (s Store) Claim(ctx context.Context, response string, o Origin) (Use, error) {
	return Claim(ctx, s.KV, response, o)
}

// Answered is [FinishFrom] in the store's bucket, deleting nothing: the mark of a
// response the parser answers itself.
func (s Store) Answered(ctx context.Context, response string, o Origin) error {
	return FinishFrom(ctx, s.KV, response, o)
}
