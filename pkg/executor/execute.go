package executor

import (
	"cmp"
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/toolbus/toolbus/pkg/mcpwire"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/policy"
	"github.com/toolbus/toolbus/pkg/redact"
	"github.com/toolbus/toolbus/pkg/telemetry"
	"go.opentelemetry.io/otel/trace"
)

// RetryPolicy bounds the retries of a call. Only transient failures are retried, and
// only when repeating cannot repeat a side effect: the tool is read-only or idempotent,
// or the request provably never left.
type RetryPolicy struct {
	// MaxAttempts of a call that reach its tool, the first included, in all across its
	// deliveries (the claims carry the count from one to the next); a route's own (an
	// MCP server's "retry.maxAttempts") wins. Tries that provably never left (a refused
	// connection) do not count: repeating them is free, so they go on, MaxAttempts of
	// them per delivery, within the call's budget and deliveries. Default 3.
	MaxAttempts int
	// InitialInterval of the exponential backoff (with jitter). Default 100ms.
	InitialInterval time.Duration
	// MaxInterval between two attempts. Default 2s.
	MaxInterval time.Duration
	// MaxElapsed is the budget of one delivery's attempts. Default 10s.
	MaxElapsed time.Duration
}

// DefaultMaxAttempts is the default of [RetryPolicy.MaxAttempts].
const DefaultMaxAttempts = 3

// backoff waits between the tries of one delivery, at most retries of them.
func (p RetryPolicy) backoff(ctx context.Context, retries int) backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = cmp.Or(p.InitialInterval, 100*time.Millisecond)
	b.MaxInterval = cmp.Or(p.MaxInterval, 2*time.Second)
	b.MaxElapsedTime = cmp.Or(p.MaxElapsed, 10*time.Second)
	return backoff.WithContext(backoff.WithMaxRetries(b, uint64(max(retries, 0))), ctx)
}

// MaxAttempts is how many attempts of a call on route r may reach its tool, in all.
func (e *Executor) MaxAttempts(r Route) int {
	return cmp.Or(r.MaxAttempts, e.Retry.MaxAttempts, DefaultMaxAttempts)
}

// Executor runs calls on their backends. It knows nothing of NATS.
type Executor struct {
	Router *Router
	// running holds the claimed calls under way in this process (call id → closed when
	// the call's result is stored), shared by its stage replicas: a redelivery of a call
	// this process is still running waits for its result instead of taking the call for
	// abandoned.
	running sync.Map
	// Timeout is a call's time budget, from its first attempt to its answer, across
	// attempts and deliveries (each attempt gets what remains), unless ToolTimeouts or
	// the route (an MCP server's timeout) say otherwise; a call's own Deadline
	// (Toolbus-Deadline) ends it earlier. Default 60s.
	Timeout time.Duration
	// ToolTimeouts are the budgets of single tools, by the name a model calls them by.
	ToolTimeouts map[string]time.Duration
	Retry        RetryPolicy
	// Tracer records one span per attempt; nil means the global tracer provider.
	Tracer trace.Tracer
	// Redact masks the configuration's secrets in the error messages a model reads and in
	// span attributes (a server's URL with its key, echoed by a transport error); nil
	// masks only the secrets of URLs.
	Redact *redact.Current
	// Gate, when set, fails calls to a backend whose circuit is open before they are
	// tried.
	Gate Gate
	// Metrics, when set, counts calls by tool, server and outcome, and retries.
	Metrics *telemetry.Metrics
	// Policy holds the rules on calls ("policy.rules"), checked by [Stage.Execute]
	// before a call is claimed; nil allows every call. Safe to change while calls run (a
	// reload).
	Policy atomic.Pointer[policy.Policy]
	// Limits, when set, counts calls against the configured limits ("limits") on their
	// first delivery, after the rules allowed them.
	Limits *policy.Limiter
	// Approvals, when set, parks the calls a rule with effect "approve" matches until a
	// person decides (policy.Approvals); without it such a call is refused. Announce,
	// when set, tells who watches that a call waits (messages.ApprovalSubject).
	Approvals *policy.Approvals
	Announce  func(context.Context, messages.ApprovalRequest)

	schemas schemas
}

// Gate is a circuit breaker over backends, fed by the outcomes of the calls it let
// through ([Breaker]).
type Gate interface {
	// Allow returns nil when a call to backend may go ahead, or the error to answer
	// with at once (a *messages.ToolError, normally server_unavailable).
	Allow(backend string) error
	// Report tells the gate how an allowed attempt ended (nil: it succeeded).
	Report(backend string, err error)
}

// Outcome says how a failed call may be handled further.
type Outcome struct {
	// Retryable: the failure is transient and repeating the call is safe.
	Retryable bool
	// MaybeRan: the tool may have run although the call failed.
	MaybeRan bool
	// Sent counts the attempts of the call that reached its tool (or may have), the
	// earlier deliveries' included: what RetryPolicy.MaxAttempts bounds.
	Sent int
	// Exhausted: the failure is transient and repeating the call would be safe, but
	// its attempts (MaxAttempts of them reached the tool) ran out.
	Exhausted bool
	// Unreported: the breaker let the call through and has not heard how it ended,
	// because it may be handed back (Retryable); whoever answers it instead tells the
	// breaker ([Executor.Answered]), so that each call counts once, when answered.
	Unreported bool
}

// Answered tells the breaker how a call ended that was answered although oc said it may
// be retried (its last delivery): a call counts once, when it is answered.
func (e *Executor) Answered(res messages.ToolResult, oc Outcome) {
	if !oc.Unreported || e.Gate == nil {
		return
	}
	var err error
	if !res.Success && res.Error != nil {
		err = &messages.ToolError{Code: res.Error.Code, Message: res.Error.Message}
	}
	e.Gate.Report(res.Backend, err)
}

// Execute routes one call and runs it, with in-process retries of safe transient
// failures, and returns its result and whether a failure may be retried later (by
// another delivery); it never fails and never panics.
func (e *Executor) Execute(ctx context.Context, call messages.ToolCall) (messages.ToolResult, Outcome) {
	start := time.Now()
	r, err := e.Router.Resolve(ctx, call.Tool)
	res, oc := e.ExecuteRoute(ctx, call, r, err, Earlier{First: start})
	e.RecordCall(ctx, call, r, err, res, start)
	return res, oc
}

// RecordCall counts one answered call in the metrics, with the time since its first
// attempt: what the model waited. A stage records a call once, when it answers it, not
// at each delivery that hands it back.
func (e *Executor) RecordCall(ctx context.Context, call messages.ToolCall, r Route, routeErr error, res messages.ToolResult, first time.Time) {
	e.recordCall(ctx, &call, &r, routeErr, &res, first)
}

func (e *Executor) recordCall(ctx context.Context, call *messages.ToolCall, r *Route, routeErr error, res *messages.ToolResult, first time.Time) {
	outcome, server := "ok", label(r.Server)
	if res.Error != nil {
		outcome = string(res.Error.Code)
	}
	if routeErr != nil {
		server = ""
	}
	e.Metrics.Call(ctx, canonicalLabel(r, routeErr), server, messages.Tenant(call.Conversation), outcome, time.Since(first))
}

// Budget returns when the time budget of call, on route r, first tried at first, runs
// out: the most specific timeout (the tool's, the route's, the executor's) after first,
// or the call's own deadline if that is earlier.
func (e *Executor) Budget(call messages.ToolCall, r Route, first time.Time) time.Time {
	return e.budget(&call, &r, first)
}

func (e *Executor) budget(call *messages.ToolCall, r *Route, first time.Time) time.Time {
	timeout := cmp.Or(e.ToolTimeouts[call.Tool], r.Timeout, e.Timeout, 60*time.Second)
	end := first.Add(timeout)
	if !call.Deadline.IsZero() && call.Deadline.Before(end) {
		end = call.Deadline
	}
	return end
}

// Earlier is what earlier deliveries of a call did.
type Earlier struct {
	// First is when the call was first tried (zero: now); its time budget counts from
	// there.
	First time.Time
	// Attempts counts the tries made so far; this delivery's are counted on.
	Attempts int
	// Sent counts those of them that reached the tool (or may have): only what remains
	// of the route's MaxAttempts is tried.
	Sent int
	// Last says this delivery is the call's last: a failure is its answer, never handed
	// back to a later one.
	Last bool
}

// ExecuteRoute is [Executor.Execute] for a call the caller has resolved already with
// e.Router.Resolve (r and err are what it returned), so that the route is looked up
// once per call. The result's Attempts counts the earlier ones too.
//
// Before anything is tried it answers a call whose budget an earlier delivery used up,
// a route that failed, arguments the route's schema refuses and a call whose attempts
// earlier deliveries used up; then one delivery's attempts ([tries]) run it.
func (e *Executor) ExecuteRoute(ctx context.Context, call messages.ToolCall, r Route, err error, earlier Earlier) (messages.ToolResult, Outcome) {
	start := time.Now()
	first := earlier.First
	if first.IsZero() {
		first = start
	}
	budget := e.budget(&call, &r, first)
	if err == nil && !start.Before(budget) {
		// An earlier delivery used the budget up: answer now, try nothing.
		res := messages.ResultFor(call)
		res.Backend, res.Attempts = r.Server, earlier.Attempts
		return res.Fail(messages.Errorf(messages.CodeTimeout,
			"the call to %q ran out of its time budget of %v before it could be tried again", messages.EchoName(call.Tool), budget.Sub(first).Round(time.Millisecond))), Outcome{}
	}
	ctx, cancel := context.WithDeadline(ctx, budget)
	defer cancel()
	res := messages.ResultFor(call)
	res.Attempts = earlier.Attempts
	if err != nil {
		return res.Fail(Classify(err, Failed{Name: call.Tool, Route: r, Budget: budget.Sub(first)})), Outcome{}
	}
	res.Backend = r.Server
	if r.MCP.Server != "" || call.Tool != r.Info.Name {
		// A remote server's tool, or a tool called by another spelling than its shown
		// name: the parser checked only the shown names of in-process tools, which check
		// their own arguments besides.
		if call.Arguments, err = e.schemas.checkArguments(call.Tool, r, call.Arguments); err != nil {
			return res.Fail(Classify(err, Failed{Name: call.Tool, Route: r, Budget: budget.Sub(first)})), Outcome{}
		}
	}
	t := tries{e: e, ctx: ctx, earlier: earlier, start: start, budget: budget, limit: budget.Sub(first), tool: canonicalLabel(&r, nil), server: r.Server,
		label: r.Label(), remote: r.MCP.Remote, mcp: r.MCP.Server != "", safe: r.Info.ReadOnly || r.Info.Idempotent, maxAttempts: e.MaxAttempts(r), reached: earlier.Sent}
	if t.reached >= t.maxAttempts {
		// Earlier deliveries used every attempt up (one that failed after its last
		// attempt was recorded): answer now, try nothing.
		return res.Fail(messages.Errorf(messages.CodeServerUnavailable,
			"the call to %q reached its server %d times, as many as it may, and failed", messages.EchoName(call.Tool), t.reached)), Outcome{Exhausted: true, Sent: t.reached}
	}
	return t.run(&call, &r, &res)
}

// attemptNames are the names of the first attempts' spans, built once.
var attemptNames = [...]string{"attempt 0", "attempt 1", "attempt 2", "attempt 3", "attempt 4", "attempt 5"}

func attemptName(n int) string {
	if n >= 0 && n < len(attemptNames) {
		return attemptNames[n]
	}
	return "attempt " + strconv.Itoa(n)
}

// attempt runs the call once under its timeout, turning panics into internal errors
// and every failure into the *messages.ToolError [Classify] makes of it (budget: the
// call's time budget, Failed.Budget).
func (e *Executor) attempt(ctx context.Context, r *Route, call *messages.ToolCall, budget time.Duration) (out json.RawMessage, err error) {
	// ctx ends with the call's time budget: the attempt gets what remains of it.
	defer func() {
		if r := recover(); r != nil {
			err = messages.Errorf(messages.CodeInternal, "the tool %q crashed: %v", messages.EchoName(call.Tool), r)
		}
	}()
	args := call.Arguments
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	// A call to an MCP server takes its id along, so that what the server reports of its
	// progress is published for the call (mcpwire.Options.Progress); other backends
	// report none, and their calls carry nothing more.
	if r.MCP.Server != "" {
		ctx = mcpwire.WithCall(ctx, call.ID)
	}
	out, err = r.Call(ctx, call.Conversation, args)
	if err != nil {
		return nil, Classify(err, Failed{Name: call.Tool, Route: *r, Budget: budget})
	}
	return out, nil
}
