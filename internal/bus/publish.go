package bus

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/messages"
)

// Meta is the routing metadata of a pipeline message, carried in headers.
type Meta struct {
	ResponseID   string
	Conversation string
	// Index and Count are set on calls and results; Count 0 means not set.
	Index, Count int
	// MsgID is JetStream's de-duplication id.
	MsgID string
}

// Header returns the NATS headers of m.
func (m Meta) Header() nats.Header {
	h := nats.Header{}
	set := func(k, v string) {
		if v != "" {
			h.Set(k, v)
		}
	}
	set(messages.HeaderResponseID, m.ResponseID)
	set(messages.HeaderConversation, m.Conversation)
	set(messages.HeaderMsgID, m.MsgID)
	if m.Count > 0 {
		h.Set(messages.HeaderCallIndex, strconv.Itoa(m.Index))
		h.Set(messages.HeaderCallCount, strconv.Itoa(m.Count))
	}
	return h
}

// MetaOf reads the metadata headers of msg; the conversation falls back to the subject.
func MetaOf(msg jetstream.Msg) Meta {
	h := msg.Headers()
	m := Meta{
		ResponseID:   h.Get(messages.HeaderResponseID),
		Conversation: h.Get(messages.HeaderConversation),
		MsgID:        h.Get(messages.HeaderMsgID),
	}
	if m.Conversation == "" {
		m.Conversation = messages.ConversationFromSubject(msg.Subject())
	}
	m.Index, _ = strconv.Atoi(h.Get(messages.HeaderCallIndex))
	m.Count, _ = strconv.Atoi(h.Get(messages.HeaderCallCount))
	return m
}

// Publish publishes body to subject with m's headers and the trace context of ctx, and
// waits for the stream's ack, so a message is never lost between stages. m.MsgID makes
// a repeated publish a no-op.
func Publish(ctx context.Context, js jetstream.Publisher, subject string, m Meta, body []byte) error {
	msg := &nats.Msg{Subject: subject, Header: m.Header(), Data: body}
	InjectTrace(ctx, msg.Header)
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("publish %s: %w", subject, err)
	}
	return nil
}

// Key turns an id into a valid key-value key: ids made of key-safe bytes are used as
// they are (readable in `nats kv ls`), anything else is hashed.
func Key(id string) string {
	if id != "" && len(id) <= 200 && keySafe(id) {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "h_" + hex.EncodeToString(sum[:16])
}

func keySafe(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '=' || c == '/') {
			return false
		}
	}
	return s[0] != '/' && s[len(s)-1] != '/'
}

// Outgoing is one message of a [PublishBatch].
type Outgoing struct {
	Subject string
	Meta    Meta
	Body    []byte
}

// PublishBatch publishes msgs concurrently and waits for every ack: one round trip
// instead of one per message. Each carries the trace context of ctx.
func PublishBatch(ctx context.Context, js jetstream.JetStream, msgs []Outgoing) error {
	if len(msgs) == 1 {
		return Publish(ctx, js, msgs[0].Subject, msgs[0].Meta, msgs[0].Body)
	}
	futures := make([]jetstream.PubAckFuture, 0, len(msgs))
	for _, o := range msgs {
		msg := &nats.Msg{Subject: o.Subject, Header: o.Meta.Header(), Data: o.Body}
		InjectTrace(ctx, msg.Header)
		f, err := js.PublishMsgAsync(msg)
		if err != nil {
			return fmt.Errorf("publish %s: %w", o.Subject, err)
		}
		futures = append(futures, f)
	}
	for i, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("publish %s: %w", msgs[i].Subject, err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
