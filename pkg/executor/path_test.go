package executor

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/catalog"
	"github.com/toolbus/toolbus/pkg/claims/claimstest"
	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/telemetry"
)

// The tests of the path's steps run one step on a call's state as the steps before it
// left it (runStep), so that each fails when its own step breaks.

// stepStage is a stage over two local tools that count their runs: "read" (read-only)
// and "write" (side effects), its claims in memory.
type stepStage struct {
	*Stage
	store *claimstest.Memory
	runs  atomic.Int32
}

func newStepStage() *stepStage {
	f := &stepStage{store: &claimstest.Memory{}}
	reg := localtools.New()
	reg.Add(counting("read", messages.ToolInfo{ReadOnly: true}, &f.runs, nil))
	reg.Add(counting("write", messages.ToolInfo{}, &f.runs, nil))
	f.Stage = &Stage{Claims: f.store, Exec: &Executor{Router: NewRouter(LocalBackend{Registry: reg})}}
	return f
}

// newCall is the state of call c/r/<index> to tool with args on its delivered-th
// delivery, before any step; what it holds is given back when the test ends.
func newCall(t *testing.T, s *Stage, tool, args string, index, delivered int) *callState {
	t.Helper()
	call := messages.ToolCall{ID: messages.CallID("c", "r", index), ResponseID: "r", Conversation: "c", Index: index, Count: index + 1,
		Tool: tool, Arguments: json.RawMessage(args)}
	c := &callState{ctx: context.Background(), call: call, d: &bus.Delivery{Delivered: delivered}}
	t.Cleanup(func() { c.end(s) })
	return c
}

// deliver answers call on delivery d as the stage runner does: [Stage.Execute], then,
// when it answered, what it asked to be done once its messages are stored.
func deliver(s *Stage, ctx context.Context, call messages.ToolCall, d *bus.Delivery) ([]bus.Outgoing, error) {
	out, err := s.Execute(ctx, call, d)
	if err == nil {
		err = d.Published(ctx)
	}
	return out, err
}

// runStep runs the step of path called name on c and, when it answers the call, what
// it asked the runner to do once the answer is stored (its error hands the call back, as
// the runner does).
func runStep(t *testing.T, s *Stage, c *callState, name string) verdict {
	t.Helper()
	v := stepNamed(t, name).run(s, c.ctx, c)
	if v.say == answered {
		if err := c.d.Published(c.ctx); err != nil {
			return verdict{say: handedBack, out: v.out, err: err}
		}
	}
	return v
}

// stepNamed is the step of path called name.
func stepNamed(t *testing.T, name string) step {
	t.Helper()
	for _, st := range path {
		if st.name == name {
			return st
		}
	}
	t.Fatalf("no step %q in the path", name)
	return step{}
}

// goesOn runs the named steps on c, each of which must let it go on.
func goesOn(t *testing.T, s *Stage, c *callState, names ...string) {
	t.Helper()
	for _, name := range names {
		if v := runStep(t, s, c, name); v.say != goOn {
			t.Fatalf("step %s: %v, %d messages, %v; want it to go on", name, v.say, len(v.out), v.err)
		}
	}
}

// answerOf is the result a verdict answered with.
func answerOf(t *testing.T, v verdict) messages.ToolResult {
	t.Helper()
	if v.say != answered || v.err != nil || len(v.out) == 0 {
		t.Fatalf("%v, %d messages, %v; want an answer", v.say, len(v.out), v.err)
	}
	var res messages.ToolResult
	if err := json.Unmarshal(v.out[0].Body, &res); err != nil {
		t.Fatal(err)
	}
	return res
}

// isHandBack reports whether v hands the call back for a later delivery.
func isHandBack(v verdict) bool {
	var retry *bus.RetryError
	return v.say == handedBack && len(v.out) == 0 && errors.As(v.err, &retry)
}

func code(res messages.ToolResult) string {
	if res.Error == nil {
		return "ok"
	}
	return string(res.Error.Code)
}

// The path is one list, in this order: docs/architecture.md describes it so.
func TestPathIsOneList(t *testing.T) {
	want := []string{"end", "parsed", "route", "policy", "approval", "limits", "places", "affinity", "claim", "running",
		"stored", "abandoned", "budget", "run", "tell", "mark", "retry", "fit", "publish"}
	var got []string
	for _, st := range path {
		got = append(got, st.name)
	}
	if !slices.Equal(got, want) {
		t.Errorf("the path: %v\nwant %v", got, want)
	}
}

// A streamed response's end is passed on as a result of its own, nothing run.
func TestStepEnd(t *testing.T) {
	f := newStepStage()
	c := newCall(t, f.Stage, "write", `{}`, 2, 1)
	c.call.End = true
	v := runStep(t, f.Stage, c, "end")
	if res := answerOf(t, v); v.out[0].Subject != messages.ResultSubject("c") || v.out[0].Meta.MsgID != "c/r/2" || res.CallID != "c/r/2" {
		t.Errorf("the end passed on as %s %q: %+v", v.out[0].Subject, v.out[0].Meta.MsgID, res)
	}
	goesOn(t, f.Stage, newCall(t, f.Stage, "write", `{}`, 0, 1), "end")
	if f.runs.Load() != 0 || len(f.store.Log()) != 0 {
		t.Errorf("%d runs, claims %v: want nothing", f.runs.Load(), f.store.Log())
	}
}

// The parser's verdict is the answer; nothing runs, nothing is claimed.
func TestStepParsed(t *testing.T) {
	f := newStepStage()
	c := newCall(t, f.Stage, "write", `{}`, 0, 1)
	c.call.Error = &messages.ResultError{Code: messages.CodeParseError, Message: "cut off"}
	if res := answerOf(t, runStep(t, f.Stage, c, "parsed")); code(res) != string(messages.CodeParseError) || res.Error.Message != "cut off" {
		t.Errorf("answered %+v, want the parser's parse_error", res.Error)
	}
	goesOn(t, f.Stage, newCall(t, f.Stage, "write", `{}`, 0, 1), "parsed")
	if f.runs.Load() != 0 || len(f.store.Log()) != 0 {
		t.Errorf("%d runs, claims %v: want nothing", f.runs.Load(), f.store.Log())
	}
}

// A call is routed once: its route and label, or the route's error (an unknown tool, a
// tool the top-level lists refuse), which skips admission.
func TestStepRoute(t *testing.T) {
	f := newStepStage()
	f.Exec.Router.SetLists(catalog.Lists{Blocked: []string{"write"}})
	tests := []struct {
		name, tool string
		wantCode   messages.ErrorCode
		wantLabel  string
	}{
		{name: "routed", tool: "read", wantLabel: "read"},
		{name: "unknown", tool: "nope", wantCode: messages.CodeUnknownTool, wantLabel: telemetry.UnknownTool},
		{name: "refused by the lists", tool: "write", wantCode: messages.CodeNotAllowed, wantLabel: telemetry.UnknownTool},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCall(t, f.Stage, tt.tool, `{}`, 0, 1)
			goesOn(t, f.Stage, c, "route")
			var got messages.ErrorCode
			if c.routeErr != nil {
				got = messages.AsToolError(c.routeErr).Code
			}
			if got != tt.wantCode || c.tool != tt.wantLabel || c.admit != (tt.wantCode == "") || c.span == nil {
				t.Errorf("route error %q, label %q, admit %v; want %q, %q", got, c.tool, c.admit, tt.wantCode, tt.wantLabel)
			}
			if tt.wantCode == "" && (c.route.Server != "local" || !c.route.Info.ReadOnly || c.admitted.IsZero()) {
				t.Errorf("route %+v, admitted at %v", c.route, c.admitted)
			}
		})
	}
}
