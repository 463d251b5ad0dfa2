package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/telemetry"
)

// flaky fails its first n calls with err, then answers {"n": calls}.
func flaky(name string, n int32, err error, idempotent bool, calls *atomic.Int32) localtools.Tool {
	return localtools.Tool{
		Info: messages.ToolInfo{Name: name, Idempotent: idempotent},
		Run: func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
			c := calls.Add(1)
			if c <= n {
				return nil, err
			}
			return json.RawMessage(`{"ok":true}`), nil
		},
	}
}

func TestExecute(t *testing.T) {
	unavailable := &messages.ToolError{Code: messages.CodeServerUnavailable, Message: "502 from upstream"}
	refused := &messages.ToolError{Code: messages.CodeServerUnavailable, Message: "connection refused", Unsent: true}
	fast := RetryPolicy{MaxAttempts: 3, InitialInterval: time.Millisecond, MaxInterval: 2 * time.Millisecond}
	tests := []struct {
		name          string
		tool          func(calls *atomic.Int32) localtools.Tool
		call          string
		timeout       time.Duration
		wantCode      messages.ErrorCode // "" = success
		wantCalls     int32
		wantRetryable bool
		wantMaybeRan  bool
	}{
		{name: "success", tool: func(c *atomic.Int32) localtools.Tool { return flaky("t", 0, nil, false, c) }, wantCalls: 1},
		{name: "unknown tool", call: "nope", tool: func(c *atomic.Int32) localtools.Tool { return flaky("t", 0, nil, false, c) }, wantCode: messages.CodeUnknownTool},
		{name: "idempotent transient retried to success", tool: func(c *atomic.Int32) localtools.Tool { return flaky("t", 2, unavailable, true, c) }, wantCalls: 3},
		{name: "idempotent transient exhausted: MaxAttempts in all, no later delivery", tool: func(c *atomic.Int32) localtools.Tool { return flaky("t", 9, unavailable, true, c) },
			wantCode: messages.CodeServerUnavailable, wantCalls: 3, wantMaybeRan: true},
		{name: "side effect after send not retried", tool: func(c *atomic.Int32) localtools.Tool { return flaky("t", 1, unavailable, false, c) },
			wantCode: messages.CodeServerUnavailable, wantCalls: 1, wantMaybeRan: true},
		{name: "side effect unsent retried", tool: func(c *atomic.Int32) localtools.Tool { return flaky("t", 2, refused, false, c) }, wantCalls: 3},
		{name: "tool error never retried", tool: func(c *atomic.Int32) localtools.Tool {
			return flaky("t", 9, messages.Errorf(messages.CodeToolError, "no such ticket"), true, c)
		}, wantCode: messages.CodeToolError, wantCalls: 1, wantMaybeRan: true},
		{name: "plain error is a tool error", tool: func(c *atomic.Int32) localtools.Tool { return flaky("t", 9, errors.New("disk full"), false, c) },
			wantCode: messages.CodeToolError, wantCalls: 1, wantMaybeRan: true},
		{name: "panic is internal", tool: func(c *atomic.Int32) localtools.Tool {
			return localtools.Tool{Info: messages.ToolInfo{Name: "t"}, Run: func(context.Context, json.RawMessage) (json.RawMessage, error) { c.Add(1); panic("boom") }}
		}, wantCode: messages.CodeInternal, wantCalls: 1, wantMaybeRan: true},
		{name: "invalid JSON result", tool: func(c *atomic.Int32) localtools.Tool {
			return localtools.Tool{Info: messages.ToolInfo{Name: "t"}, Run: func(context.Context, json.RawMessage) (json.RawMessage, error) {
				c.Add(1)
				return json.RawMessage(`{oops`), nil
			}}
		}, wantCode: messages.CodeToolError, wantCalls: 1, wantMaybeRan: true},
		{name: "side effect past its budget: outcome unknown, not repeated", timeout: 20 * time.Millisecond, tool: func(c *atomic.Int32) localtools.Tool {
			return localtools.Tool{Info: messages.ToolInfo{Name: "t"}, Run: func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
				c.Add(1)
				<-ctx.Done()
				return nil, ctx.Err()
			}}
		}, wantCode: messages.CodeOutcomeUnknown, wantCalls: 1, wantMaybeRan: true},
		{name: "read-only past its budget: timeout, no attempt after the budget", timeout: 20 * time.Millisecond, tool: func(c *atomic.Int32) localtools.Tool {
			return localtools.Tool{Info: messages.ToolInfo{Name: "t", ReadOnly: true}, Run: func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
				c.Add(1)
				<-ctx.Done()
				return nil, ctx.Err()
			}}
		}, wantCode: messages.CodeTimeout, wantCalls: 1, wantMaybeRan: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			reg := localtools.New()
			if err := reg.Add(tt.tool(&calls)); err != nil {
				t.Fatal(err)
			}
			e := &Executor{Router: NewRouter(LocalBackend{Registry: reg}), Timeout: tt.timeout, Retry: fast}
			name := "t"
			if tt.call != "" {
				name = tt.call
			}
			res, oc := e.Execute(context.Background(), messages.ToolCall{ID: "r/0", ResponseID: "r", Tool: name, Count: 1})
			if tt.wantCode == "" {
				if !res.Success || string(res.Result) != `{"ok":true}` {
					t.Fatalf("want success, got %+v", res)
				}
			} else if res.Success || res.Error == nil || res.Error.Code != tt.wantCode {
				t.Fatalf("want %s, got %+v (%+v)", tt.wantCode, res, res.Error)
			}
			if calls.Load() != tt.wantCalls {
				t.Errorf("tool ran %d times, want %d", calls.Load(), tt.wantCalls)
			}
			if tt.wantCalls > 0 && res.Attempts != int(tt.wantCalls) {
				t.Errorf("attempts %d, want %d", res.Attempts, tt.wantCalls)
			}
			if oc.Retryable != tt.wantRetryable || oc.MaybeRan != tt.wantMaybeRan {
				t.Errorf("outcome %+v, want retryable=%v maybeRan=%v", oc, tt.wantRetryable, tt.wantMaybeRan)
			}
			if res.CallID != "r/0" || res.Tool != name {
				t.Errorf("result not addressed to its call: %+v", res)
			}
		})
	}
}

func TestExecuteHonoursCallDeadline(t *testing.T) {
	var calls atomic.Int32
	reg := localtools.New()
	reg.Add(flaky("t", 99, &messages.ToolError{Code: messages.CodeServerUnavailable, Message: "down", Unsent: true}, true, &calls))
	e := &Executor{Router: NewRouter(LocalBackend{Registry: reg}), Retry: RetryPolicy{MaxAttempts: 1000, InitialInterval: time.Millisecond, MaxInterval: time.Millisecond, MaxElapsed: time.Minute}}
	res, oc := e.Execute(context.Background(), messages.ToolCall{Tool: "t", Deadline: time.Now().Add(30 * time.Millisecond)})
	if res.Success || oc.Retryable {
		t.Fatalf("a call past its deadline must fail for good: %+v %+v", res, oc)
	}
	if calls.Load() >= 1000 {
		t.Errorf("retried %d times, ignoring the deadline", calls.Load())
	}
}

func TestUnknownToolSuggestsTheClosest(t *testing.T) {
	reg := localtools.New()
	for i := range 40 {
		reg.Add(localtools.Tool{Info: messages.ToolInfo{Name: fmt.Sprintf("tool_%02d", i)}, Run: func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, nil }})
	}
	reg.Add(localtools.Tool{Info: messages.ToolInfo{Name: "tickets__create_ticket"}, Run: func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, nil }})
	e := &Executor{Router: NewRouter(LocalBackend{Registry: reg})}
	res, _ := e.Execute(context.Background(), messages.ToolCall{Tool: "create_ticket"})
	if res.Error == nil || res.Error.Code != messages.CodeUnknownTool {
		t.Fatalf("result %+v", res)
	}
	msg := res.Error.Message
	if !strings.HasPrefix(msg, `there is no tool called "create_ticket"; the closest of the 41 tools: tickets__create_ticket, `) {
		t.Errorf("message %q", msg)
	}
	if n := strings.Count(msg, ", ") + 1; n != maxSuggestions {
		t.Errorf("%d names listed, want %d: %s", n, maxSuggestions, msg)
	}
}

// TestRetriesAreAttemptsThatAnotherFollows checks the signals of retries: the retries
// counter is the attempts minus one, only attempts that another follows carry a
// retry_reason, and attempts are numbered per call, on from earlier deliveries.
func TestRetriesAreAttemptsThatAnotherFollows(t *testing.T) {
	unavailable := &messages.ToolError{Code: messages.CodeServerUnavailable, Message: "502 from upstream"}
	for _, tt := range []struct {
		name          string
		fails         int32
		earlier       int
		wantAttempts  int
		wantRetries   int64
		wantSucceeded bool
	}{
		{name: "exhausted", fails: 9, wantAttempts: 3, wantRetries: 2},
		{name: "second attempt succeeds", fails: 1, wantAttempts: 2, wantRetries: 1, wantSucceeded: true},
		{name: "first attempt succeeds", fails: 0, wantAttempts: 1, wantRetries: 0, wantSucceeded: true},
		{name: "after an earlier delivery: MaxAttempts in all", fails: 9, earlier: 1, wantAttempts: 3, wantRetries: 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			reg := localtools.New()
			if err := reg.Add(flaky("t", tt.fails, unavailable, true, &calls)); err != nil {
				t.Fatal(err)
			}
			reader := sdkmetric.NewManualReader()
			rec := tracetest.NewSpanRecorder()
			e := &Executor{Router: NewRouter(LocalBackend{Registry: reg}),
				Retry:   RetryPolicy{MaxAttempts: 3, InitialInterval: time.Millisecond, MaxInterval: 2 * time.Millisecond},
				Metrics: telemetry.NewMetrics(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))),
				Tracer:  sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("test")}
			call := messages.ToolCall{ID: "r/0", ResponseID: "r", Tool: "t", Count: 1}
			r, err := e.Router.Resolve(context.Background(), "t")
			res, _ := e.ExecuteRoute(context.Background(), call, r, err, Earlier{Attempts: tt.earlier, Sent: tt.earlier})
			if res.Success != tt.wantSucceeded || res.Attempts != tt.wantAttempts {
				t.Fatalf("success %v after %d attempts, want %v after %d", res.Success, res.Attempts, tt.wantSucceeded, tt.wantAttempts)
			}
			var rm metricdata.ResourceMetrics
			if err := reader.Collect(context.Background(), &rm); err != nil {
				t.Fatal(err)
			}
			if got := counterSum(rm, "toolbus.retries"); got != tt.wantRetries {
				t.Errorf("toolbus.retries = %d, want %d", got, tt.wantRetries)
			}
			spans := rec.Ended()
			if len(spans) != int(calls.Load()) {
				t.Fatalf("%d attempt spans for %d attempts", len(spans), calls.Load())
			}
			for i, s := range spans {
				want := fmt.Sprintf("attempt %d", tt.earlier+i+1)
				if s.Name() != want {
					t.Errorf("span %d is %q, want %q", i, s.Name(), want)
				}
				reason := ""
				for _, a := range s.Attributes() {
					if a.Key == telemetry.RetryReason {
						reason = a.Value.AsString()
					}
				}
				if followed := i < len(spans)-1; followed != (reason != "") {
					t.Errorf("%s: retry_reason %q, followed by another attempt: %v", s.Name(), reason, followed)
				}
			}
		})
	}
}

// counterSum adds up every point of the counter called name.
func counterSum(rm metricdata.ResourceMetrics, name string) int64 {
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == name {
				for _, p := range sum.DataPoints {
					n += p.Value
				}
			}
		}
	}
	return n
}

// remote is a backend of one MCP server whose every call fails with err.
type remote struct{ err *messages.ToolError }

func (remote) Name() string                              { return "remote" }
func (remote) Tools(context.Context) []messages.ToolInfo { return nil }

func (b remote) Resolve(_ context.Context, name string) (Route, bool, error) {
	return Route{Server: "mcp:x", Info: messages.ToolInfo{Name: name, Idempotent: true},
		Run: func(context.Context, string, json.RawMessage) (json.RawMessage, error) { return nil, b.err }}, true, nil
}

// restarting is a server that fails its first failures requests with err, then answers.
type restarting struct {
	err      *messages.ToolError
	failures int
	calls    *atomic.Int32
}

func (restarting) Name() string                              { return "restarting" }
func (restarting) Tools(context.Context) []messages.ToolInfo { return nil }

func (b restarting) Resolve(_ context.Context, name string) (Route, bool, error) {
	return Route{Server: "mcp:x", Info: messages.ToolInfo{Name: name, Idempotent: true},
		Run: func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
			if int(b.calls.Add(1)) <= b.failures {
				return nil, b.err
			}
			return json.RawMessage(`{"ok":true}`), nil
		}}, true, nil
}

// The breaker counts calls, not attempts: a call whose server fails more times in a row
// than the breaker's threshold (it restarts) and then answers, within the call's
// attempts, succeeds — its own retries never open the circuit against it — and counts
// every attempt; calls that each fail, threshold of them, open it, and the next is
// refused without an attempt.
func TestBreakerCountsCalls(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  *messages.ToolError
	}{
		{"refused on connecting", &messages.ToolError{Code: messages.CodeServerUnavailable, Message: "connection refused", Unsent: true}},
		{"sent and failed", &messages.ToolError{Code: messages.CodeServerUnavailable, Message: "502 from upstream"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gate := NewBreaker(&BreakerOptions{FailureThreshold: 2, CoolDown: time.Hour})
			var calls atomic.Int32
			e := &Executor{Router: NewRouter(restarting{tc.err, 4, &calls}), Gate: gate,
				Retry: RetryPolicy{MaxAttempts: 5, InitialInterval: time.Millisecond, MaxInterval: time.Millisecond}}
			res, _ := e.Execute(context.Background(), messages.ToolCall{ID: "r/0", ResponseID: "r", Tool: "t", Count: 1})
			if !res.Success || res.Attempts != 5 || calls.Load() != 5 {
				t.Fatalf("a server back at the 5th attempt: %+v (%d requests), want the call answered after 5 attempts", res, calls.Load())
			}
			if gate.Open()["x"] {
				t.Fatal("one call's retries opened the circuit")
			}
			if tc.err.Unsent {
				// A call whose tries never reached the server is handed back to a later
				// delivery while its budget lasts: not an answer, and not counted.
				down := &Executor{Router: NewRouter(restarting{tc.err, 1 << 30, &calls}), Gate: gate,
					Retry: RetryPolicy{MaxAttempts: 2, InitialInterval: time.Millisecond, MaxInterval: time.Millisecond}}
				for i := range 3 {
					if _, oc := down.Execute(context.Background(), messages.ToolCall{ID: fmt.Sprintf("r/%d", i+1), ResponseID: "r", Tool: "t", Count: 4, Index: i + 1}); !oc.Retryable {
						t.Fatalf("call %d: not handed back", i+1)
					}
				}
				if gate.Open()["x"] {
					t.Fatal("calls handed back, not answered, opened the circuit")
				}
				return
			}
			// Calls that fail, each after its attempts: two open the circuit.
			down := &Executor{Router: NewRouter(restarting{tc.err, 1 << 30, &calls}), Gate: gate,
				Retry: RetryPolicy{MaxAttempts: 2, InitialInterval: time.Millisecond, MaxInterval: time.Millisecond, MaxElapsed: time.Second}}
			for i := range 2 {
				if res, _ := down.Execute(context.Background(), messages.ToolCall{ID: fmt.Sprintf("r/%d", i+1), ResponseID: "r", Tool: "t", Count: 3, Index: i + 1,
					Deadline: time.Now().Add(50 * time.Millisecond)}); res.Success {
					t.Fatalf("call %d to a server that is down succeeded", i+1)
				}
				if open := gate.Open()["x"]; open != (i == 1) {
					t.Fatalf("after %d failed calls the circuit is open=%v", i+1, open)
				}
			}
			before := calls.Load()
			res, _ = down.Execute(context.Background(), messages.ToolCall{ID: "r/3", ResponseID: "r", Tool: "t", Count: 4, Index: 3})
			if res.Success || res.Error.Code != messages.CodeServerUnavailable || calls.Load() != before {
				t.Errorf("a call after the circuit opened: %+v, %d requests", res.Error, calls.Load()-before)
			}
		})
	}
}
