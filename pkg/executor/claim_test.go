package executor

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolbus/toolbus/pkg/claims"
	"github.com/toolbus/toolbus/pkg/messages"
)

// failingClaims is a calls bucket that cannot be reached.
type failingClaims struct{ claims.Store }

func (failingClaims) Begin(context.Context, string, string) (claims.Claim, error) {
	return claims.Claim{}, errors.New("no bucket")
}

// Claimed: a call with side effects, an approved call and every redelivery; not a
// read-only call's first delivery. A claim that cannot be taken hands the call back.
func TestStepClaim(t *testing.T) {
	tests := []struct {
		name      string
		tool      string
		delivered int
		approved  bool
		want      bool
	}{
		{name: "read-only, first delivery", tool: "read", delivered: 1},
		{name: "side effects", tool: "write", delivered: 1, want: true},
		{name: "read-only, redelivered", tool: "read", delivered: 2, want: true},
		{name: "read-only, approved", tool: "read", delivered: 1, approved: true, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newStepStage()
			c := newCall(t, f.Stage, tt.tool, `{}`, 0, tt.delivered)
			goesOn(t, f.Stage, c, "route")
			c.approved = tt.approved
			goesOn(t, f.Stage, c, "claim")
			begun := strings.Join(f.store.Log(), ",") == "begin c/r/0"
			if c.claimed != tt.want || begun != tt.want || (c.digest != "") != tt.want {
				t.Errorf("claimed %v (claims %v, digest %q), want %v", c.claimed, f.store.Log(), c.digest, tt.want)
			}
		})
	}
	f := newStepStage()
	f.Claims = failingClaims{}
	c := newCall(t, f.Stage, "write", `{}`, 0, 1)
	goesOn(t, f.Stage, c, "route")
	if v := runStep(t, f.Stage, c, "claim"); !isHandBack(v) {
		t.Errorf("no bucket: %v, %v; want it handed back", v.say, v.err)
	}
}

// A call whose claim looks abandoned but which runs in this process still is waited
// for, then handed back; one that does not run here goes on.
func TestStepRunning(t *testing.T) {
	f := newStepStage()
	f.store.Set("c/r/0", claims.Record{State: "running", Owner: "me", Started: time.Now()})
	c := newCall(t, f.Stage, "write", `{}`, 0, 2)
	goesOn(t, f.Stage, c, "route", "claim")
	if c.claim.Abandoned == nil {
		t.Fatal("the claim is not abandoned")
	}
	goesOn(t, f.Stage, c, "running") // not running here

	done := make(chan struct{})
	f.Exec.running.Store("c/r/0", done)
	verdicts := make(chan verdict, 1)
	go func() { verdicts <- runStep(t, f.Stage, c, "running") }()
	select {
	case v := <-verdicts:
		t.Fatalf("%v while the call runs here; want it to wait", v.say)
	case <-time.After(50 * time.Millisecond):
	}
	close(done)
	if v := <-verdicts; !isHandBack(v) {
		t.Errorf("after the run: %v, %v; want it handed back", v.say, v.err)
	}
}

// A call answered before is answered with its stored result, or refused when its id
// answered another call; neither runs.
func TestStepStored(t *testing.T) {
	stored := messages.ToolResult{CallID: "c/r/0", Success: true, Result: []byte(`{"ticket":"T-1"}`)}
	tests := []struct {
		name, args string
		want       string
	}{
		{name: "the same call", args: `{}`, want: "ok"},
		{name: "another call under its id", args: `{"other": 1}`, want: string(messages.CodeNotAllowed)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newStepStage()
			f.store.Set("c/r/0", claims.Record{State: "done", Result: &stored, Digest: claims.Digest("write", []byte(`{}`))})
			c := newCall(t, f.Stage, "write", tt.args, 0, 1)
			goesOn(t, f.Stage, c, "route", "claim")
			res := answerOf(t, runStep(t, f.Stage, c, "stored"))
			if code(res) != tt.want || tt.want == "ok" && string(res.Result) != string(stored.Result) {
				t.Errorf("answered %s %s, want %s", code(res), res.Result, tt.want)
			}
		})
	}
	f := newStepStage()
	c := newCall(t, f.Stage, "write", `{}`, 0, 1)
	goesOn(t, f.Stage, c, "route", "claim", "stored")
	if f.runs.Load() != 0 {
		t.Errorf("ran %d times", f.runs.Load())
	}
}

// A call whose executor stopped: taken over when it is safe to repeat; handed back while
// that executor may still be storing its result; then answered outcome_unknown.
func TestStepAbandoned(t *testing.T) {
	tests := []struct {
		name    string
		tool    string
		started time.Time
		last    bool
		want    string // "on", "back", or the answer's code
		claims  string
	}{
		{name: "safe to repeat: taken over", tool: "read", want: "on", claims: "begin c/r/0,take over c/r/0"},
		{name: "side effects, its executor may be alive", tool: "write", started: time.Now(), want: "back", claims: "begin c/r/0"},
		{name: "side effects, on the last delivery", tool: "write", started: time.Now(), last: true,
			want: string(messages.CodeOutcomeUnknown), claims: "begin c/r/0,finish c/r/0"},
		{name: "side effects, long gone", tool: "write", want: string(messages.CodeOutcomeUnknown), claims: "begin c/r/0,finish c/r/0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newStepStage()
			f.store.Set("c/r/0", claims.Record{State: "running", Owner: "gone", Started: tt.started})
			c := newCall(t, f.Stage, tt.tool, `{}`, 0, 2)
			c.d.Last = tt.last
			goesOn(t, f.Stage, c, "route", "claim")
			v := runStep(t, f.Stage, c, "abandoned")
			got := "on"
			switch {
			case isHandBack(v):
				got = "back"
			case v.say == answered:
				got = code(answerOf(t, v))
			}
			if got != tt.want || strings.Join(f.store.Log(), ",") != tt.claims {
				t.Errorf("%s, claims %v; want %s, %s", got, f.store.Log(), tt.want, tt.claims)
			}
		})
	}
}

// A call's time budget counts from its first attempt, which its claim carries from an
// earlier delivery.
func TestStepBudget(t *testing.T) {
	f := newStepStage()
	first := time.Now().Add(-time.Hour).Round(0)
	f.store.Set("c/r/0", claims.Record{State: "released", Attempts: 1, Sent: 1, FirstAttempt: first})
	c := newCall(t, f.Stage, "write", `{}`, 0, 2)
	goesOn(t, f.Stage, c, "route", "claim", "budget")
	if !c.first.Equal(first) {
		t.Errorf("the budget began at %v, want the first attempt %v", c.first, first)
	}
	before := time.Now()
	c = newCall(t, f.Stage, "read", `{}`, 0, 1)
	goesOn(t, f.Stage, c, "route", "claim", "budget")
	if c.first.Before(before) || c.first.After(time.Now()) {
		t.Errorf("a first delivery's budget began at %v, want now", c.first)
	}
}
