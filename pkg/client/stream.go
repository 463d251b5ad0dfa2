package client

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/telemetry"
	"go.opentelemetry.io/otel/trace"
)

// StreamOptions tunes one streamed response.
type StreamOptions struct {
	SubmitOptions
	// Progress, when set, is called with each call's result as soon as it is answered,
	// before the response's output (its value cut to a preview), from a goroutine of
	// the connection.
	Progress func(messages.ToolResult)
}

// Stream is one response published chunk by chunk while the model writes it: toolbus
// runs each call as soon as its block is complete (and the order of the response lets
// it), not after the last token. Write each piece as it comes, then Close, which returns
// the response's one output, the same as a whole response's. A Stream is for one
// goroutine.
//
// Chunks go out one at a time, each once the one before is stored: what is written
// while a chunk is on its way goes out together as the next (as TCP's Nagle algorithm
// does). A model that writes slower than a chunk is stored sends a chunk per write, at
// once; one that writes faster, or a loaded bus, sends fewer and larger chunks, each
// costing the pipeline a round of its own. Write does not wait for the bus, unless what
// waits reaches MaxPendingBytes; Flush waits until everything written is stored.
type Stream struct {
	c            *Client
	ctx          context.Context
	conversation string
	id           string
	opts         StreamOptions
	n            int // chunks stored
	ch           chan []byte
	progress     *nats.Subscription
	started      time.Time
	closed       bool
	span         trace.Span

	mu       sync.Mutex // progress is called for one result at a time
	reported map[int]bool
	done     bool

	// The sender: pending is written and not sent yet; sending is set while a
	// goroutine sends chunks (sent is closed when it stops, having sent all); failed
	// is the error that stopped it, after which the stream takes no more.
	smu     sync.Mutex
	room    *sync.Cond // signalled when a chunk is stored
	pending []byte
	sending bool
	sent    chan struct{}
	failed  error
}

// MaxPendingBytes bounds what a Stream holds written and not sent: a Write past it
// waits until the chunk on its way is stored.
const MaxPendingBytes = 256 << 10

// Stream starts a streamed response of conversation. ctx carries the trace the
// response continues.
func (c *Client) Stream(ctx context.Context, conversation string, o *StreamOptions) (*Stream, error) {
	if err := c.check(ctx, conversation); err != nil {
		return nil, err
	}
	s := &Stream{c: c, conversation: conversation, started: time.Now()}
	s.room = sync.NewCond(&s.smu)
	if o != nil {
		s.opts = *o
	}
	s.id = s.opts.ResponseID
	if s.id == "" {
		s.id = nuid.Next()
	}
	// One trace per response, streamed or not: a span of the whole stream (a child of
	// the caller's, or a new root) whose context every chunk carries, ended at Close.
	s.ctx, s.span = telemetry.TracerFor(ctx).Start(ctx, "send toolbus.stream", producerSpan...)
	if s.span.IsRecording() {
		s.span.SetAttributes(telemetry.MessagingSystem.String(telemetry.MessagingSystemNATS), telemetry.MessagingOperation.String("send"),
			telemetry.MessagingOpName.String("send"), telemetry.MessagingDestination.String(messages.StreamSubject(conversation)),
			telemetry.MessagingMessageID.String(s.id), telemetry.Conversation.String(conversation), telemetry.ResponseID.String(s.id))
	}
	if s.opts.Progress != nil {
		s.reported = map[int]bool{}
		sub, err := c.nc.Subscribe(messages.ProgressSubject(conversation), func(m *nats.Msg) {
			var r messages.ToolResult
			// Progress of this response of this conversation only: a copy of another
			// tenant's message delivered here (a push consumer may deliver anywhere)
			// names its own conversation.
			if m.Header.Get(messages.HeaderProgressOf) != "" || m.Header.Get(messages.HeaderLogOf) != "" || // a call's progress or log, not a result
				m.Header.Get(messages.HeaderResponseID) != s.id || m.Header.Get(messages.HeaderConversation) != conversation ||
				messages.DecodeResult(m.Data, &r) != nil || r.Conversation != conversation {
				return
			}
			s.report(r)
		})
		if err != nil {
			return nil, fmt.Errorf("client: %w", err)
		}
		s.progress = sub
	}
	ch, err := c.listen(conversation, s.id)
	if err != nil {
		s.stop()
		return nil, err
	}
	s.ch = ch
	return s, nil
}

// ID returns the response's id.
func (s *Stream) ID() string { return s.id }

// Chunks returns how many chunks of the response are stored so far, the last one
// included once Close sent it.
func (s *Stream) Chunks() int {
	s.smu.Lock()
	defer s.smu.Unlock()
	return s.n
}

// Write adds p to the response: in the next chunk, sent at once when none is on its way,
// else once it is stored. It returns the error that stopped the stream's sending, if a
// chunk could not be stored (then nothing more is taken).
func (s *Stream) Write(p []byte) (int, error) {
	if s.closed {
		return 0, errors.New("client: write to a closed stream")
	}
	s.smu.Lock()
	defer s.smu.Unlock()
	for s.failed == nil && s.sending && len(s.pending) >= MaxPendingBytes {
		s.room.Wait()
	}
	if s.failed != nil {
		return 0, s.failed
	}
	s.pending = append(s.pending, p...)
	if !s.sending {
		s.sending, s.sent = true, make(chan struct{})
		go s.send()
	}
	return len(p), nil
}

// WriteString adds str to the response ([Stream.Write]).
func (s *Stream) WriteString(str string) (int, error) { return s.Write([]byte(str)) }

// Flush waits until everything written is stored as chunks, or ctx is done: a chunk
// per Flush at most, so a caller that flushes after each write sends its writes as its
// chunks.
func (s *Stream) Flush(ctx context.Context) error {
	s.smu.Lock()
	sending, sent := s.sending, s.sent
	s.smu.Unlock()
	if sending {
		select {
		case <-sent:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.smu.Lock()
	defer s.smu.Unlock()
	return s.failed
}

// failedErr is the error that stopped the sending, if one did.
func (s *Stream) failedErr() error {
	s.smu.Lock()
	defer s.smu.Unlock()
	return s.failed
}

// send sends what is pending, a chunk at a time, until nothing is.
func (s *Stream) send() {
	s.smu.Lock()
	for s.failed == nil && len(s.pending) > 0 {
		chunk := s.pending
		s.pending = nil
		s.smu.Unlock()
		err := s.publish(chunk, false)
		s.smu.Lock()
		s.failed = err
		s.room.Broadcast()
	}
	s.sending = false
	close(s.sent)
	s.room.Broadcast()
	s.smu.Unlock()
}

// Close ends the response and waits for its output until ctx is done.
func (s *Stream) Close(ctx context.Context) (*messages.Output, error) {
	if s.closed {
		return nil, errors.New("client: stream closed twice")
	}
	if err := s.Flush(ctx); err != nil {
		if s.failedErr() != nil {
			// A chunk could not be stored: the response cannot go on, and is answered by
			// toolbus's idle timeout. The stream lets go of what it holds.
			s.closed = true
			s.stop()
		}
		return nil, err
	}
	if err := s.publish(nil, true); err != nil {
		// Not closed: Close may be called again, and sends the same last chunk.
		return nil, err
	}
	s.closed = true
	defer s.stop()
	out, err := s.c.await(ctx, s.conversation, s.id, s.ch, s.started, false)
	if err != nil || s.opts.Progress == nil {
		return out, err
	}
	// The output may overtake the last progress messages (another subscription): the
	// calls not reported yet are reported from it, so that Progress sees each call once,
	// before Close returns.
	_ = s.progress.Unsubscribe()
	for i, r := range out.Results {
		s.report(messages.ToolResult{CallID: messages.CallID(s.conversation, s.id, i), ResponseID: s.id, Conversation: s.conversation, Index: i, Tool: r.Tool, Success: r.Success,
			Result: r.Result, Error: r.Error, Attempts: r.Attempts, Stored: r.Stored, Stream: true})
	}
	s.mu.Lock()
	s.done = true
	s.mu.Unlock()
	return out, nil
}

// report calls Progress with r, unless r's call was reported before.
func (s *Stream) report(r messages.ToolResult) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done || s.reported[r.Index] {
		return
	}
	s.reported[r.Index] = true
	s.opts.Progress(r)
}

// publish sends the next chunk and waits until JetStream stored it (the sender's, then
// Close's, one at a time). A publish that got
// no answer (a timeout, no responders: the stream's leader died or is being elected,
// the connection is reconnecting) is sent again, with the same message id, until ctx
// ends: the chunk may have been stored, and the id makes the second copy a no-op, but
// a chunk left out would leave the response without its end.
func (s *Stream) publish(p []byte, final bool) error {
	n := s.n + 1
	msg := &nats.Msg{Subject: messages.StreamSubject(s.conversation), Data: p, Header: s.opts.header(s.conversation, s.id)}
	msg.Header.Set(messages.HeaderChunk, strconv.Itoa(n))
	msg.Header.Set(messages.HeaderMsgID, messages.ScopedID(s.conversation, s.id)+"/chunk/"+strconv.Itoa(n))
	if final {
		msg.Header.Set(messages.HeaderFinal, "true")
	}
	bus.InjectTrace(s.ctx, msg.Header)
	wait := 50 * time.Millisecond
	for {
		// Each attempt waits for its ack for a while only: an ack lost with a leader
		// would otherwise hold the chunk until ctx ends.
		pctx, cancel := context.WithTimeout(s.ctx, chunkAckWait)
		_, err := s.c.js.PublishMsg(pctx, msg)
		cancel()
		if err == nil {
			s.smu.Lock()
			s.n = n
			s.smu.Unlock()
			return nil
		}
		if !unanswered(err) || s.ctx.Err() != nil {
			return fmt.Errorf("client: stream chunk %d: %w", n, err)
		}
		select {
		case <-s.ctx.Done():
			return fmt.Errorf("client: stream chunk %d: %w", n, err)
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// chunkAckWait bounds the wait for one attempt's ack from the chunk stream.
const chunkAckWait = 5 * time.Second

// unanswered reports whether a publish failed without an answer from the stream, so
// that sending it again is all it takes.
func unanswered(err error) bool {
	var api *jetstream.APIError
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrDisconnected) || errors.Is(err, nats.ErrConnectionReconnecting) ||
		errors.As(err, &api) && api.Code == 503
}

func (s *Stream) stop() {
	if s.span != nil {
		s.span.End()
	}
	if s.progress != nil {
		_ = s.progress.Unsubscribe()
	}
	if s.ch != nil {
		s.c.unlisten(s.conversation, s.id)
	}
}

// SplitTokens cuts text into pieces about the size of a model's tokens, in order: a run
// of letters or digits with the spaces before it, or one other character with the
// spaces before it. Replaying a response piece by piece (`toolbus send --stream`,
// `toolbus bench --stream`) streams it as a model would write it.
func SplitTokens(text string) []string {
	var tokens []string
	start := 0
	for i := 0; i < len(text); {
		j := i
		for j < len(text) && (text[j] == ' ' || text[j] == '\t') {
			j++
		}
		switch {
		case j == len(text):
		case wordByte(text[j]):
			for j < len(text) && wordByte(text[j]) {
				j++
			}
		default:
			_, size := utf8.DecodeRuneInString(text[j:])
			j += size
		}
		tokens = append(tokens, text[start:j])
		start, i = j, j
	}
	return tokens
}

func wordByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_' || b >= 0x80
}
