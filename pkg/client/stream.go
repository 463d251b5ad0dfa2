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
// it), not after the last token. Write each chunk as it comes, then Close, which returns
// the response's one output, the same as a whole response's. A Stream is for one
// goroutine.
type Stream struct {
	c            *Client
	ctx          context.Context
	conversation string
	id           string
	opts         StreamOptions
	n            int
	ch           chan []byte
	progress     *nats.Subscription
	started      time.Time
	closed       bool
	span         trace.Span

	mu       sync.Mutex // progress is called for one result at a time
	reported map[int]bool
	done     bool
}

// Stream starts a streamed response of conversation. ctx carries the trace the
// response continues.
func (c *Client) Stream(ctx context.Context, conversation string, o *StreamOptions) (*Stream, error) {
	if err := c.check(ctx, conversation); err != nil {
		return nil, err
	}
	s := &Stream{c: c, conversation: conversation, started: time.Now()}
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

// Write publishes p as the response's next chunk, once JetStream has stored it.
func (s *Stream) Write(p []byte) (int, error) {
	if s.closed {
		return 0, errors.New("client: write to a closed stream")
	}
	if err := s.publish(p, false); err != nil {
		return 0, err
	}
	return len(p), nil
}

// WriteString publishes str as the response's next chunk.
func (s *Stream) WriteString(str string) (int, error) { return s.Write([]byte(str)) }

// Close ends the response and waits for its output until ctx is done.
func (s *Stream) Close(ctx context.Context) (*messages.Output, error) {
	if s.closed {
		return nil, errors.New("client: stream closed twice")
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

// publish sends the next chunk and waits until JetStream stored it. A publish that got
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
			s.n = n
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
