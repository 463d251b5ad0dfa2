package bus

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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
	// Index, Count and Next are set on calls and results; Count 0 means not set, Next 0
	// that the call is in its response's last segment.
	Index, Count, Next int
	// MsgID is JetStream's de-duplication id.
	MsgID string
	// Spoofed is a Toolbus-Conversation header that names another conversation than the
	// message's subject; the subject's conversation is the one in Conversation.
	Spoofed string
}

// ResponseIDAt is the id of the response m is the metadata of, at seq of its stream: the
// response id header, else its Nats-Msg-Id, else one derived from the sequence (stable
// across redeliveries).
func (m Meta) ResponseIDAt(seq uint64) string {
	switch {
	case m.ResponseID != "":
		return m.ResponseID
	case m.MsgID != "":
		return m.MsgID
	}
	return m.Conversation + "-" + strconv.FormatUint(seq, 10)
}

// Header returns the NATS headers of m.
func (m Meta) Header() nats.Header {
	h := make(nats.Header, 6)
	// One array holds every value (nats.Header.Set allocates a slice per header); each
	// header's slice is capped at its own value, so appending to it copies.
	vals := make([]string, 0, 6)
	set := func(k, v string) {
		if v != "" {
			vals = append(vals, v)
			h[k] = vals[len(vals)-1 : len(vals) : len(vals)]
		}
	}
	set(messages.HeaderResponseID, m.ResponseID)
	set(messages.HeaderConversation, m.Conversation)
	set(messages.HeaderMsgID, m.MsgID)
	if m.Count > 0 {
		set(messages.HeaderCallIndex, strconv.Itoa(m.Index))
		set(messages.HeaderCallCount, strconv.Itoa(m.Count))
	}
	if m.Next > 0 {
		set(messages.HeaderCallNext, strconv.Itoa(m.Next))
	}
	return h
}

// MetaOf reads the metadata of msg (see [MetaFrom]).
func MetaOf(msg jetstream.Msg) Meta { return MetaFrom(msg.Subject(), msg.Headers()) }

// MetaFrom reads the metadata headers of a message published on subject. The
// conversation is the subject's: publish permissions govern subjects, so the subject is
// the authority, and a Toolbus-Conversation header naming another one is kept in
// Spoofed. Only a message on a subject that is no pipeline subject takes its
// conversation from the header.
func MetaFrom(subject string, h nats.Header) Meta {
	m := Meta{
		ResponseID:   h.Get(messages.HeaderResponseID),
		Conversation: messages.ConversationFromSubject(subject),
		MsgID:        h.Get(messages.HeaderMsgID),
	}
	if claimed := h.Get(messages.HeaderConversation); m.Conversation == "" {
		m.Conversation = claimed
	} else if claimed != "" && claimed != m.Conversation {
		m.Spoofed = claimed
	}
	m.Index = headerInt(h, messages.HeaderCallIndex)
	m.Count = headerInt(h, messages.HeaderCallCount)
	m.Next = headerInt(h, messages.HeaderCallNext)
	return m
}

// headerInt reads a number header; 0 when it is absent or not a number. Absent is the
// rule (only calls carry these), so it is not handed to strconv, whose error allocates.
func headerInt(h nats.Header, key string) int {
	v := h.Get(key)
	if v == "" {
		return 0
	}
	n, _ := strconv.Atoi(v)
	return n
}

// JSON returns the message of v, encoded as JSON, to subject with m's headers.
func JSON(subject string, m Meta, v any) (Outgoing, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return Outgoing{}, fmt.Errorf("encode the message to %s: %w", subject, err)
	}
	return Outgoing{Subject: subject, Meta: m, Body: body}, nil
}

// Key turns an id into a valid key-value key: ids made of key-safe bytes are used as
// they are (readable in `nats kv ls`), anything else is hashed — a tenant's ids among
// them, whose dot would be a token of the key's subject, where keys built on this one
// (".segment.", ".stream") could collide.
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

// Outgoing is one message a stage produces; the stage runner publishes it.
type Outgoing struct {
	Subject string
	Meta    Meta
	Body    []byte
}
