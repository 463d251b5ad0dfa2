package executor

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/claims/claimstest"
	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/policy"
)

// The stage asks the policy before a call is claimed: a denied call is answered
// not_allowed and never run, on every delivery; a call over a limit is answered
// rate_limited, counted on its first delivery only, and a redelivery answers it from
// its claim instead of running it uncounted.
func TestStageAdmits(t *testing.T) {
	_, js := bustest.JetStream(t)
	kv, err := js.CreateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: messages.BucketLimits})
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	reg := localtools.New()
	reg.Add(counting("t", messages.ToolInfo{ReadOnly: true}, &runs, nil))
	exec := &Executor{Router: NewRouter(LocalBackend{Registry: reg}), Limits: &policy.Limiter{KV: kv}}
	p, err := policy.Compile([]policy.Rule{{Name: "no-secret", Tools: []string{"t"}, When: "has(args.secret) && args.secret == true", Effect: policy.Deny}})
	if err != nil {
		t.Fatal(err)
	}
	exec.Policy.Store(p)
	exec.Limits.Set([]policy.Limit{{Name: "one", Per: policy.PerConversation, Calls: 1, Interval: messages.Duration(time.Minute)}})
	s := &Stage{Claims: &claimstest.Memory{}, Exec: exec}
	answer := func(id, args string, delivered int) messages.ToolResult {
		t.Helper()
		call := messages.ToolCall{ID: id, ResponseID: "r", Conversation: "c", Count: 1, Tool: "t", Arguments: json.RawMessage(args)}
		out, err := deliver(s, context.Background(), call, &bus.Delivery{Delivered: delivered})
		if err != nil || len(out) != 1 {
			t.Fatalf("%s: %v, %d messages", id, err, len(out))
		}
		var res messages.ToolResult
		if err := json.Unmarshal(out[0].Body, &res); err != nil {
			t.Fatal(err)
		}
		return res
	}
	for _, delivered := range []int{1, 2} {
		if res := answer("r/0", `{"secret": true}`, delivered); res.Error == nil || res.Error.Code != messages.CodeNotAllowed || !strings.Contains(res.Error.Message, `"no-secret"`) {
			t.Fatalf("denied, delivery %d: %+v", delivered, res)
		}
	}
	if res := answer("r/1", `{}`, 1); !res.Success {
		t.Fatalf("the first call: %+v", res.Error)
	}
	for _, delivered := range []int{1, 2} {
		if res := answer("r/2", `{}`, delivered); res.Error == nil || res.Error.Code != messages.CodeRateLimited {
			t.Fatalf("over the limit, delivery %d: %+v", delivered, res)
		}
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the tool ran %d times, want once", n)
	}
}

// An approval is bound to the arguments it was asked for: the same call id sent again
// with other arguments (a forged or changed call) is asked about again — the decision on
// the first arguments does not run it — and nothing runs until that is decided.
func TestApprovalBoundToItsArguments(t *testing.T) {
	a := newApprovalStage(t)
	approvals, run := a.approvals, a.run
	if out := run(`{"to": "alice"}`); len(out) != 0 || len(a.announced) != 1 {
		t.Fatalf("the first call: %d messages, %d requests; want it waiting", len(out), len(a.announced))
	}
	first := a.announced[0]
	if _, err := approvals.DecideAs(context.Background(), "alice", nil, first.ID, messages.DecideRequest{Approve: true, ArgumentsSHA256: first.ArgumentsSHA256}); err != nil {
		t.Fatal(err)
	}
	// The same call id with other arguments: asked again, not run on alice's approval.
	if out := run(`{"to": "mallory"}`); len(out) != 0 || len(a.announced) != 2 || a.announced[1].ArgumentsSHA256 == first.ArgumentsSHA256 {
		t.Fatalf("other arguments: %d messages, %d requests; want a new request", len(out), len(a.announced))
	}
	if n := a.runs.Load(); n != 0 {
		t.Fatalf("the tool ran %d times on an approval of other arguments", n)
	}
	rec, _, err := approvals.Get(context.Background(), first.ID)
	if err != nil || rec.State != messages.ApprovalPending || rec.ArgumentsSHA256 != a.announced[1].ArgumentsSHA256 {
		t.Fatalf("the record: %s for %s, %v; want pending for the new arguments", rec.State, rec.ArgumentsSHA256, err)
	}
}

// A call under an id that was approved, run and answered — its response sent again —
// is not asked about again: the same call is answered with its stored result, another
// call under the id is refused; neither runs.
func TestAnsweredCallIsNotAskedAgain(t *testing.T) {
	a := newApprovalStage(t)
	approvals, kv, run := a.approvals, a.approvals.KV, a.run
	result := func(out []bus.Outgoing) messages.ToolResult {
		t.Helper()
		var res messages.ToolResult
		if len(out) != 1 || json.Unmarshal(out[0].Body, &res) != nil {
			t.Fatalf("%d messages, want one result", len(out))
		}
		return res
	}
	if out := run(`{"to": "alice"}`); len(out) != 0 || len(a.announced) != 1 {
		t.Fatalf("the first call: %d messages, %d requests; want it waiting", len(out), len(a.announced))
	}
	if _, err := approvals.DecideAs(context.Background(), "bob", nil, a.announced[0].ID, messages.DecideRequest{Approve: true, ArgumentsSHA256: a.announced[0].ArgumentsSHA256}); err != nil {
		t.Fatal(err)
	}
	paid := result(run(`{"to": "alice"}`))
	if !paid.Success || a.runs.Load() != 1 {
		t.Fatalf("the approved call: %+v, %d runs", paid.Error, a.runs.Load())
	}
	// Its approval gone (expired from the bucket), the response is sent again.
	if err := kv.Purge(context.Background(), bus.Key(a.announced[0].ID)); err != nil {
		t.Fatal(err)
	}
	if again := result(run(`{"to": "alice"}`)); !again.Success || string(again.Result) != string(paid.Result) {
		t.Fatalf("the same call again: %+v %s; want the stored result", again.Error, again.Result)
	}
	other := result(run(`{"to": "mallory"}`))
	if other.Error == nil || other.Error.Code != messages.CodeNotAllowed || !strings.Contains(other.Error.Message, "already answered another call") {
		t.Fatalf("another call under the id: %+v", other)
	}
	if len(a.announced) != 1 || a.runs.Load() != 1 {
		t.Fatalf("%d requests, %d runs; want nothing asked or run again", len(a.announced), a.runs.Load())
	}
}

// approvalStage is an executor stage whose tool "pay" (runs counts its runs) a rule asks
// a person to approve, in a real approvals bucket; announced holds what it asked.
type approvalStage struct {
	approvals *policy.Approvals
	runs      atomic.Int32
	announced []messages.ApprovalRequest
	stage     *Stage
	t         *testing.T
}

func newApprovalStage(t *testing.T) *approvalStage {
	_, js := bustest.JetStream(t)
	kv, err := js.CreateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: messages.BucketApprovals})
	if err != nil {
		t.Fatal(err)
	}
	a := &approvalStage{approvals: &policy.Approvals{KV: kv}, t: t}
	reg := localtools.New()
	reg.Add(counting("pay", messages.ToolInfo{}, &a.runs, nil))
	exec := &Executor{Router: NewRouter(LocalBackend{Registry: reg}), Approvals: a.approvals,
		Announce: func(_ context.Context, r messages.ApprovalRequest) { a.announced = append(a.announced, r) }}
	p, err := policy.Compile([]policy.Rule{{Name: "ask", Tools: []string{"pay"}, Effect: policy.Approve}})
	if err != nil {
		t.Fatal(err)
	}
	exec.Policy.Store(p)
	a.stage = &Stage{Claims: &claimstest.Memory{}, Exec: exec}
	return a
}

// run executes call c/r/0 to pay with args, its first delivery.
func (a *approvalStage) run(args string) []bus.Outgoing {
	a.t.Helper()
	call := messages.ToolCall{ID: "c/r/0", ResponseID: "r", Conversation: "c", Count: 1, Tool: "pay", Arguments: json.RawMessage(args)}
	out, err := deliver(a.stage, context.Background(), call, &bus.Delivery{Delivered: 1})
	if err != nil {
		a.t.Fatal(err)
	}
	return out
}

// The rules, on every delivery of a routed call: a denial is answered not_allowed with
// nothing claimed; a rule asking a person leaves the call to the approval step; a call
// that could not be routed is not theirs to judge.
func TestStepPolicy(t *testing.T) {
	p, err := policy.Compile([]policy.Rule{
		{Name: "no-secret", When: "has(args.secret)", Effect: policy.Deny},
		{Name: "ask", Tools: []string{"write"}, Effect: policy.Approve},
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, tool, args string
		delivered        int
		want             string // "on", or the answer's code
		wantEffect       policy.Effect
	}{
		{name: "allowed", tool: "read", args: `{}`, delivered: 1, want: "on", wantEffect: policy.Allow},
		{name: "denied", tool: "read", args: `{"secret": 1}`, delivered: 1, want: string(messages.CodeNotAllowed)},
		{name: "denied on a redelivery too", tool: "read", args: `{"secret": 1}`, delivered: 3, want: string(messages.CodeNotAllowed)},
		{name: "a person asked", tool: "write", args: `{}`, delivered: 1, want: "on", wantEffect: policy.Approve},
		{name: "not routed", tool: "nope", args: `{"secret": 1}`, delivered: 1, want: "on"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newStepStage()
			f.Exec.Policy.Store(p)
			c := newCall(t, f.Stage, tt.tool, tt.args, 0, tt.delivered)
			goesOn(t, f.Stage, c, "route")
			v := runStep(t, f.Stage, c, "policy")
			got := "on"
			if v.say != goOn {
				res := answerOf(t, v)
				got = code(res)
				if !strings.Contains(res.Error.Message, `"no-secret"`) || res.Policy != p.Revision() {
					t.Errorf("the denial %q, revision %q", res.Error.Message, res.Policy)
				}
			}
			if got != tt.want || got == "on" && c.decision.Effect != tt.wantEffect || len(f.store.Log()) != 0 {
				t.Errorf("%s (decision %q), claims %v; want %s (%q), nothing claimed", got, c.decision.Effect, f.store.Log(), tt.want, tt.wantEffect)
			}
		})
	}
}

// A call a rule asks a person to approve is parked (answered with nothing, announced)
// until decided; approved, it goes on to be claimed; without an approvals bucket it is
// refused. A call no rule asks about is not the step's.
func TestStepApproval(t *testing.T) {
	a := newApprovalStage(t)
	s := a.stage
	at := func() *callState {
		c := newCall(t, s, "pay", `{"to": "alice"}`, 0, 1)
		goesOn(t, s, c, "route", "policy")
		return c
	}
	v := runStep(t, s, at(), "approval")
	if v.say != answered || len(v.out) != 0 || v.err != nil || len(a.announced) != 1 {
		t.Fatalf("%v, %d messages, %v, %d requests; want it parked and announced", v.say, len(v.out), v.err, len(a.announced))
	}
	if _, err := a.approvals.DecideAs(context.Background(), "bob", nil, a.announced[0].ID,
		messages.DecideRequest{Approve: true, ArgumentsSHA256: a.announced[0].ArgumentsSHA256}); err != nil {
		t.Fatal(err)
	}
	c := at()
	goesOn(t, s, c, "approval")
	if !c.approved || a.runs.Load() != 0 {
		t.Errorf("approved %v, %d runs; want it approved, to run later", c.approved, a.runs.Load())
	}

	s.Exec.Approvals = nil
	if res := answerOf(t, runStep(t, s, at(), "approval")); code(res) != string(messages.CodeNotAllowed) {
		t.Errorf("no approvals bucket: %+v", res.Error)
	}
	f := newStepStage()
	c = newCall(t, f.Stage, "write", `{}`, 0, 1)
	goesOn(t, f.Stage, c, "route", "policy", "approval")
}

// limitsStage is a step stage whose limits are kept in a real limits bucket.
func limitsStage(t *testing.T, limits ...policy.Limit) *stepStage {
	t.Helper()
	_, js := bustest.JetStream(t)
	kv, err := js.CreateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: messages.BucketLimits})
	if err != nil {
		t.Fatal(err)
	}
	f := newStepStage()
	f.Exec.Limits = &policy.Limiter{KV: kv}
	f.Exec.Limits.Set(limits)
	return f
}

// Calls per interval are counted on a call's first delivery only: one over the limit is
// answered rate_limited, its answer kept in its claim; a redelivery is not counted again.
func TestStepLimits(t *testing.T) {
	f := limitsStage(t, policy.Limit{Name: "one", Per: policy.PerConversation, Calls: 1, Interval: messages.Duration(time.Minute)})
	limits := func(index, delivered int) verdict {
		c := newCall(t, f.Stage, "read", `{}`, index, delivered)
		goesOn(t, f.Stage, c, "route")
		return runStep(t, f.Stage, c, "limits")
	}
	if v := limits(0, 1); v.say != goOn {
		t.Fatalf("the first call: %v, %v", v.say, v.err)
	}
	if res := answerOf(t, limits(1, 1)); code(res) != string(messages.CodeRateLimited) {
		t.Errorf("over the limit: %+v", res.Error)
	}
	if got := strings.Join(f.store.Log(), ","); got != "begin c/r/1,finish c/r/1" {
		t.Errorf("claims %q: want the refusal stored", got)
	}
	if v := limits(2, 2); v.say != goOn {
		t.Errorf("a redelivery: %v, %v; want it not counted", v.say, v.err)
	}
	if v := limits(3, 1); v.say != answered {
		t.Errorf("a call after the redelivery: %v; want the limit still used up by the first", v.say)
	}
}

// Calls at once: a call holds its place until what it holds is given back; a first
// delivery that finds none is answered rate_limited, a redelivery handed back.
func TestStepPlaces(t *testing.T) {
	f := limitsStage(t, policy.Limit{Name: "alone", Per: policy.PerConversation, Concurrent: 1})
	places := func(index, delivered int) (*callState, verdict) {
		c := newCall(t, f.Stage, "read", `{}`, index, delivered)
		goesOn(t, f.Stage, c, "route")
		return c, runStep(t, f.Stage, c, "places")
	}
	first, v := places(0, 1)
	if v.say != goOn || first.release == nil {
		t.Fatalf("the first call: %v, %v, holding a place: %v", v.say, v.err, first.release != nil)
	}
	if _, v := places(1, 1); code(answerOf(t, v)) != string(messages.CodeRateLimited) {
		t.Error("a second call at once: not refused")
	}
	if _, v := places(2, 2); !isHandBack(v) {
		t.Errorf("a redelivery at once: %v, %v; want it handed back", v.say, v.err)
	}
	first.end(f.Stage)
	first.release = nil
	if c, v := places(3, 1); v.say != goOn || c.release == nil {
		t.Errorf("after the first was answered: %v, %v", v.say, v.err)
	}
}
