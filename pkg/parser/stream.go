package parser

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/order"
	"github.com/toolbus/toolbus/pkg/telemetry"
	"github.com/toolbus/toolbus/pkg/toolcall"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Texts keeps the text of streamed responses as their chunks are read ([TextStore]).
// Every method returns the response as stored after it, and order.ErrAnswered for a
// response whose output is stored already (its text is gone).
type Texts interface {
	// Append adds chunk number n (from 1; final marks the last) to the text of response
	// (by its scoped id): the text read so far is every chunk up to the first one still
	// missing; one that arrives before its predecessor waits for it. A chunk added
	// before (a redelivery), or after the response ended, changes nothing. A chunk that
	// would make what the response holds longer than limit bytes gives ErrTooLong.
	// first holds the headers that say how to read the response, kept from chunk 1
	// (later chunks' are ignored).
	Append(ctx context.Context, response string, n int, chunk []byte, final bool, limit int, first Reading) (Streamed, error)
	// EndAt records that chunk n ends the response with why when its turn comes (its
	// final mark could not be read): once every chunk before it is read, the response
	// ends there as End ends it, by order.ByChunk(n).
	EndAt(ctx context.Context, response string, n int, first Reading, why *messages.ResultError) (Streamed, error)
	// End ends the response without its last chunk, why being the reason the output
	// gives and by what ended it (order.ByChunk, ByWatch); a response that ended
	// already stays as it ended.
	End(ctx context.Context, response, by string, why *messages.ResultError) (Streamed, error)
	// Expire ends the response with why's error, by ByWatch, when nothing was written to
	// it for idle; otherwise it returns how long is left until then.
	Expire(ctx context.Context, response string, idle time.Duration, why func(Streamed, time.Duration) *messages.ResultError) (Streamed, time.Duration, error)
	// Finish is called once the response's output is stored: the response is marked
	// answered and its text and state are deleted (order.Finish). Refinish deletes
	// them again when they are still there (order.Refinish).
	Finish(ctx context.Context, response string) error
	Refinish(ctx context.Context, response string) error
}

// Reading is how a streamed response is read: its format pin, its reasoning mode and
// its calls' deadline, as the headers of its first chunk give them, so that every chunk
// of the response is read alike.
type Reading struct {
	Format       string `json:"format,omitempty"`
	OutputFormat string `json:"output_format,omitempty"`
	Reasoning    string `json:"reasoning,omitempty"`
	Deadline     string `json:"deadline,omitempty"`
}

// ReadingOf returns the reading the headers of d give.
func ReadingOf(d *bus.Delivery) Reading {
	clean := func(s string) string { return strings.Map(mapControl, s) }
	return Reading{Format: clean(d.Header.Get(messages.HeaderFormat)), OutputFormat: clean(d.Header.Get(messages.HeaderOutputFormat)),
		Reasoning: clean(d.Header.Get(messages.HeaderReasoning)),
		Deadline:  clean(d.Header.Get(messages.HeaderDeadline))}
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
	// Read counts the chunks in Text. Final: the text holds every chunk, the last one
	// included.
	Read  int
	Final bool
	// End, when set, says why the response ended without its last chunk, and By what
	// ended it.
	End *messages.ResultError
	By  string
	// Watch is the chunk that publishes the response's watch: the first one written
	// (its redeliveries publish it again, which its message id makes a no-op).
	Watch   int
	Reading Reading
	// Times are when its first chunks were read (Unix milliseconds, at most
	// MaxChunkEvents of them).
	Times []int64
	// Found: the response has a text; Changed: the call that returned it wrote it.
	Found, Changed bool
}

// Ended reports whether the response ended, with its last chunk or without.
func (r Streamed) Ended() bool { return r.Final || r.End != nil }

// Streams keeps the state of streamed responses ([order.StreamStore]).
type Streams interface {
	Update(ctx context.Context, response string, fn func(*order.Streamed) (bool, error)) (order.Streamed, error)
}

// MaxStreamedBytes bounds a streamed response's text, which one key-value entry keeps
// (the payload limit, less room for the entry's headers); parser.max_response_bytes
// bounds it further.
const MaxStreamedBytes = 1<<20 - 64<<10

// DefaultStreamIdle is how long a streamed response may go without a chunk before it is
// answered as it stands (parser.stream_idle_timeout).
const DefaultStreamIdle = time.Minute

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
// reading of the last chunk is the reading of whichever chunk completes the text. A
// replica that dies mid-response leaves nothing behind that another cannot resume from,
// and the calls' message ids make what it may have sent already a no-op.
//
// Every streamed response ends. A chunk that cannot be taken (its number or final mark
// unreadable, its number past MaxChunks, the text past its size limit, a conversation
// header naming another conversation) ends it with that error; so does the idle
// timeout, through a watch message the first chunk publishes on the response's subject
// ([Stage.watch]). A response that ended without its last chunk is answered like one
// that ended with it, its calls released by then having run and the rest not; the
// output carries the error after their results.
func (s *Stage) Chunk(ctx context.Context, d *bus.Delivery) ([]bus.Outgoing, error) {
	meta := d.Meta
	if err := s.check(meta.Conversation); err != nil {
		return nil, fmt.Errorf("chunk on %s: %w", d.Subject, err)
	}
	if meta.ResponseID == "" {
		return nil, fmt.Errorf("chunk on %s: no %s header: a streamed response's chunks must name it", d.Subject, messages.HeaderResponseID)
	}
	if s.Texts == nil || s.Streams == nil {
		return nil, errors.New("the parser keeps no stream state: it cannot read streamed responses")
	}
	response := messages.ScopedID(meta.Conversation, meta.ResponseID)
	if gen := watchGeneration(d, response); gen > 0 {
		return s.watch(ctx, d, gen)
	}
	h, why := ReadChunkHeaders(d.Header, s.maxChunks())
	if why == nil && meta.Spoofed != "" {
		why = messages.Errorf(messages.CodeNotAllowed,
			"chunk %d was streamed on conversation %q's subject, but its %s header names %q; the response was ended there and its calls not released before were not run",
			h.N, meta.Conversation, messages.HeaderConversation, meta.Spoofed)
	}
	by := order.ByChunk(h.N)
	limit := min(cmp.Or(s.maxInput(), toolcall.DefaultMaxInputSize), MaxStreamedBytes)
	var read Streamed
	var err error
	switch {
	case why == nil && h.End != nil:
		read, err = s.Texts.EndAt(ctx, response, h.N, ReadingOf(d), &messages.ResultError{Code: h.End.Code, Message: h.End.Message})
	case why == nil:
		read, err = s.Texts.Append(ctx, response, h.N, d.Data, h.Final, limit, ReadingOf(d))
		if errors.Is(err, ErrTooLong) {
			why = messages.Errorf(messages.CodeParseError,
				"the streamed response is over %d bytes with chunk %d, the limit; the calls after that point were not read", limit, h.N)
		}
	}
	if why != nil {
		read, err = s.Texts.End(ctx, response, by, &messages.ResultError{Code: why.Code, Message: why.Message})
	}
	switch {
	case errors.Is(err, order.ErrAnswered) && d.Delivered == 1 && h.N == 1:
		// The first chunk of a response that uses the id of one answered before:
		// refused, run not (its other chunks find the answered mark too, and the
		// refusal's message id makes their publishes no-ops).
		return []bus.Outgoing{reused(meta)}, nil
	case errors.Is(err, order.ErrAnswered):
		// A chunk after the output: nothing left to do, unless this is a redelivery of
		// the chunk that stored the output and died before it deleted the rest.
		if d.Delivered > 1 {
			d.OnPublished(func(ctx context.Context) error { return s.Texts.Refinish(ctx, response) })
		}
		return nil, nil
	case err != nil:
		return nil, bus.Retry(err, time.Second)
	}
	if read.Ended() && h.N > read.Read && read.By != by {
		// A chunk after the response ended (past its last chunk, or after its end):
		// whatever ended it answers the response.
		return nil, nil
	}
	if h.N > read.Read && !read.Ended() {
		// It waits for its predecessor: nothing is settled by it.
		return s.watching(meta, response, h.N, read, nil), nil
	}
	out, err := s.settle(ctx, d, meta, response, read, by, h.N)
	if errors.Is(err, order.ErrAnswered) {
		// The response was answered while this chunk was read (a redelivery, or a
		// chunk handled twice at once): its state was not started again.
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return s.watching(meta, response, h.N, read, out), nil
}

// settle reads the text of a response as it stands (the whole response once it ended),
// adds the calls it settles to the response's state and returns the calls that may run
// now, released by by; once the response ended, its end for the formatter, or the
// output of a response without calls.
func (s *Stage) settle(ctx context.Context, d *bus.Delivery, meta bus.Meta, response string, read Streamed, by string, n int) ([]bus.Outgoing, error) {
	text, final, ended := read.Text, read.Final, read.Ended()
	var deadline time.Time
	if v := read.Reading.Deadline; v != "" {
		deadline, _ = time.Parse(time.RFC3339Nano, v)
	}
	opts := s.extractOptions(read.Reading.Format, read.Reading.Reasoning, messages.Tenant(meta.Conversation))
	var ex toolcall.Extraction
	settled := 0
	if final {
		ex = toolcall.Extract(text, &opts.Options)
		settled = len(ex.Calls)
	} else {
		ex, settled = toolcall.ExtractPartial(text, &opts.Options)
	}
	ex.Calls = ex.Calls[:settled]
	w := WithOutputFormat(planOf(ex, meta.ResponseID, meta.Conversation, deadline),
		s.outputFormat(read.Reading.OutputFormat, messages.Tenant(meta.Conversation)))
	// Only the calls the state does not hold yet are checked against their schemas (the
	// others stand as first settled): a chunk costs its own calls' checks, not every
	// call's of the response so far.
	snap := s.snapshot()
	together := make([]bool, len(w.Calls))
	checked := len(w.Calls) // the calls from checked on are checked
	check := func(from int) {
		if from >= checked {
			return
		}
		CheckArguments(Work{Calls: w.Calls[from:checked]}, opts.checks)
		for i := from; i < checked; i++ {
			together[i] = s.together(snap, &w.Calls[i])
		}
		checked = from
	}
	if !ended && d.Delivered == 1 && settled <= s.held.get(response) {
		// The state holds every call this chunk settles already (a state's calls only
		// grow), so the chunk adds none, and releases none: calls that wait are released
		// by the results they wait for. Most chunks of a model's answer complete no
		// call: they cost the text's write alone. (A redelivery updates the state, to
		// release again what it released.)
		return nil, nil
	}
	var released []messages.ToolCall
	finished := false
	st, err := s.Streams.Update(ctx, response, func(st *order.Streamed) (bool, error) {
		finished = false
		changed := false
		if by != order.ByEnd {
			// The calls a chunk releases are settled again from the text by its
			// redelivery: they need no key of their own. (The formatter releases by the
			// end too, and cannot.)
			st.Derive(func(i int) (messages.ToolCall, bool) {
				if i >= len(w.Calls) {
					return messages.ToolCall{}, false
				}
				check(i)
				return w.Calls[i], true
			})
		}
		if !st.Final {
			check(len(st.Calls))
			changed = st.Add(w.Calls, together)
		}
		if st.OnError == "" && s.Order.OnError != "" {
			// The policy holds from the first call on: a call released by a result
			// before the last chunk is skipped after a failure too.
			st.OnError, changed = s.Order.OnError, true
		}
		if ended && !st.Final {
			if read.End != nil {
				// What the rule lets run by now runs, as it would had the text been read
				// before the end came; the rest is released with the end's error.
				st.Release(by)
			}
			st.Final, st.End, changed = true, read.End, true
			finished = true
		}
		var rel bool
		released, rel = st.Release(by)
		return changed || rel, nil
	})
	if err != nil {
		return nil, order.Retry(err, time.Second)
	}
	if st.Final {
		s.held.forget(response)
	} else {
		s.held.set(response, len(st.Calls))
	}
	if finished {
		s.recordStream(ctx, d, meta, read, len(st.Calls))
	}

	if st.Final && len(st.Calls) == 0 {
		m := meta
		m.MsgID = response
		out := messages.NoToolCall(meta.ResponseID, meta.Conversation)
		if st.End != nil {
			out = messages.RefusedOutput(meta.ResponseID, meta.Conversation, &messages.ToolError{Code: st.End.Code, Message: st.End.Message})
		}
		// Once the output is stored, the response's keys go; its mark stays.
		d.OnPublished(func(ctx context.Context) error { return s.Texts.Finish(ctx, response) })
		return []bus.Outgoing{{Subject: messages.OutputSubject(meta.Conversation), Meta: m, Body: messages.AppendOutput(nil, &out)}}, nil
	}
	out := make([]bus.Outgoing, 0, len(released)+1)
	for i := range released {
		c := &released[i]
		m := meta
		m.MsgID, m.Index, m.Count, m.Next = c.ID, c.Index, 0, 0
		out = append(out, bus.Outgoing{Subject: messages.CallSubject(meta.Conversation), Meta: m, Body: messages.AppendCall(make([]byte, 0, 192+len(c.Arguments)), c)})
	}
	if st.Final {
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

// watching adds to out, the messages chunk n of response produced, the response's watch
// ([Stage.watch]) when n is the chunk that publishes it: the first chunk written, which
// the text records in the same write, so that it costs no write of its own; a
// redelivery of that chunk publishes it again, in case its first publish failed.
func (s *Stage) watching(meta bus.Meta, response string, n int, read Streamed, out []bus.Outgoing) []bus.Outgoing {
	if s.streamIdle() <= 0 || read.Watch != n || read.Ended() || !read.Found {
		return out
	}
	return append(out, watchMessage(meta, response, 1))
}

// watchMessage is generation gen (from 1) of the watch of response: an empty message
// on the response's subject without a chunk number, its message id
// "<response>/watch/<gen>", which de-duplicates it and marks it as the watch.
func watchMessage(meta bus.Meta, response string, gen int) bus.Outgoing {
	m := bus.Meta{ResponseID: meta.ResponseID, Conversation: meta.Conversation, MsgID: response + "/watch/" + strconv.Itoa(gen)}
	return bus.Outgoing{Subject: messages.StreamSubject(meta.Conversation), Meta: m}
}

// watchGeneration is the generation of the watch d is, or 0 when d is no watch.
func watchGeneration(d *bus.Delivery, response string) int {
	rest, ok := strings.CutPrefix(d.Meta.MsgID, response+"/watch/")
	if !ok || d.Header.Get(messages.HeaderChunk) != "" {
		return 0
	}
	gen, err := strconv.Atoi(rest)
	if err != nil || gen < 1 {
		return 0
	}
	return gen
}

// watch handles the watch of a streamed response: a message of the parser's own on the
// response's subject that the runner hands back until nothing was written to the
// response's text for the idle timeout (StreamIdle), and which then ends the response
// with a timeout error and answers it as a chunk that ended it would. It is a message
// in the work queue, not a timer: whichever replica holds it may die, and another
// takes it. When its deliveries run out, it is replaced by its next generation.
func (s *Stage) watch(ctx context.Context, d *bus.Delivery, gen int) ([]bus.Outgoing, error) {
	meta := d.Meta
	response := messages.ScopedID(meta.Conversation, meta.ResponseID)
	idle := s.streamIdle()
	if idle <= 0 {
		return nil, nil
	}
	if d.Last {
		return []bus.Outgoing{watchMessage(meta, response, gen+1)}, nil
	}
	read, left, err := s.Texts.Expire(ctx, response, idle, idleError)
	switch {
	case errors.Is(err, order.ErrAnswered):
		return nil, nil
	case err != nil:
		return nil, bus.Retry(err, time.Second)
	case !read.Found:
		return nil, nil // expired from the bucket: nothing left to answer
	case read.Ended():
		if read.By != ByWatch {
			return nil, nil // what ended it answers the response
		}
		out, err := s.settle(ctx, d, meta, response, read, order.ByEnd, read.Read)
		if errors.Is(err, order.ErrAnswered) {
			return nil, nil
		}
		return out, err
	}
	return nil, bus.Retry(fmt.Errorf("watching streamed response %s: %d chunks read; it times out in %v unless a chunk comes", meta.ResponseID, read.Read, left.Round(time.Millisecond)), left)
}

// idleError is the error a streamed response that went idle for idle is answered with.
func idleError(read Streamed, idle time.Duration) *messages.ResultError {
	after := fmt.Sprintf("after chunk %d", read.Read)
	if read.Read == 0 {
		after = "and chunk 1 never came"
	}
	return &messages.ResultError{Code: messages.CodeTimeout, Message: fmt.Sprintf(
		"the streamed response never finished: no chunk came for %v %s, and none was marked %s; the calls released by then ran, the rest were not run",
		idle, after, messages.HeaderFinal)}
}

// streamIdle is the idle timeout of streamed responses (negative: none).
func (s *Stage) streamIdle() time.Duration { return cmp.Or(s.StreamIdle, DefaultStreamIdle) }

// maxChunks bounds the chunks of a streamed response (negative: no bound).
func (s *Stage) maxChunks() int { return cmp.Or(s.MaxChunks, DefaultMaxChunks) }

// maxInput is the configured bound of a response's size (0: toolcall's default).
func (s *Stage) maxInput() int {
	if s.Extract == nil {
		return 0
	}
	return s.Extract.MaxInputSize
}

// recordStream records the span of a streamed response, once, by the delivery that
// ended it: "process toolbus.stream.{conversation}" from its first chunk to now, with an
// event for each chunk read (the first MaxChunkEvents; then one event counting the
// rest). Its chunks have no span each, so a long answer is one span, not thousands.
func (s *Stage) recordStream(ctx context.Context, d *bus.Delivery, meta bus.Meta, read Streamed, calls int) {
	tracer := s.Tracer
	if tracer == nil {
		tracer = telemetry.Tracer(nil)
	}
	start := time.Now()
	if len(read.Times) > 0 {
		start = time.UnixMilli(read.Times[0])
	}
	template := bus.DestinationTemplate(d.Subject, meta.Conversation)
	_, span := tracer.Start(ctx, "process "+template, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithTimestamp(start))
	if !span.IsRecording() {
		span.End()
		return
	}
	span.SetAttributes(telemetry.MessagingSystem.String(telemetry.MessagingSystemNATS),
		telemetry.MessagingOperation.String("process"), telemetry.MessagingOpName.String("process"),
		telemetry.MessagingDestination.String(d.Subject), telemetry.MessagingTemplate.String(template),
		telemetry.Conversation.String(meta.Conversation), telemetry.ResponseID.String(meta.ResponseID),
		attribute.Int("toolbus.chunks", read.Read), attribute.Int("toolbus.calls", calls))
	for i, ms := range read.Times {
		span.AddEvent("chunk", trace.WithTimestamp(time.UnixMilli(ms)), trace.WithAttributes(attribute.Int("toolbus.chunk", i+1)))
	}
	if rest := read.Read - len(read.Times); rest > 0 {
		span.AddEvent("chunks", trace.WithAttributes(attribute.Int("toolbus.chunks_not_listed", rest)))
	}
	if read.End != nil {
		span.SetAttributes(telemetry.ErrorCode.String(string(read.End.Code)))
		span.AddEvent("ended", trace.WithAttributes(telemetry.ErrorMessage.String(read.End.Message)))
	}
	span.End()
}

// heldCalls counts the calls the stream state of each response held when this process
// last saw it, for at most maxHeld responses (past that it starts again: a response it
// forgot costs its next chunk a state update, nothing else).
type heldCalls struct {
	mu sync.Mutex
	n  map[string]int
}

const maxHeld = 4096

// get returns the count of response, -1 when not known.
func (h *heldCalls) get(response string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n, ok := h.n[response]; ok {
		return n
	}
	return -1
}

func (h *heldCalls) set(response string, n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == nil || len(h.n) >= maxHeld {
		h.n = map[string]int{}
	}
	h.n[response] = max(h.n[response], n)
}

func (h *heldCalls) forget(response string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.n, response)
}
