package executor

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/toolbus/toolbus/pkg/affinity"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/catalog"
	"github.com/toolbus/toolbus/pkg/claims"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/results"
	"github.com/toolbus/toolbus/pkg/telemetry"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Stage is the executor stage: per call, claim its id, run it (or answer from the stored
// result when a redelivery finds one), store the result, and return it to be published
// with message id = call id. A transient failure that is safe to repeat is handed back
// with a delay until the consumer's last delivery, which answers with the error and
// also returns a copy of the call for the dead-letter stream.
type Stage struct {
	Exec   *Executor
	Claims claims.Store
	// RedeliveryDelay is how long a call handed back after a transient failure waits
	// before another delivery. Default 2s.
	RedeliveryDelay time.Duration
	// StoreWait bounds how long a result is retried into the calls bucket while NATS is
	// away before the call is handed back. Default 30s.
	StoreWait time.Duration
	// MaxInlineResultBytes bounds a result as it travels on: a larger one is stored whole
	// in Results and replaced by a preview naming it (messages.Preview), so that its
	// message fits the bus and the tool is not run again because its answer could not
	// be published. Default 64 KiB.
	MaxInlineResultBytes int
	// Results keeps large results whole ([results.Store]); without it (or when storing
	// fails for StoreWait) a large result is cut to a preview and not kept.
	Results results.Fitter
	// QuietTools are logged at debug level instead of info (tools polled often).
	QuietTools []string
	// Owners, when set, keeps every call of a conversation to a conversation-scoped
	// server on the replica that holds the conversation's session with it: a call this
	// replica pulled for a session another holds is run there ([affinity.Owners]).
	Owners *affinity.Owners
	Logger *slog.Logger
}

// DefaultMaxInlineResultBytes is the default of [Stage.MaxInlineResultBytes].
const DefaultMaxInlineResultBytes = 64 << 10

// fit makes res fit the inline limit, retrying the store through a NATS outage for up to
// StoreWait; when it cannot be stored, the result is cut to a preview that says so.
func (s *Stage) fit(ctx context.Context, res messages.ToolResult) messages.ToolResult {
	max := cmp.Or(s.MaxInlineResultBytes, DefaultMaxInlineResultBytes)
	if s.fits(&res) {
		return res
	}
	if s.Results != nil {
		b := backoff.NewExponentialBackOff()
		b.InitialInterval, b.MaxInterval, b.MaxElapsedTime = 50*time.Millisecond, time.Second, s.storeWait()
		fitted, err := backoff.RetryWithData(func() (messages.ToolResult, error) { return s.Results.Fit(ctx, res, max) }, backoff.WithContext(b, ctx))
		if err == nil {
			return fitted
		}
		s.logger().Warn("a large result could not be kept; it is answered with a preview only", "call", res.CallID, "bytes", res.InlineBytes(), "err", err)
	}
	return messages.CapResult(res, max)
}

// fits reports whether res travels as it is: a failure, or a result within the inline
// limit.
func (s *Stage) fits(res *messages.ToolResult) bool {
	return !res.Success || res.InlineBytes() <= cmp.Or(s.MaxInlineResultBytes, DefaultMaxInlineResultBytes)
}

// quiet reports whether a call is one of QuietTools, by the name the model wrote, the
// tool's name, or any spelling of the MCP tool it resolved to, read as allow-lists are
// (catalog.MatchTool).
func (s *Stage) quiet(name string, r Route) bool {
	if len(s.QuietTools) == 0 {
		return false
	}
	if slices.Contains(s.QuietTools, name) || slices.Contains(s.QuietTools, r.Info.Name) {
		return true
	}
	return r.MCP.Server != "" && catalog.MatchTool(s.QuietTools, r.MCP.Server, r.MCP.Remote)
}

// Decode reads a call message. A body that cannot be read is answered from the headers
// as a call carrying an internal error, so that its response is not left waiting.
func Decode(d *bus.Delivery) (messages.ToolCall, error) {
	var call messages.ToolCall
	err := messages.DecodeCall(d.Data, &call)
	if err == nil && call.ID != "" {
		return call, nil
	}
	m := d.Meta
	if m.ResponseID == "" || m.Count <= 0 {
		return call, fmt.Errorf("a call without routing headers: %v", err)
	}
	if err == nil {
		err = fmt.Errorf("no call id")
	}
	return messages.ToolCall{
		ID: messages.CallID(m.Conversation, m.ResponseID, m.Index), ResponseID: m.ResponseID, Conversation: m.Conversation,
		Index: m.Index, Count: m.Count, Next: m.Next,
		Error: &messages.ResultError{Code: messages.CodeInternal, Message: fmt.Sprintf("the call message could not be decoded: %v", err)},
	}, nil
}

// passEnd passes a streamed response's end on to the formatter.
func (s *Stage) passEnd(_ context.Context, c *callState) verdict {
	if !c.call.End {
		return proceed()
	}
	return reply(s.answer(c.call, messages.ResultFor(c.call), false))
}

// answerParsed answers the parser's verdict (or an unreadable message) and runs
// nothing. Only a tool the parser knew has its arguments checked.
func (s *Stage) answerParsed(ctx context.Context, c *callState) verdict {
	call := &c.call
	if call.Error == nil {
		return proceed()
	}
	tool := telemetry.UnknownTool
	if call.Error.Code == messages.CodeInvalidArguments {
		route, err := s.Exec.Router.Resolve(ctx, call.Tool)
		tool = canonicalLabel(&route, err)
	}
	ctx, span := s.toolSpan(ctx, call, tool)
	defer span.End()
	span.SetAttributes(telemetry.ErrorCode.String(string(call.Error.Code)))
	span.SetStatus(codes.Error, string(call.Error.Code))
	// The verdict quotes what the model wrote, which may hold any server's secret (one
	// it read in an earlier result): masked with every one.
	res := messages.ResultFor(*call).Fail(&messages.ToolError{Code: call.Error.Code, Message: s.Exec.Redact.String(call.Error.Message)})
	s.Exec.Metrics.Call(ctx, tool, "parser", messages.Tenant(call.Conversation), string(call.Error.Code), 0)
	s.logCall(ctx, slog.LevelWarn, call, tool, "parser", &res)
	return reply(s.answer(*call, res, false))
}

// route resolves the call once ([Router.Resolve]: its backend, its tool, and the
// configuration's top-level allow- and block-lists) and starts its span. A call that
// cannot be routed goes on without admission, to be answered with its route's error.
func (s *Stage) route(ctx context.Context, c *callState) verdict {
	c.route, c.routeErr = s.Exec.Router.Resolve(ctx, c.call.Tool)
	c.tool = canonicalLabel(&c.route, c.routeErr)
	c.ctx, c.span = s.toolSpan(ctx, &c.call, c.tool)
	c.recording = c.span.IsRecording() // with tracing off, no attribute is built
	// The replica that forwarded a call here checked it already.
	if c.admit = c.routeErr == nil && !affinity.Forwarded(c.ctx); c.admit {
		c.admitted = time.Now()
	}
	return proceed()
}

// finish answers the call c with res and, when claimed, stores res in its claim (digest,
// its claim's) while the answer is published: the runner acknowledges the delivery once
// both are done ([bus.Delivery.OnPublished]), so that a redelivery finds the result and
// answers with it, and never runs the call again. The store is retried through a NATS
// outage, for storeWait, so that a redelivery answers with the result rather than with
// outcome_unknown; the call stays marked running here until then. An exhausted call is
// also copied to the dead-letter stream.
func (s *Stage) finish(ctx context.Context, c *callState, res messages.ToolResult, claimed, exhausted bool) ([]bus.Outgoing, error) {
	out, err := s.answer(c.call, res, exhausted)
	if err != nil || !claimed {
		return out, err
	}
	stored := make(chan error, 1)
	id, digest, running := c.call.ID, c.digest, c.running
	c.running = nil // released below, once the result is stored
	go func() {
		err := s.Claims.Finish(ctx, id, digest, res)
		if err != nil {
			b := backoff.NewExponentialBackOff()
			b.InitialInterval, b.MaxInterval, b.MaxElapsedTime = 50*time.Millisecond, time.Second, s.storeWait()
			err = backoff.Retry(func() error { return s.Claims.Finish(ctx, id, digest, res) }, backoff.WithContext(b, ctx))
		}
		if running != nil {
			s.Exec.running.Delete(id)
			close(running)
		}
		stored <- err
	}()
	c.d.OnPublished(func(ctx context.Context) error {
		var err error
		select {
		case err = <-stored:
		case <-ctx.Done():
			err = ctx.Err()
		}
		if err != nil {
			s.logger().Warn("the result could not be stored", "call", id, "err", err)
			return fmt.Errorf("store the result of %s: %w", id, err)
		}
		return nil
	})
	return out, nil
}

// storeWait bounds the retries of storing a result, and so how long a claim may stay
// "running" past its call's budget while its executor is alive.
func (s *Stage) storeWait() time.Duration {
	if s.StoreWait > 0 {
		return s.StoreWait
	}
	return 30 * time.Second
}

// answer is the result message of call, and with dead set its dead-letter copy. A call
// the policy had its say on (not the parser's verdict, not a stream's end) carries the
// policy's revision.
func (s *Stage) answer(call messages.ToolCall, res messages.ToolResult, dead bool) ([]bus.Outgoing, error) {
	if res.Policy == "" && call.Error == nil && !call.End {
		res.Policy = s.Exec.Policy.Load().Revision()
	}
	m := bus.Meta{ResponseID: call.ResponseID, Conversation: call.Conversation, MsgID: call.ID, Index: call.Index, Count: call.Count, Next: call.Next}
	out := bus.Outgoing{Subject: messages.ResultSubject(call.Conversation), Meta: m, Body: messages.AppendResult(make([]byte, 0, 256+len(res.Result)), &res)}
	if !dead {
		return []bus.Outgoing{out}, nil
	}
	copy, err := bus.JSON(messages.DeadSubject(call.Conversation), m, messages.DeadCall{Call: call, Result: res})
	return []bus.Outgoing{out, copy}, err
}

func (s *Stage) redeliveryDelay() time.Duration {
	if s.RedeliveryDelay > 0 {
		return s.RedeliveryDelay
	}
	return 2 * time.Second
}

func (s *Stage) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}

// toolSpan starts the span of one call's work, a child of its message's: named
// "execute_tool <tool>" after OpenTelemetry's GenAI conventions, with the tool's
// canonical name (catalog.Ref.Name) however the model spelled it, and the spelling as an
// attribute when it differs.
func (s *Stage) toolSpan(ctx context.Context, call *messages.ToolCall, tool string) (context.Context, trace.Span) {
	// Recorded where its message's span is, by the same provider; a message not traced
	// (tracing off) gets no span for its call either: nothing is allocated for it.
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, parent
	}
	tracer := parent.TracerProvider().Tracer(telemetry.Scope)
	ctx, span := tracer.Start(ctx, "execute_tool "+tool)
	if span.IsRecording() {
		span.SetAttributes(telemetry.Tool.String(tool), telemetry.GenAIOperation.String("execute_tool"), telemetry.GenAITool.String(tool))
		if written := telemetry.Cap(call.Tool); written != tool {
			span.SetAttributes(telemetry.ToolWritten.String(written))
		}
	}
	return ctx, span
}

// logCall writes the one line of an answered call: its tool by canonical name (and as
// written, when the model spelled it otherwise), server, outcome, attempts and time; a
// failure's code and reason (masked) too. Never its arguments or result.
func (s *Stage) logCall(ctx context.Context, level slog.Level, call *messages.ToolCall, tool, server string, res *messages.ToolResult) {
	lg := s.logger()
	if !lg.Enabled(ctx, level) { // nothing is built for a level that is off
		return
	}
	attrs := make([]slog.Attr, 0, 10)
	attrs = append(attrs, slog.String("call", call.ID), slog.String("tool", tool))
	if written := messages.EchoName(call.Tool); written != tool {
		attrs = append(attrs, slog.String("written", written))
	}
	outcome := "ok"
	if res.Error != nil {
		outcome = string(res.Error.Code)
	}
	attrs = append(attrs, slog.String("server", server), slog.String("outcome", outcome), slog.Int("attempts", res.Attempts), slog.Float64("ms", res.DurationMS))
	if rev := s.Exec.Policy.Load().Revision(); rev != "" {
		attrs = append(attrs, slog.String("policy", rev))
	}
	if res.Error != nil {
		attrs = append(attrs, slog.String("reason", res.Error.Message))
	}
	lg.LogAttrs(ctx, level, "call", attrs...)
}
