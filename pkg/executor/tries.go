package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/toolbus/toolbus/pkg/mcpwire"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/telemetry"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// tries are one delivery's attempts of a call ([Executor.ExecuteRoute]): the first at
// once, the next after a backoff while the failure may be tried again, each an attempt
// span; then the result and how a failure may be handled further. The call, its route
// and its result are the caller's, handed to each method rather than copied in.
type tries struct {
	e       *Executor
	ctx     context.Context // ends with the call's budget
	earlier Earlier
	start   time.Time
	budget  time.Time
	limit   time.Duration // the budget's length
	tool    string        // the tool's label
	server  string        // Route.Server, Route.Label, Route.MCP.Remote
	label   string
	remote  string
	mcp     bool // an MCP server's tool
	safe    bool

	maxAttempts int
	reached     int // attempts that reached the tool, the earlier deliveries' included
	sent        int // failed attempts that reached the server (not refused before sending)
	tries       int // this delivery's attempts, refused ones included
	out         json.RawMessage
	last        *messages.ToolError
	refused     bool // the breaker refused the call
	allowed     bool // the breaker let the call through, and is told how it ended

	// An attempt that failed and may be tried again keeps its span open until the next
	// one starts: only an attempt that another follows is a retry, with a reason.
	pending                    trace.Span
	pendingCode, pendingReason string
}

// run makes the attempts of call on r and answers, counting them on in res.
func (t *tries) run(call *messages.ToolCall, r *Route, res *messages.ToolResult) (messages.ToolResult, Outcome) {
	// The first attempt runs at once, as backoff.Retry would run it; only one that failed
	// and may be tried again builds the backoff, which is handed that failure as its
	// first attempt's, so that it waits and counts as it would have.
	err := t.attempt(call, r, res)
	if err != nil && !errors.As(err, new(*backoff.PermanentError)) {
		firstErr, replayed := err, false
		err = backoff.Retry(func() error {
			if !replayed {
				replayed = true
				return firstErr
			}
			return t.attempt(call, r, res)
		}, t.e.Retry.backoff(t.ctx, t.maxAttempts-1))
	}
	// Handed back: a later delivery tries the call again, and this delivery's last
	// failed attempt is a retry like one within it — its reason on its span, counted in
	// the retries metric — so that retries are attempts less one, across deliveries.
	again := err != nil && !t.refused && t.retryable()
	handBack := again && !t.earlier.Last
	if t.pending != nil {
		if handBack {
			t.retried()
		}
		t.pending.End()
	}
	res.DurationMS = float64(time.Since(t.start).Microseconds()) / 1000
	if err != nil {
		return t.failure(res, again, handBack)
	}
	t.report(nil)
	if len(t.out) == 0 || !messages.Valid(t.out) {
		return res.Fail(messages.Errorf(messages.CodeToolError, "the tool %q returned no valid JSON result", messages.EchoName(call.Tool))), Outcome{MaybeRan: true}
	}
	res.Success, res.Result = true, t.out
	return *res, Outcome{}
}

// failure is the answer of attempts that failed: again says the last may be tried
// again, handBack that a later delivery will.
func (t *tries) failure(res *messages.ToolResult, again, handBack bool) (messages.ToolResult, Outcome) {
	last := t.last
	if t.refused {
		// Say how many attempts of this call reached the server: those refused on
		// connecting never did.
		if t.sent > 0 {
			last = &messages.ToolError{Code: last.Code, Unsent: last.Unsent, Final: last.Final, Message: fmt.Sprintf(
				"%d earlier attempt(s) of this call were sent and failed; %s", t.sent, last.Message)}
		} else if tried := t.tries - 1; tried > 0 {
			last = &messages.ToolError{Code: last.Code, Unsent: last.Unsent, Final: last.Final, Message: fmt.Sprintf(
				"%d earlier attempt(s) of this call could not reach the server; %s", tried, last.Message)}
		}
		return res.Fail(last), Outcome{Sent: t.reached}
	}
	oc := Outcome{
		Retryable: handBack,
		MaybeRan:  !last.Unsent && last.Code != messages.CodeUnknownTool && last.Code != messages.CodeInvalidArguments,
		Sent:      t.reached,
	}
	// Its attempts ran out (not its budget: a timeout is an answer like any other).
	// Or its deliveries did: this, the last, would have handed it back.
	oc.Exhausted = again && t.earlier.Last || !oc.Retryable && last.Retryable() && t.safe && !last.Unsent && t.reached >= t.maxAttempts
	if !oc.Retryable {
		t.report(last)
	} else {
		oc.Unreported = t.allowed && t.e.Gate != nil
	}
	return res.Fail(last), oc
}

// retryable says the last failure may be tried again, now or by a later delivery:
// within the budget, and, unless it provably never left, within MaxAttempts.
func (t *tries) retryable() bool {
	last := t.last
	return last.Retryable() && (t.safe || last.Unsent) && (last.Unsent || t.reached < t.maxAttempts) && time.Now().Before(t.budget)
}

// report tells the breaker how the call it allowed ended, once: answered (a success,
// or a failure nothing retries), not handed back to a later delivery, whose answer is
// the call's outcome.
func (t *tries) report(final error) {
	if t.e.Gate != nil && t.allowed {
		t.e.Gate.Report(t.server, final)
	}
}

// retried marks the pending attempt as one another follows: its reason on its span,
// counted in the retries metric.
func (t *tries) retried() {
	t.pending.SetAttributes(telemetry.RetryReason.String(t.e.Redact.String(messages.EchoError(t.pendingReason))))
	t.e.Metrics.Retry(t.ctx, t.tool, t.label, t.pendingCode)
}

// attempt is one try, in a span of its own: asked of the breaker before the first,
// sent, and counted. An error that may be tried again is returned as it is, any other
// as backoff.Permanent.
func (t *tries) attempt(call *messages.ToolCall, r *Route, res *messages.ToolResult) error {
	if t.pending != nil {
		t.retried()
		t.pending.End()
		t.pending = nil
	}
	t.tries++
	actx, span := t.span(t.earlier.Attempts + t.tries)
	// The breaker is asked once per call, before its first try: it counts calls, not
	// attempts, so that a call's own retries never open it against the call, and a
	// server back within the call's budget serves it.
	if g := t.e.Gate; g != nil && !t.allowed {
		if err := g.Allow(t.server); err != nil {
			// The server is known to be down: answer now, retry nothing. The try counts,
			// as one that sent nothing does.
			t.refused, t.last = true, messages.AsToolError(err)
			res.Attempts++
			span.SetAttributes(telemetry.ErrorCode.String(string(t.last.Code)))
			span.End()
			return backoff.Permanent(err)
		}
		t.allowed = true
	}
	requests, err := t.send(actx, call, r, res)
	// One try is one attempt, in the result as in its span and the retries metric: a try
	// sends its request once (mcpwire.WithOneRequest), and a try whose session broke is
	// the next try's to send again, after the backoff. Tries that reached the server
	// count towards MaxAttempts.
	res.Attempts++
	t.reached += requests
	if err == nil {
		span.End()
		return nil
	}
	t.last = messages.AsToolError(err)
	if !t.last.Unsent {
		t.sent++
	}
	span.SetStatus(codes.Error, string(t.last.Code)) // the message may echo arguments: the model gets it, traces do not
	span.SetAttributes(telemetry.ErrorCode.String(string(t.last.Code)))
	if t.retryable() {
		t.pending, t.pendingCode, t.pendingReason = span, string(t.last.Code), t.last.Message
		return err
	}
	span.End()
	return backoff.Permanent(err)
}

// span starts the span of attempt number.
func (t *tries) span(number int) (context.Context, trace.Span) {
	tracer := t.e.Tracer
	if tracer == nil {
		tracer = telemetry.Tracer(nil)
	}
	actx, span := tracer.Start(t.ctx, attemptName(number))
	if span.IsRecording() { // with tracing off, no attribute is built
		span.SetAttributes(telemetry.Tool.String(t.tool), telemetry.Server.String(t.label), telemetry.Attempt.Int(number))
		if t.mcp {
			// OpenTelemetry's MCP conventions: the method and the tool's name on its server.
			span.SetAttributes(attribute.String("mcp.method.name", "tools/call"), attribute.String("gen_ai.tool.name", telemetry.Cap(t.remote)))
		}
	}
	return actx, span
}

// send runs the call once and says how many requests reached the tool: each request an
// MCP server was sent (a resend after a broken connection too), one for any other
// backend's try unless it provably sent nothing.
func (t *tries) send(ctx context.Context, call *messages.ToolCall, r *Route, res *messages.ToolResult) (requests int, err error) {
	if r.MCP.Server == "" {
		t.out, err = t.e.attempt(ctx, r, call, t.limit)
		if err != nil && messages.AsToolError(err).Unsent {
			return 0, err
		}
		return 1, err
	}
	var n atomic.Int32
	var kept mcpwire.KeptContent // the result's images, audio, embedded blobs
	t.out, err = t.e.attempt(mcpwire.WithOneRequest(mcpwire.WithKeptContent(mcpwire.WithSentCount(ctx, &n), &kept)), r, call, t.limit)
	if err == nil {
		res.Content, res.Notice = kept.Content, kept.Notice
	}
	return int(n.Load()), err
}
