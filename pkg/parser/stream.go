package parser

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/order"
	"github.com/toolbus/toolbus/pkg/telemetry"
	"github.com/toolbus/toolbus/pkg/toolcall"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Texts keeps the text of streamed responses as their chunks are read.
type Texts interface {
	// Append adds chunk number n (from 1; final marks the last) to the text of response
	// (by its scoped id) and returns the text read so far: every chunk up to the first
	// one still missing, and whether the final chunk is among them. A chunk added before
	// (a redelivery) changes nothing; one that arrives before its predecessor waits for
	// it, and the text returned is without it. A chunk that would make the text longer
	// than limit bytes gives ErrTooLong. first holds the headers that say how to read
	// the response, kept from chunk 1 (later chunks' are ignored), and returned.
	Append(ctx context.Context, response string, n int, chunk []byte, final bool, limit int, first Reading) (Streamed, error)
}

// Reading is how a streamed response is read: its format pin, its reasoning mode and
// its calls' deadline, as the headers of its first chunk give them, so that every chunk
// of the response is read alike.
type Reading struct{ Format, Reasoning, Deadline string }

// ReadingOf returns the reading the headers of d give.
func ReadingOf(d *bus.Delivery) Reading {
	clean := func(s string) string { return strings.Map(mapControl, s) }
	return Reading{Format: clean(d.Header.Get(messages.HeaderFormat)), Reasoning: clean(d.Header.Get(messages.HeaderReasoning)),
		Deadline: clean(d.Header.Get(messages.HeaderDeadline))}
}

func mapControl(r rune) rune {
	if r < ' ' {
		return -1
	}
	return r
}

// Streamed is a streamed response as read so far.
type Streamed struct {
	Text string
	// Final: the text holds every chunk, the last one included.
	Final   bool
	Reading Reading
}

// Streams keeps the state of streamed responses ([order.StreamStore]).
type Streams interface {
	Update(ctx context.Context, response string, fn func(*order.Streamed) (bool, error)) (order.Streamed, error)
}

// MaxStreamedBytes bounds a streamed response's text, which one key-value entry keeps
// (the payload limit, less room for the entry's headers); parser.max_response_bytes
// bounds it further.
const MaxStreamedBytes = 1<<20 - 64<<10

// ErrTooLong: the chunk makes the response longer than its limit.
var ErrTooLong = errors.New("the streamed response is over its size limit")

// Chunk takes one chunk of a streamed response (on messages.StreamSubject, numbered by
// messages.HeaderChunk, the last one marked by messages.HeaderFinal) and returns the
// calls that may run now: every call the response's text settles so far
// (toolcall.ExtractPartial) that the ordering rule lets run (order.Streamed). The last
// chunk reads the whole response as Parse does, sends the calls left, and sends the
// formatter the response's end; a response without calls gets its no_tool_call output.
//
// Chunks are read in their order whichever replica takes them, in whatever order: the
// text and the response's state live in the gather bucket, updated with compare-and-set,
// and a chunk that comes before its predecessor waits there for it ([TextStore]). The
// reading of the last chunk is the reading of whichever chunk completes the text. A replica that dies
// mid-response leaves nothing behind that another cannot resume from, and the calls'
// message ids make what it may have sent already a no-op.
func (s *Stage) Chunk(ctx context.Context, d *bus.Delivery) ([]bus.Outgoing, error) {
	meta := d.Meta
	if err := s.check(meta.Conversation); err != nil {
		return nil, fmt.Errorf("chunk on %s: %w", d.Subject, err)
	}
	if meta.ResponseID == "" {
		return nil, fmt.Errorf("chunk on %s: no %s header: a streamed response's chunks must name it", d.Subject, messages.HeaderResponseID)
	}
	response := messages.ScopedID(meta.Conversation, meta.ResponseID)
	refuse := func(err error) []bus.Outgoing {
		m := meta
		m.MsgID = response
		out := messages.RefusedOutput(meta.ResponseID, meta.Conversation, err)
		return []bus.Outgoing{{Subject: messages.OutputSubject(meta.Conversation), Meta: m, Body: messages.AppendOutput(nil, &out)}}
	}
	if meta.Spoofed != "" {
		return refuse(messages.Errorf(messages.CodeNotAllowed,
			"the response was streamed on conversation %q's subject, but its %s header names %q; its tool calls were not run",
			meta.Conversation, messages.HeaderConversation, meta.Spoofed)), nil
	}
	n, err := strconv.Atoi(d.Header.Get(messages.HeaderChunk))
	if err != nil || n < 1 {
		return refuse(messages.Errorf(messages.CodeParseError,
			"a chunk of the streamed response has %s %q, not a number from 1; the response was not read", messages.HeaderChunk, d.Header.Get(messages.HeaderChunk))), nil
	}
	if s.Texts == nil || s.Streams == nil {
		return nil, errors.New("the parser keeps no stream state: it cannot read streamed responses")
	}
	limit := min(cmp.Or(s.maxInput(), toolcall.DefaultMaxInputSize), MaxStreamedBytes)
	read, err := s.Texts.Append(ctx, response, n, d.Data, d.Header.Get(messages.HeaderFinal) == "true", limit, ReadingOf(d))
	switch {
	case errors.Is(err, ErrTooLong):
		return refuse(messages.Errorf(messages.CodeParseError,
			"the streamed response is over %d bytes, the limit; the calls after that point were not read", limit)), nil
	case err != nil:
		return nil, bus.Retry(err, time.Second)
	}
	text, final := read.Text, read.Final
	var deadline time.Time
	if v := read.Reading.Deadline; v != "" {
		deadline, _ = time.Parse(time.RFC3339Nano, v)
	}
	opts := s.extractOptions(read.Reading.Format, read.Reading.Reasoning)
	var ex toolcall.Extraction
	settled := 0
	if final {
		ex = toolcall.Extract(text, &opts.Options)
		settled = len(ex.Calls)
	} else {
		ex, settled = toolcall.ExtractPartial(text, &opts.Options)
	}
	ex.Calls = ex.Calls[:settled]
	w := CheckArguments(planOf(ex, meta.ResponseID, meta.Conversation, deadline), opts.checks)
	snap := s.snapshot()
	together := make([]bool, len(w.Calls))
	for i := range w.Calls {
		together[i] = s.together(snap, &w.Calls[i])
	}
	by := order.ByChunk(n)
	var released []messages.ToolCall
	st, err := s.Streams.Update(ctx, response, func(st *order.Streamed) (bool, error) {
		changed := st.Add(w.Calls, together)
		if st.OnError == "" && s.Order.OnError != "" {
			// The policy holds from the first call on: a call released by a result
			// before the last chunk is skipped after a failure too.
			st.OnError, changed = s.Order.OnError, true
		}
		if final && !st.Final {
			st.Final, changed = true, true
		}
		var rel bool
		released, rel = st.Release(by)
		return changed || rel, nil
	})
	if err != nil {
		return nil, bus.Retry(err, time.Second)
	}
	trace.SpanFromContext(ctx).SetAttributes(telemetry.ResponseID.String(meta.ResponseID),
		attribute.Int("toolbus.chunk", n), attribute.Int("toolbus.calls", len(st.Calls)), attribute.Int("toolbus.released", len(released)))

	if final && len(st.Calls) == 0 {
		m := meta
		m.MsgID = response
		out := messages.NoToolCall(meta.ResponseID, meta.Conversation)
		return []bus.Outgoing{{Subject: messages.OutputSubject(meta.Conversation), Meta: m, Body: messages.AppendOutput(nil, &out)}}, nil
	}
	out := make([]bus.Outgoing, 0, len(released)+1)
	for i := range released {
		c := &released[i]
		m := meta
		m.MsgID, m.Index, m.Count, m.Next = c.ID, c.Index, 0, 0
		out = append(out, bus.Outgoing{Subject: messages.CallSubject(meta.Conversation), Meta: m, Body: messages.AppendCall(make([]byte, 0, 192+len(c.Arguments)), c)})
	}
	if final {
		// The formatter answers the response once every call is answered; the calls may
		// all be answered already, so it is told the response ended (through the
		// executor, as everything the formatter reads).
		end := messages.ToolCall{ID: response + "/end", ResponseID: meta.ResponseID, Conversation: meta.Conversation,
			Index: len(st.Calls), Arguments: []byte("{}"), Stream: true, End: true}
		m := meta
		m.MsgID, m.Index, m.Count, m.Next = end.ID, end.Index, 0, 0
		out = append(out, bus.Outgoing{Subject: messages.CallSubject(meta.Conversation), Meta: m, Body: messages.AppendCall(nil, &end)})
	}
	return out, nil
}

// TextStore keeps the text of streamed responses in a key-value bucket (the gather
// bucket). [TextKey] holds the number of chunks read, whether the last of them was
// final, a line break, and the text of those chunks. A chunk that arrives before the one
// it follows waits under [PieceKey] until the reading of its predecessor takes it in:
// whichever replica reads a chunk also reads the chunks waiting after it, so chunks may
// be taken by any replica in any order.
type TextStore struct{ KV jetstream.KeyValue }

// TextKey is where the text of a streamed response (by its scoped id) is kept.
func TextKey(response string) string { return bus.Key(response) + ".text" }

// PieceKey is where chunk n of a streamed response waits for the chunks before it.
func PieceKey(response string, n int) string {
	return bus.Key(response) + ".piece." + strconv.Itoa(n)
}

// Append implements [Texts].
func (s TextStore) Append(ctx context.Context, response string, n int, chunk []byte, final bool, limit int, first Reading) (Streamed, error) {
	t, rev, err := s.read(ctx, response)
	if err != nil {
		return Streamed{}, err
	}
	if n > t.read+1 {
		// Early: it waits for its predecessor, which may have been read meanwhile.
		piece := append([]byte{'0'}, chunk...)
		if final {
			piece[0] = '1'
		}
		if _, err := s.KV.Put(ctx, PieceKey(response, n), piece); err != nil {
			return Streamed{}, fmt.Errorf("%s/%s: %w", s.KV.Bucket(), PieceKey(response, n), err)
		}
		if t, rev, err = s.read(ctx, response); err != nil {
			return Streamed{}, err
		}
		if n > t.read+1 {
			return t.streamed(), nil
		}
	}
	for {
		if n <= t.read {
			// Read already (a redelivery), or the chunk before it took it in; the chunks
			// waiting after the text may be taken in now.
			next, nextFinal, ok, err := s.piece(ctx, response, t.read+1)
			if err != nil || !ok {
				return t.streamed(), err
			}
			n, chunk, final = t.read+1, next, nextFinal
		}
		if len(t.text)+len(chunk) > limit {
			return Streamed{}, fmt.Errorf("chunk %d of %s: %w", n, response, ErrTooLong)
		}
		next := streamText{read: n, final: final, reading: t.reading, text: append(append(make([]byte, 0, len(t.text)+len(chunk)), t.text...), chunk...)}
		if n == 1 {
			next.reading = first
		}
		var stored uint64
		if rev == 0 {
			stored, err = s.KV.Create(ctx, TextKey(response), next.encode())
		} else {
			stored, err = s.KV.Update(ctx, TextKey(response), next.encode(), rev)
		}
		switch {
		case err == nil:
			t, rev = next, stored
		case errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch):
			if t, rev, err = s.read(ctx, response); err != nil {
				return Streamed{}, err
			}
		default:
			return Streamed{}, fmt.Errorf("%s/%s: %w", s.KV.Bucket(), TextKey(response), err)
		}
	}
}

// streamText is the value at TextKey: a line with the count of chunks read (and
// " final"), a line with the reading (format, reasoning, deadline, tab-separated), and
// the text.
type streamText struct {
	read    int
	final   bool
	reading Reading
	text    []byte
}

func (t streamText) streamed() Streamed {
	return Streamed{Text: string(t.text), Final: t.final, Reading: t.reading}
}

func (t streamText) encode() []byte {
	b := strconv.AppendInt(make([]byte, 0, len(t.text)+64), int64(t.read), 10)
	if t.final {
		b = append(b, " final"...)
	}
	b = append(b, '\n')
	b = append(append(append(append(append(b, t.reading.Format...), '\t'), t.reading.Reasoning...), '\t'), t.reading.Deadline...)
	return append(append(b, '\n'), t.text...)
}

func (s TextStore) read(ctx context.Context, response string) (streamText, uint64, error) {
	e, err := s.KV.Get(ctx, TextKey(response))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return streamText{}, 0, nil
	}
	if err != nil {
		return streamText{}, 0, fmt.Errorf("%s/%s: %w", s.KV.Bucket(), TextKey(response), err)
	}
	bad := fmt.Errorf("%s/%s: not a streamed response's text", s.KV.Bucket(), TextKey(response))
	head, rest, ok := bytes.Cut(e.Value(), []byte("\n"))
	reading, text, ok2 := bytes.Cut(rest, []byte("\n"))
	count, final := bytes.CutSuffix(head, []byte(" final"))
	read, err := strconv.Atoi(string(count))
	fields := strings.Split(string(reading), "\t")
	if !ok || !ok2 || err != nil || len(fields) != 3 {
		return streamText{}, 0, bad
	}
	return streamText{read: read, final: final, reading: Reading{Format: fields[0], Reasoning: fields[1], Deadline: fields[2]}, text: text}, e.Revision(), nil
}

// piece returns chunk n of response if it waits under PieceKey.
func (s TextStore) piece(ctx context.Context, response string, n int) ([]byte, bool, bool, error) {
	e, err := s.KV.Get(ctx, PieceKey(response, n))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, false, false, nil
	}
	if err != nil {
		return nil, false, false, fmt.Errorf("%s/%s: %w", s.KV.Bucket(), PieceKey(response, n), err)
	}
	v := e.Value()
	if len(v) == 0 {
		return nil, false, false, nil // deleted
	}
	return v[1:], v[0] == '1', true, nil
}

// maxInput is the configured bound of a response's size (0: toolcall's default).
func (s *Stage) maxInput() int {
	if s.Extract == nil {
		return 0
	}
	return s.Extract.MaxInputSize
}
