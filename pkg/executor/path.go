package executor

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/toolbus/toolbus/pkg/affinity"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/claims"
	"github.com/toolbus/toolbus/pkg/mcpwire"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/policy"
	"go.opentelemetry.io/otel/trace"
)

// path is what one call goes through in the executor stage, in order ([Stage.Execute]):
// each step has one job and says of the call "go on", "answered" or "hand back"
// ([verdict]). A step that does not apply to a call goes on.
var path = [...]step{
	{"end", (*Stage).passEnd},            // a streamed response's end: passed on (stage.go)
	{"parsed", (*Stage).answerParsed},    // the parser's verdict: answered, nothing run (stage.go)
	{"route", (*Stage).route},            // resolved once: backend, tool, top-level lists; the span (stage.go)
	{"policy", (*Stage).checkPolicy},     // the rules: a denial answered (admit.go)
	{"approval", (*Stage).awaitApproval}, // a rule asks a person: parked until decided (approval.go)
	{"limits", (*Stage).countLimits},     // calls per interval, on the first delivery (admit.go)
	{"places", (*Stage).takePlaces},      // calls at once: places held until answered (admit.go)
	{"affinity", (*Stage).reachSession},  // the conversation's session held elsewhere: run there (affinity.go)
	{"claim", (*Stage).claimCall},        // a call that may not run twice: its id claimed (claim.go)
	{"running", (*Stage).awaitRunning},   // still running in this process: wait, hand back (claim.go)
	{"stored", (*Stage).answerStored},    // answered before: the stored result, or a reused id refused (claim.go)
	{"abandoned", (*Stage).takeOver},     // its executor stopped: taken over, or outcome_unknown (claim.go)
	{"budget", (*Stage).startBudget},     // when its time budget began (claim.go)
	{"run", (*Stage).runCall},            // run with retries: Executor.ExecuteRoute (answer.go)
	{"tell", (*Stage).tellModel},         // what the model reads: session notice, secrets masked (answer.go)
	{"mark", (*Stage).markSpan},          // the span: status, server, attempts, failure (answer.go)
	{"retry", (*Stage).retryLater},       // a transient failure a later delivery tries: handed back (answer.go)
	{"fit", (*Stage).fitResult},          // too large to travel: stored whole, a preview passed on (answer.go)
	{"publish", (*Stage).publish},        // logged, counted, stored in its claim, published (answer.go)
}

// step is one named step of [path].
type step struct {
	name string
	run  func(s *Stage, ctx context.Context, c *callState) verdict
}

// say is what a step says of a call.
type say uint8

const (
	goOn       say = iota // the next step has its say
	answered              // out is the call's answer (none: a call parked for approval), to publish and ack
	handedBack            // err is the runner's to act on: a bus.Retry naks with a delay
)

func (s say) String() string { return [...]string{"go on", "answered", "handed back"}[s] }

// verdict is a step's say on a call, and what goes with it.
type verdict struct {
	say say
	out []bus.Outgoing
	err error
}

// proceed is the verdict of a step that lets the call go on.
func proceed() verdict { return verdict{} }

// reply is the verdict of a step that answered the call with out, or hands it back
// when producing the answer failed (err: a result that could not be stored).
func reply(out []bus.Outgoing, err error) verdict {
	if err != nil {
		return verdict{say: handedBack, out: out, err: err}
	}
	return verdict{say: answered, out: out}
}

// handBack is the verdict of a step that gives the call back to JetStream: err is
// normally a bus.Retry, for another delivery after its delay.
func handBack(err error) verdict { return verdict{say: handedBack, err: err} }

// callState is one call on its way through [path]: what the steps found out so far, and
// what the call holds until it is answered, given back by [callState.end].
type callState struct {
	ctx  context.Context // the call's, with its span once routed
	call messages.ToolCall
	d    *bus.Delivery

	// route
	route     Route
	routeErr  error
	tool      string // its label: the canonical name, or telemetry.UnknownTool
	span      trace.Span
	recording bool      // the span records: attributes are built
	admit     bool      // the admission steps apply: routed, and not forwarded by a replica that checked it
	admitted  time.Time // when admission began: a refusal's time

	// policy, approval, limits, places
	policy   *policy.Policy // the rules in force when the call was checked
	decision policy.Decision
	pc       policy.Call // what the rules and limits see of the call, built once (policyCall)
	pcBuilt  bool
	approved bool                  // a person approved it: claimed, whatever its annotations
	release  func(context.Context) // gives back the places it took

	lease affinity.Lease // the conversation's session, when its server keeps one per conversation

	// claim, budget
	safe    bool // read-only or idempotent
	claimed bool
	digest  string
	claim   claims.Claim
	running chan struct{} // closed once the claimed call's result is stored
	first   time.Time     // when its time budget began

	// run
	session mcpwire.SessionReport
	res     messages.ToolResult
	oc      Outcome
}

// Execute answers one call: [path]'s steps in order, until one answers it or hands it
// back. What the call holds (a place under a limit, the mark that it runs here, its
// span) is given back however it ends.
func (s *Stage) Execute(ctx context.Context, call messages.ToolCall, d *bus.Delivery) ([]bus.Outgoing, error) {
	c := states.Get().(*callState) // zero: new, or recycled
	c.ctx, c.call, c.d = ctx, call, d
	defer s.recycle(c)
	for i := range path {
		if v := path[i].run(s, c.ctx, c); v.say != goOn {
			return v.out, v.err
		}
	}
	return nil, errors.New("executor: no step answered the call") // publish always does
}

// states keeps the calls' states for the next calls: the path allocates nothing of its
// own per call. Nothing a step hands out points into a state (its answers are encoded,
// the session report is written only while the call runs), so a state is reused once
// its call is answered.
var states = sync.Pool{New: func() any { return new(callState) }}

// recycle ends the call c and keeps its state for another.
func (s *Stage) recycle(c *callState) {
	c.end(s)
	*c = callState{}
	states.Put(c)
}

// end gives back what the call holds: its mark as running here, its places under the
// limits (the service stopping included), its span.
func (c *callState) end(s *Stage) {
	if c.running != nil {
		s.Exec.running.Delete(c.call.ID)
		close(c.running)
	}
	if c.release != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), 5*time.Second)
		defer cancel()
		c.release(rctx)
	}
	if c.span != nil {
		c.span.End()
	}
}

// policyCall is what the rules and the limits see of the call.
func (c *callState) policyCall() policy.Call {
	if !c.pcBuilt {
		ref := c.route.ref()
		c.pc = policy.Call{Tool: c.route.Canonical(), Server: ref.Server, Name: ref.Tool, Args: c.call.Arguments,
			Conversation: c.call.Conversation, Tenant: messages.Tenant(c.call.Conversation)}
		c.pcBuilt = true
	}
	return c.pc
}
