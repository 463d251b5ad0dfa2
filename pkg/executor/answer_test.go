package executor

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolbus/toolbus/pkg/affinity"
	"github.com/toolbus/toolbus/pkg/claims"
	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/redact"
	"github.com/toolbus/toolbus/pkg/telemetry"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// A claimed call runs marked as running in this process until what it holds is given
// back; a read-only call run again after its answer was lost counts the runs it left
// no record of.
func TestStepRun(t *testing.T) {
	f := newStepStage()
	seen := false
	f.Exec.Router = NewRouter(LocalBackend{Registry: func() *localtools.Registry {
		reg := localtools.New()
		reg.Add(localtools.Tool{Info: messages.ToolInfo{Name: "write"}, Run: func(context.Context, json.RawMessage) (json.RawMessage, error) {
			_, seen = f.Exec.running.Load("c/r/0")
			return json.RawMessage(`"done"`), nil
		}})
		reg.Add(counting("read", messages.ToolInfo{ReadOnly: true}, &f.runs, nil))
		return reg
	}()})
	c := newCall(t, f.Stage, "write", `{}`, 0, 1)
	goesOn(t, f.Stage, c, "route", "claim", "budget", "run")
	if !c.res.Success || string(c.res.Result) != `"done"` || c.res.Attempts != 1 || !seen {
		t.Fatalf("%+v, marked running while it ran: %v", c.res, seen)
	}
	c.end(f.Stage)
	if _, still := f.Exec.running.Load("c/r/0"); still || c.running == nil {
		t.Error("still marked running once given back")
	}
	c.running = nil

	c = newCall(t, f.Stage, "read", `{}`, 1, 3)
	goesOn(t, f.Stage, c, "route", "claim", "budget", "run")
	if !c.res.Success || c.res.Attempts != 3 || f.runs.Load() != 1 {
		t.Errorf("the third delivery of a read-only call: %d attempts, %d runs; want 3 attempts, 1 run", c.res.Attempts, f.runs.Load())
	}
}

// What the model reads is masked with the configuration's secrets, and says that the
// conversation's session was lost.
func TestStepTell(t *testing.T) {
	f := newStepStage()
	f.Exec.Redact = &redact.Current{}
	f.Exec.Redact.Set(redact.New("hunter2-secret"))
	c := newCall(t, f.Stage, "write", `{}`, 0, 1)
	goesOn(t, f.Stage, c, "route")
	c.res = messages.ResultFor(c.call).Fail(messages.Errorf(messages.CodeToolError, "login hunter2-secret refused"))
	goesOn(t, f.Stage, c, "tell")
	if strings.Contains(c.res.Error.Message, "hunter2-secret") || !strings.Contains(c.res.Error.Message, "login") {
		t.Errorf("the model reads %q", c.res.Error.Message)
	}

	c = newCall(t, f.Stage, "write", `{}`, 0, 1)
	goesOn(t, f.Stage, c, "route")
	c.route.Session, c.lease = "git", affinity.Lease{Mine: true, Ended: "it was idle"}
	c.res = messages.ResultFor(c.call)
	c.res.Success, c.res.Notice = true, "a notice of the tool's"
	goesOn(t, f.Stage, c, "tell")
	if !strings.Contains(c.res.Notice, "new session") || !strings.HasSuffix(c.res.Notice, "; a notice of the tool's") {
		t.Errorf("the notice: %q", c.res.Notice)
	}
}

// The call's span says how it ended: a failure's status, code and event.
func TestStepMark(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tracer := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("test")
	f := newStepStage()
	for _, fail := range []bool{false, true} {
		c := newCall(t, f.Stage, "write", `{}`, 0, 1)
		c.ctx, c.span = tracer.Start(context.Background(), "execute_tool write")
		c.recording = true
		c.res = messages.ResultFor(c.call)
		c.res.Backend, c.res.Attempts, c.res.Success = "mcp:git", 2, true
		if fail {
			c.res = c.res.Fail(messages.Errorf(messages.CodeTimeout, "too slow"))
		}
		goesOn(t, f.Stage, c, "mark")
		c.span.End()
		c.span = nil
		sp := rec.Ended()[len(rec.Ended())-1]
		attrs := map[string]string{}
		for _, kv := range sp.Attributes() {
			attrs[string(kv.Key)] = kv.Value.Emit()
		}
		events := len(sp.Events())
		if attrs[string(telemetry.Server)] != "git" || attrs[string(telemetry.Attempt)] != "2" {
			t.Errorf("failed %v: attributes %v", fail, attrs)
		}
		if got := sp.Status().Code == codes.Error && attrs[string(telemetry.ErrorCode)] == "timeout" && events == 1; got != fail {
			t.Errorf("failed %v: status %v, attributes %v, %d events", fail, sp.Status(), attrs, events)
		}
	}
}

// A transient failure a later delivery may try is handed back, its claim released with
// the attempts made; on the last delivery, or once it succeeded, it goes on.
func TestStepRetry(t *testing.T) {
	tests := []struct {
		name      string
		success   bool
		retryable bool
		last      bool
		want      bool
	}{
		{name: "transient", retryable: true, want: true},
		{name: "transient, last delivery", retryable: true, last: true},
		{name: "final", retryable: false},
		{name: "success", success: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newStepStage()
			c := newCall(t, f.Stage, "read", `{}`, 0, 1)
			c.d.Last = tt.last
			goesOn(t, f.Stage, c, "route")
			c.res, c.oc = messages.ResultFor(c.call), Outcome{Retryable: tt.retryable, Sent: 1}
			c.res.Attempts = 1
			if c.res.Success = tt.success; !tt.success {
				c.res = c.res.Fail(messages.Errorf(messages.CodeServerUnavailable, "502"))
			}
			v := runStep(t, f.Stage, c, "retry")
			released := strings.Join(f.store.Log(), ",") == "release c/r/0"
			if isHandBack(v) != tt.want || released != tt.want {
				t.Errorf("%v, claims %v; want handed back and released: %v", v.say, f.store.Log(), tt.want)
			}
		})
	}
}

// A result too large to travel inline is cut to a preview (stored whole when a store is
// given: TestLargeResultsAreStoredWhole); a small one travels as it is.
func TestStepFit(t *testing.T) {
	f := newStepStage()
	f.MaxInlineResultBytes = 1 << 10
	for _, n := range []int{100, 10_000} {
		c := newCall(t, f.Stage, "read", `{}`, 0, 1)
		c.res = messages.ResultFor(c.call)
		c.res.Success, c.res.Result = true, json.RawMessage(`"`+strings.Repeat("x", n)+`"`)
		goesOn(t, f.Stage, c, "fit")
		if cut := len(c.res.Result) < n; cut != (n > 1<<10) || cut && !strings.Contains(string(c.res.Result), `"truncated":true`) {
			t.Errorf("%d bytes: %d bytes travel, %.80s", n, len(c.res.Result), c.res.Result)
		}
	}
}

// The answer: a claimed call's result stored in its claim while it is published, the
// delivery's ack waiting for the store (Delivery.Published, which the runner calls once
// the answer is stored), and a dead-letter copy of a call whose retries ran out.
func TestStepPublish(t *testing.T) {
	tests := []struct {
		name      string
		tool      string
		exhausted bool
		claims    string
		messages  int
	}{
		{name: "not claimed", tool: "read", messages: 1},
		{name: "claimed", tool: "write", claims: "begin c/r/0,finish c/r/0", messages: 1},
		{name: "its retries ran out", tool: "write", exhausted: true, claims: "begin c/r/0,finish c/r/0", messages: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newStepStage()
			gate := &gatedFinish{Store: f.store, open: make(chan struct{})}
			f.Claims = gate
			c := newCall(t, f.Stage, tt.tool, `{}`, 0, 1)
			goesOn(t, f.Stage, c, "route", "claim", "budget", "run")
			c.res = messages.ResultFor(c.call)
			c.res.Success, c.res.Result = true, json.RawMessage(`1`)
			if tt.exhausted {
				c.res, c.oc = c.res.Fail(messages.Errorf(messages.CodeServerUnavailable, "502")), Outcome{Exhausted: true}
			}
			v := stepNamed(t, "publish").run(f.Stage, c.ctx, c) // the runner's part below
			res := answerOf(t, v)
			if len(v.out) != tt.messages || tt.messages == 2 && v.out[1].Subject != messages.DeadSubject("c") {
				t.Errorf("%d messages, want %d", len(v.out), tt.messages)
			}
			acked := make(chan error, 1)
			go func() { acked <- c.d.Published(context.Background()) }()
			if tt.claims != "" {
				select {
				case err := <-acked:
					t.Fatalf("the delivery could be acknowledged (%v) before its result was stored", err)
				case <-time.After(50 * time.Millisecond):
				}
				if _, running := f.Exec.running.Load(c.call.ID); !running {
					t.Error("the call is not marked running here while its result is being stored")
				}
			}
			close(gate.open)
			if err := <-acked; err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(f.store.Log(), ","); got != tt.claims {
				t.Errorf("claims %q, want %q", got, tt.claims)
			}
			if tt.claims != "" {
				if stored, _, _ := f.store.Stored(context.Background(), "c/r/0"); stored == nil || stored.Success != res.Success {
					t.Errorf("stored %+v, answered %+v", stored, res)
				}
				if _, running := f.Exec.running.Load(c.call.ID); running {
					t.Error("the call is still marked running here after its result was stored")
				}
			}
		})
	}
}

// A result that cannot be stored keeps the delivery from being acknowledged: the runner
// hands it back, and the call stays marked running here until the store gave up.
func TestStepPublishUnstored(t *testing.T) {
	f := newStepStage()
	f.StoreWait = 100 * time.Millisecond
	f.Claims = &gatedFinish{Store: f.store, err: errors.New("no JetStream")}
	c := newCall(t, f.Stage, "write", `{}`, 0, 1)
	goesOn(t, f.Stage, c, "route", "claim", "budget", "run")
	c.res = messages.ResultFor(c.call)
	c.res.Success, c.res.Result = true, json.RawMessage(`1`)
	answerOf(t, stepNamed(t, "publish").run(f.Stage, c.ctx, c))
	if err := c.d.Published(context.Background()); err == nil || !strings.Contains(err.Error(), "no JetStream") {
		t.Errorf("acknowledged: %v; want the store's error", err)
	}
	if _, running := f.Exec.running.Load(c.call.ID); running {
		t.Error("the call is still marked running here after the store gave up")
	}
}

// gatedFinish is a claims store whose Finish waits until open is closed, or fails
// with err.
type gatedFinish struct {
	claims.Store
	open chan struct{}
	err  error
}

func (g *gatedFinish) Finish(ctx context.Context, id, digest string, r messages.ToolResult) error {
	if g.err != nil {
		return g.err
	}
	<-g.open
	return g.Store.Finish(ctx, id, digest, r)
}
