package executor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/toolbus/toolbus/pkg/affinity"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/catalog"
	"github.com/toolbus/toolbus/pkg/claims"
	"github.com/toolbus/toolbus/pkg/mcpwire"
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
	if res.InlineBytes() <= max || !res.Success {
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

// Execute answers one call.
func (s *Stage) Execute(ctx context.Context, call messages.ToolCall, d *bus.Delivery) ([]bus.Outgoing, error) {
	if call.End {
		// The end of a streamed response: passed on to the formatter.
		return s.answer(call, messages.ResultFor(call), false)
	}
	if call.Error != nil {
		// The parser's verdict (or an unreadable message): answer it, run nothing. Only
		// a tool the parser knew has its arguments checked.
		tool := telemetry.UnknownTool
		if call.Error.Code == messages.CodeInvalidArguments {
			route, err := s.Exec.Router.Resolve(ctx, call.Tool)
			tool = canonicalLabel(route, err)
		}
		ctx, span := s.toolSpan(ctx, call, tool)
		defer span.End()
		span.SetAttributes(telemetry.ErrorCode.String(string(call.Error.Code)))
		span.SetStatus(codes.Error, string(call.Error.Code))
		res := messages.ResultFor(call).Fail(&messages.ToolError{Code: call.Error.Code, Message: call.Error.Message})
		s.Exec.Metrics.Call(ctx, tool, "parser", messages.Tenant(call.Conversation), string(call.Error.Code), 0)
		s.logCall(ctx, slog.LevelWarn, call, tool, "parser", res)
		return s.answer(call, res, false)
	}

	// A read-only or idempotent call does no harm when run twice, so its first delivery
	// skips the claim: two key-value writes fewer on the hot path. Redeliveries claim, to
	// answer from a stored result and to count attempts across deliveries.
	route, routeErr := s.Exec.Router.Resolve(ctx, call.Tool)
	tool := canonicalLabel(route, routeErr)
	ctx, span := s.toolSpan(ctx, call, tool)
	defer span.End()
	recording := span.IsRecording() // with tracing off, no attribute is built
	approved := false
	if routeErr == nil && !affinity.Forwarded(ctx) {
		// The replica that forwarded a call here checked it already.
		out, done, ok, release, err := s.admit(ctx, call, route, tool, d, span)
		if done {
			return out, err
		}
		approved = ok
		if release != nil {
			defer func() {
				// Given back however the call ends, the service stopping included.
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				defer cancel()
				release(rctx)
			}()
		}
	}
	var lease affinity.Lease
	if routeErr == nil && route.Session != "" && s.Owners != nil {
		var out []bus.Outgoing
		var there bool
		var err error
		if out, there, lease, err = s.place(ctx, route.Session, call, route, d); err != nil || there {
			return out, err
		}
	}
	safe := route.Info.ReadOnly || route.Info.Idempotent
	claimed := d.Delivered > 1 || !safe || approved // an approved call runs once, whatever it is
	var claim claims.Claim
	var digest string
	if claimed {
		var err error
		digest = claims.Digest(call.Tool, call.Arguments)
		if claim, err = s.Claims.Begin(ctx, call.ID, digest); err != nil {
			return nil, bus.Retry(err, s.redeliveryDelay())
		}
	}
	if claim.Abandoned != nil {
		if running, ok := s.Exec.running.Load(call.ID); ok {
			// This process is running the call still (a delivery handed back, or the call
			// forwarded here again): wait for its result rather than call it abandoned.
			select {
			case <-running.(chan struct{}):
			case <-ctx.Done():
				return nil, bus.Retry(fmt.Errorf("call %s is still running here", call.ID), s.redeliveryDelay())
			}
			// Its outcome is in the claim now: the next delivery answers with it (or runs a
			// released call again), as any redelivery does.
			return nil, bus.Retry(fmt.Errorf("call %s was running here; its outcome is stored", call.ID), 50*time.Millisecond)
		}
	}
	switch {
	case claim.Result != nil && !claims.Same(claim.Digest, digest):
		// Its id answered another call: the response's id was used before.
		res := messages.ResultFor(call).Fail(reusedID(call))
		s.Exec.RecordCall(ctx, call, route, routeErr, res, time.Now())
		s.logCall(ctx, slog.LevelWarn, call, tool, route.Label(), res)
		return s.answer(call, res, false)
	case claim.Result != nil:
		// Done before (the ack or the publish was lost, or the response was sent
		// again): answer again, de-duplicated.
		return s.answer(call, *claim.Result, false)
	case claim.Abandoned != nil:
		if !safe {
			// The executor that claimed it may be alive, still storing the result
			// through a NATS outage: until it must have finished or given up, look again
			// later rather than report a known outcome as unknown.
			if alive := s.Exec.Budget(call, route, claim.Abandoned.Started).Add(s.storeWait()); !d.Last && time.Now().Before(alive) {
				return nil, bus.Retry(fmt.Errorf("call %s is claimed by %s since %s", call.ID, claim.Abandoned.Owner,
					claim.Abandoned.Started.Format(time.RFC3339)), s.redeliveryDelay())
			}
			res := messages.ResultFor(call).Fail(messages.Errorf(messages.CodeOutcomeUnknown,
				"the call to %q was started by an executor that stopped before it finished (%s, started %s); "+
					"the tool may or may not have run, and it is not idempotent, so it was not run again: check its effect before calling it again",
				messages.EchoName(call.Tool), claim.Abandoned.Owner, claim.Abandoned.Started.Format(time.RFC3339)))
			res.Attempts = max(claim.PriorAttempts, 1)
			s.Exec.RecordCall(ctx, call, route, routeErr, res, claim.Abandoned.Started)
			return s.finish(ctx, call, res, true, false)
		}
		if err := s.Claims.TakeOver(ctx, call.ID, &claim); err != nil {
			// Another replica took it over; let JetStream sort out who answers.
			return nil, bus.Retry(err, s.redeliveryDelay())
		}
	}

	if claimed {
		done := make(chan struct{})
		s.Exec.running.Store(call.ID, done)
		defer func() { s.Exec.running.Delete(call.ID); close(done) }()
	}
	first := claim.FirstAttempt // the call's time budget counts from its first attempt
	if first.IsZero() {
		first = time.Now()
	}
	var session mcpwire.SessionReport
	res, oc := s.Exec.ExecuteRoute(mcpwire.WithReport(ctx, &session), call, route, routeErr, Earlier{First: first, Attempts: claim.PriorAttempts, Sent: claim.PriorSent, Last: d.Last})
	if safe && claimed && d.Delivered > 1 && claim.PriorAttempts == 0 && routeErr == nil {
		// A read-only or idempotent call is not claimed on its first delivery, so a
		// delivery that ran it and was handed back after (its answer not published, its
		// ack lost, its executor stopped) left no record: the answer counts each as one
		// attempt (the retry bound counts only recorded ones).
		res.Attempts += d.Delivered - 1
	}
	// What the model reads is masked with the secrets of the server that wrote it (and
	// the shared ones), not with every server's.
	mask := s.Exec.Redact.For(strings.TrimPrefix(route.Server, "mcp:"))
	if route.Session != "" { // only a conversation's own session has anything to say
		if n := s.notice(route.Session, session, lease); n != "" {
			res.Notice = strings.TrimSuffix(mask.String(n)+"; "+res.Notice, "; ")
		}
	}
	if res.Error != nil {
		res.Error.Message = mask.String(res.Error.Message)
		span.SetStatus(codes.Error, string(res.Error.Code)) // the call failed, as the model is told: Jaeger's error filter finds it
	}
	res = s.fit(ctx, res)
	outcome := "ok"
	if res.Error != nil {
		outcome = string(res.Error.Code)
	}
	if recording {
		span.SetAttributes(telemetry.Server.String(label(res.Backend)), telemetry.Attempt.Int(res.Attempts))
		if res.Error != nil {
			span.SetAttributes(telemetry.ErrorCode.String(outcome))
		}
	}
	// Arguments and results are never logged: they may hold secrets. A failure is a
	// warning with its code and reason (masked, as the model reads it), and an event
	// of the call's span, where an operator looks later.
	level := slog.LevelInfo
	if s.quiet(call.Tool, route) {
		level = slog.LevelDebug
	}
	if res.Error != nil {
		level = slog.LevelWarn
		if recording {
			span.AddEvent("toolbus.call.failed", trace.WithAttributes(telemetry.ErrorCode.String(outcome),
				telemetry.ErrorMessage.String(res.Error.Message)))
		}
	}
	if !res.Success && oc.Retryable && !d.Last {
		// Handed back to a later delivery, whose answer is the call's outcome: that one
		// is logged (one line per call answered), this one only at debug level.
		s.logCall(ctx, slog.LevelDebug, call, tool, label(res.Backend), res)
		if err := s.Claims.Release(ctx, call.ID, claims.Progress{Attempts: res.Attempts, Sent: oc.Sent, First: first}); err != nil {
			s.logger().Warn("release claim", "call", call.ID, "err", err)
		}
		return nil, bus.Retry(fmt.Errorf("call %s: %s", call.ID, res.Error.Message), s.redeliveryDelay())
	}
	s.logCall(ctx, level, call, tool, label(res.Backend), res)
	if s.Owners != nil && route.Session != "" && (session.Opened || lease.Ended != "") {
		// Said in this answer: later calls of the conversation run in the session as usual.
		s.Owners.Opened(ctx, lease)
	}
	s.Exec.RecordCall(ctx, call, route, routeErr, res, first) // once, answered
	s.Exec.Answered(res, oc)
	return s.finish(ctx, call, res, claimed, !res.Success && (oc.Retryable || oc.Exhausted))
}

// place finds the replica that holds the conversation's session with server: this one
// (there false, with the lease), or another, which ran the call (there true, with what
// it answered). A holder that is gone is replaced by this replica.
func (s *Stage) place(ctx context.Context, server string, call messages.ToolCall, route Route, d *bus.Delivery) (out []bus.Outgoing, there bool, l affinity.Lease, err error) {
	// Whatever goes wrong here is handed back, never answered: the call has not run.
	retry := func(err error) error {
		return bus.Retry(fmt.Errorf("the conversation's session with %q: %w", server, err), s.redeliveryDelay())
	}
	l, err = s.Owners.Acquire(ctx, server, call.Conversation)
	if err != nil {
		return nil, false, l, retry(err)
	}
	if l.Mine || affinity.Forwarded(ctx) {
		// A forwarded call runs here, whoever the bucket names by now.
		return nil, false, l, nil
	}
	// The holder answers within the call's budget, or hands it back; beyond that (and
	// the time it may take to store a result through an outage) its answer was lost.
	wait := max(time.Until(s.Exec.Budget(call, route, time.Now())), 0) + s.storeWait()
	for range 3 {
		out, err = s.Owners.Forward(ctx, l.Owner, d, wait)
		switch {
		case err == nil:
			return out, true, l, nil
		case !errors.Is(err, affinity.ErrGone):
			var re *bus.RetryError
			if errors.As(err, &re) {
				return nil, true, l, err // the holder handed it back
			}
			return nil, true, l, retry(err)
		}
		if l, err = s.Owners.TakeOver(ctx, l, server, call.Conversation); err != nil {
			return nil, false, l, retry(err)
		}
		if l.Mine {
			return nil, false, l, nil
		}
	}
	return nil, false, l, retry(errors.New("its holder keeps changing"))
}

// notice is what the result of a call must say of its session: that it ran in a new
// session of server, the conversation's previous one lost, when the pool opened one for
// it after an earlier one (r) or the holder's record says one was lost (l).
func (s *Stage) notice(server string, r mcpwire.SessionReport, l affinity.Lease) string {
	why := ""
	switch {
	case r.Opened && (r.Ended != "" || l.Opened):
		why = cmp.Or(r.Ended, l.Ended, "it was closed")
	case l.Ended != "" && l.Mine:
		why = l.Ended // taken over on an earlier delivery, not yet said
	default:
		return ""
	}
	return fmt.Sprintf("this call ran in a new session of the server %q: the conversation's previous session ended (%s), "+
		"so whatever earlier calls set in it (a working directory, an open page, an activated mode) is gone and may need to be set again",
		server, why)
}

// finish stores the result of a claimed call and answers it; an exhausted call is also
// copied to the dead-letter stream.
func (s *Stage) finish(ctx context.Context, call messages.ToolCall, res messages.ToolResult, claimed, exhausted bool) ([]bus.Outgoing, error) {
	if claimed {
		// The call ran: its result is kept until it is stored, through a NATS outage,
		// so that a redelivery answers with it rather than with outcome_unknown.
		b := backoff.NewExponentialBackOff()
		b.InitialInterval, b.MaxInterval, b.MaxElapsedTime = 50*time.Millisecond, time.Second, s.storeWait()
		digest := claims.Digest(call.Tool, call.Arguments)
		err := backoff.Retry(func() error { return s.Claims.Finish(ctx, call.ID, digest, res) }, backoff.WithContext(b, ctx))
		if err != nil {
			s.logger().Warn("the result could not be stored", "call", call.ID, "err", err)
			return nil, bus.Retry(err, s.redeliveryDelay())
		}
	}
	return s.answer(call, res, exhausted)
}

// reusedID is the refusal of a call whose id answered another call before: its
// response's id was used by an earlier response (sent again after the duplicate window,
// or under another message id) whose call at this index had another tool or arguments.
// Answering with the stored result would tell the model that its call ran; running it
// would make one id name two calls.
func reusedID(call messages.ToolCall) *messages.ToolError {
	return messages.Errorf(messages.CodeNotAllowed,
		"the call to %q was not run: its id %q (response %q, call %d) already answered another call, with other arguments or another tool — "+
			"a response id names one response; send the response again under a new id", messages.EchoName(call.Tool), call.ID, call.ResponseID, call.Index)
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
func (s *Stage) toolSpan(ctx context.Context, call messages.ToolCall, tool string) (context.Context, trace.Span) {
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
func (s *Stage) logCall(ctx context.Context, level slog.Level, call messages.ToolCall, tool, server string, res messages.ToolResult) {
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
