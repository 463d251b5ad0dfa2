package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/claims"
	"github.com/toolbus/toolbus/pkg/claims/claimstest"
	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/mcpwire"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/telemetry"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func counting(name string, info messages.ToolInfo, runs *atomic.Int32, fail func(n int32) error) localtools.Tool {
	info.Name = name
	return localtools.Tool{Info: info, Run: func(context.Context, json.RawMessage) (json.RawMessage, error) {
		n := runs.Add(1)
		if fail != nil {
			if err := fail(n); err != nil {
				return nil, err
			}
		}
		return json.Marshal(map[string]int32{"run": n})
	}}
}

func TestExecuteStage(t *testing.T) {
	unsent := func(below int32) func(int32) error {
		return func(n int32) error {
			if n <= below {
				return &messages.ToolError{Code: messages.CodeServerUnavailable, Message: "connection refused", Unsent: true}
			}
			return nil
		}
	}
	type delivery struct {
		n    int
		last bool
	}
	tests := []struct {
		name string
		info messages.ToolInfo
		fail func(int32) error
		// prior is the record an earlier delivery left ("" none, "running", "done").
		prior      string
		parserErr  bool
		deliveries []delivery
		// want, per delivery: "retry", or the error code of the answer ("ok" for success).
		want       []string
		wantRuns   int32
		wantDead   bool
		wantClaims string
		// wantAttempts, when set, is the last answer's count of attempts.
		wantAttempts int
	}{
		{name: "read-only first delivery takes no claim", info: messages.ToolInfo{ReadOnly: true},
			deliveries: []delivery{{1, false}}, want: []string{"ok"}, wantRuns: 1, wantClaims: ""},
		{name: "side effects are claimed and stored", deliveries: []delivery{{1, false}}, want: []string{"ok"}, wantRuns: 1,
			wantClaims: "begin r/0,finish r/0"},
		{name: "redelivery is answered from the store", deliveries: []delivery{{1, false}, {2, false}}, want: []string{"ok", "ok"}, wantRuns: 1,
			wantClaims: "begin r/0,finish r/0,begin r/0"},
		{name: "abandoned side effect is not repeated", prior: "running", deliveries: []delivery{{2, false}},
			want: []string{string(messages.CodeOutcomeUnknown)}, wantRuns: 0, wantClaims: "begin r/0,finish r/0"},
		{name: "a recent claim may be alive: looked at again later", prior: "recent", deliveries: []delivery{{2, false}},
			want: []string{"retry"}, wantRuns: 0, wantClaims: "begin r/0"},
		{name: "a recent claim on the last delivery: outcome unknown", prior: "recent", deliveries: []delivery{{5, true}},
			want: []string{string(messages.CodeOutcomeUnknown)}, wantRuns: 0, wantClaims: "begin r/0,finish r/0"},
		{name: "abandoned idempotent call runs again", info: messages.ToolInfo{Idempotent: true}, prior: "running", deliveries: []delivery{{2, false}},
			want: []string{"ok"}, wantRuns: 1, wantClaims: "begin r/0,take over r/0,finish r/0"},
		{name: "a call the parser refused is answered, never run", parserErr: true, deliveries: []delivery{{1, false}},
			want: []string{string(messages.CodeParseError)}, wantRuns: 0},
		{name: "transient failure is handed back, then succeeds", fail: unsent(1),
			deliveries: []delivery{{1, false}, {2, false}}, want: []string{"retry", "ok"}, wantRuns: 2, wantAttempts: 2,
			wantClaims: "begin r/0,release r/0,begin r/0,finish r/0"},
		{name: "still failing on the last delivery: answered and dead-lettered", info: messages.ToolInfo{Idempotent: true}, fail: unsent(100),
			deliveries: []delivery{{1, false}, {2, true}}, want: []string{"retry", string(messages.CodeServerUnavailable)}, wantRuns: 2, wantDead: true,
			wantClaims: "release r/0,begin r/0,finish r/0"},
		{name: "attempts that reached the tool are counted across deliveries: the last one allowed answers", info: messages.ToolInfo{Idempotent: true},
			fail: func(int32) error {
				return &messages.ToolError{Code: messages.CodeServerUnavailable, Message: "502 from upstream"}
			},
			deliveries: []delivery{{1, false}, {2, false}, {3, false}}, want: []string{"retry", "retry", string(messages.CodeServerUnavailable)},
			wantRuns: 3, wantAttempts: 3, wantDead: true, wantClaims: "release r/0,begin r/0,release r/0,begin r/0,finish r/0"},
		{name: "tries that never left are not bounded by MaxAttempts: they go on until the last delivery", info: messages.ToolInfo{Idempotent: true}, fail: unsent(100),
			deliveries: []delivery{{1, false}, {2, false}, {3, false}, {4, true}}, want: []string{"retry", "retry", "retry", string(messages.CodeServerUnavailable)},
			wantRuns: 4, wantAttempts: 4, wantDead: true, wantClaims: "release r/0,begin r/0,release r/0,begin r/0,release r/0,begin r/0,finish r/0"},
		{name: "a read-only call run again after its answer was lost counts both runs", info: messages.ToolInfo{ReadOnly: true},
			deliveries: []delivery{{1, false}, {2, false}}, want: []string{"ok", "ok"}, wantRuns: 2, wantAttempts: 2,
			wantClaims: "begin r/0,finish r/0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var runs atomic.Int32
			reg := localtools.New()
			reg.Add(counting("t", tt.info, &runs, tt.fail))
			cl := &claimstest.Memory{}
			switch tt.prior {
			case "running":
				cl.Set("r/0", claims.Record{State: "running", Owner: "dead"})
			case "recent":
				cl.Set("r/0", claims.Record{State: "running", Owner: "busy", Started: time.Now()})
			}
			s := &Stage{Claims: cl, Exec: &Executor{Router: NewRouter(LocalBackend{Registry: reg}),
				// Three attempts in all, one per delivery (its time for retries is up at once).
				Retry: RetryPolicy{MaxAttempts: 3, InitialInterval: time.Millisecond, MaxInterval: time.Millisecond, MaxElapsed: time.Nanosecond}}}
			call := messages.ToolCall{ID: "r/0", ResponseID: "r", Conversation: "c", Count: 1, Tool: "t", Arguments: json.RawMessage(`{}`)}
			if tt.parserErr {
				call.Error = &messages.ResultError{Code: messages.CodeParseError, Message: "cut off"}
			}
			var dead bool
			for i, d := range tt.deliveries {
				out, err := deliver(s, context.Background(), call, &bus.Delivery{Delivered: d.n, Last: d.last})
				var retry *bus.RetryError
				if tt.want[i] == "retry" {
					if !errors.As(err, &retry) || len(out) != 0 {
						t.Fatalf("delivery %d: %v, %d messages; want a retry", d.n, err, len(out))
					}
					continue
				}
				if err != nil || len(out) == 0 {
					t.Fatalf("delivery %d: %v, %d messages", d.n, err, len(out))
				}
				if out[0].Subject != messages.ResultSubject("c") || out[0].Meta.MsgID != "r/0" {
					t.Errorf("result to %s id %q", out[0].Subject, out[0].Meta.MsgID)
				}
				var res messages.ToolResult
				if err := json.Unmarshal(out[0].Body, &res); err != nil {
					t.Fatal(err)
				}
				got := "ok"
				if res.Error != nil {
					got = string(res.Error.Code)
				}
				if got != tt.want[i] {
					t.Errorf("delivery %d: answered %s (%v), want %s", d.n, got, res.Error, tt.want[i])
				}
				if tt.wantAttempts != 0 && i == len(tt.deliveries)-1 && res.Attempts != tt.wantAttempts {
					t.Errorf("the answer counts %d attempts, want %d", res.Attempts, tt.wantAttempts)
				}
				for _, o := range out[1:] {
					dead = dead || o.Subject == messages.DeadSubject("c")
				}
			}
			if runs.Load() != tt.wantRuns {
				t.Errorf("ran %d times, want %d", runs.Load(), tt.wantRuns)
			}
			if dead != tt.wantDead {
				t.Errorf("dead-letter copy %v, want %v", dead, tt.wantDead)
			}
			if got := strings.Join(cl.Log(), ","); got != tt.wantClaims {
				t.Errorf("claims %q, want %q", got, tt.wantClaims)
			}
		})
	}
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		meta     bus.Meta
		wantCode messages.ErrorCode
		wantErr  bool
	}{
		{name: "call", body: `{"id":"r/0","response_id":"r","conversation":"c","index":0,"count":1,"tool":"t"}`},
		{name: "unreadable, answered from the headers", body: `{"id":`, meta: bus.Meta{ResponseID: "r", Conversation: "c", Index: 1, Count: 2},
			wantCode: messages.CodeInternal},
		{name: "unreadable without headers", body: `{"id":`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			call, err := Decode(&bus.Delivery{Data: []byte(tt.body), Meta: tt.meta})
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v", err)
			}
			if tt.wantErr {
				return
			}
			var code messages.ErrorCode
			if call.Error != nil {
				code = call.Error.Code
			}
			if code != tt.wantCode {
				t.Errorf("code %q, want %q", code, tt.wantCode)
			}
			if tt.wantCode != "" && (call.ID != "c/r/1" || call.Count != 2) {
				t.Errorf("call from headers: %+v", call)
			}
		})
	}
}

func TestCallLogQuietTools(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	reg := localtools.New()
	var runs atomic.Int32
	reg.Add(counting("poll_status", messages.ToolInfo{ReadOnly: true}, &runs, nil))
	reg.Add(counting("create_ticket", messages.ToolInfo{}, &runs, nil))
	s := &Stage{Claims: &claimstest.Memory{}, Logger: log, QuietTools: []string{"poll_status"},
		Exec: &Executor{Router: NewRouter(LocalBackend{Registry: reg})}}
	for _, tool := range []string{"poll_status", "create_ticket"} {
		call := messages.ToolCall{ID: tool + "/0", ResponseID: tool, Conversation: "c", Count: 1, Tool: tool, Arguments: json.RawMessage(`{"secret":"hunter2"}`)}
		if _, err := deliver(s, context.Background(), call, &bus.Delivery{Delivered: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if runs.Load() != 2 {
		t.Fatalf("ran %d calls, want 2", runs.Load())
	}
	out := buf.String()
	if !strings.Contains(out, `"tool":"create_ticket"`) || strings.Contains(out, `"tool":"poll_status"`) {
		t.Errorf("log:\n%s", out)
	}
	if strings.Contains(out, "hunter2") {
		t.Errorf("arguments were logged:\n%s", out)
	}
}

// Through the runner on a real JetStream: a backend that stays down is tried
// RetryPolicy.MaxAttempts times in all, answered once and copied to the dead-letter
// stream.
func TestAlwaysDownIsAnsweredAndDeadLettered(t *testing.T) {
	var runs atomic.Int32
	reg := localtools.New()
	reg.Add(counting("t", messages.ToolInfo{Idempotent: true}, &runs, func(int32) error {
		return &messages.ToolError{Code: messages.CodeServerUnavailable, Message: "503 from tickets"}
	}))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	js, kv, results := callsOnBus(t, ctx)
	mp, metricsPage, err := telemetry.NewPrometheus(nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &Stage{Claims: claims.KV{KV: kv, Owner: "test"}, RedeliveryDelay: 10 * time.Millisecond,
		Exec: &Executor{Router: NewRouter(LocalBackend{Registry: reg}), Retry: RetryPolicy{MaxAttempts: 2, InitialInterval: time.Millisecond, MaxInterval: time.Millisecond},
			Metrics: telemetry.NewMetrics(mp)}}
	bustest.RunStage(t, js, messages.StreamCalls, messages.ConsumerExecutor, bus.Decoded(Decode, s.Execute), bus.RunOptions{Concurrency: 4})
	call := messages.ToolCall{ID: "resp/0", ResponseID: "resp", Conversation: "c", Count: 1, Tool: "t", Arguments: json.RawMessage(`{}`)}
	body, _ := json.Marshal(call)
	bustest.Publish(t, js, messages.CallSubject("c"), bus.Meta{ResponseID: "resp", Conversation: "c", Count: 1, MsgID: call.ID}, body)

	var r messages.ToolResult
	select {
	case r = <-results:
	case <-ctx.Done():
		t.Fatal("no result")
	}
	if r.Success || r.Error.Code != messages.CodeServerUnavailable {
		t.Fatalf("want server_unavailable, got %+v", r)
	}
	if runs.Load() != 2 || r.Attempts != 2 {
		t.Errorf("ran %d times, result says %d attempts; want MaxAttempts (2) in all, whatever the deliveries", runs.Load(), r.Attempts)
	}
	// The metrics count the call once, when it was answered, not once per delivery.
	w := httptest.NewRecorder()
	metricsPage.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	calls := 0
	for _, line := range strings.Split(w.Body.String(), "\n") {
		if strings.HasPrefix(line, "toolbus_calls_total{") && strings.Contains(line, `outcome="server_unavailable"`) {
			calls++
			if !strings.HasSuffix(line, " 1") {
				t.Errorf("one call answered: %s", line)
			}
		}
	}
	if calls != 1 {
		t.Errorf("%d toolbus_calls_total series for the call, want 1:\n%s", calls, w.Body.String())
	}
	st, err := js.Stream(ctx, messages.StreamDead)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dead-letter stream holds %d calls, want 1", info.State.Msgs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case extra := <-results:
		t.Errorf("a second result was published: %+v", extra)
	case <-time.After(200 * time.Millisecond):
	}
}

// A quiet tool is quiet under every spelling: the configuration may name it bare or
// qualified, and the model may call it either way.
func TestQuietMatchesEverySpelling(t *testing.T) {
	route := Route{Info: messages.ToolInfo{Name: "saint__get_comments"}, MCP: mcpwire.Tool{Server: "saint", Remote: "get_comments"}}
	for _, q := range []string{"get_comments", "saint__get_comments", "mcp__saint__get_comments", "saint::get_comments"} {
		s := &Stage{QuietTools: []string{q}}
		for _, called := range []string{"get_comments", "saint__get_comments", "saint::get_comments"} {
			if !s.quiet(called, route) {
				t.Errorf("quiet_tools %q, called as %q: not quiet", q, called)
			}
		}
	}
	if (&Stage{QuietTools: []string{"other"}}).quiet("saint__get_comments", route) {
		t.Error("a tool not listed is quiet")
	}
}

// callsOnBus provisions a bus whose calls are delivered at most three times, and returns
// it, the calls bucket and the results published on it.
func callsOnBus(t *testing.T, ctx context.Context) (jetstream.JetStream, jetstream.KeyValue, <-chan messages.ToolResult) {
	t.Helper()
	nc, js := bustest.JetStream(t)
	if err := bus.Provision(ctx, js, bus.Topology{MaxDeliver: 3}); err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, messages.BucketCalls)
	if err != nil {
		t.Fatal(err)
	}
	results := make(chan messages.ToolResult, 10)
	sub, err := nc.Subscribe(messages.AllResults, func(m *nats.Msg) {
		var r messages.ToolResult
		json.Unmarshal(m.Data, &r)
		results <- r
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Unsubscribe() })
	return js, kv, results
}

// A call that times out is one call in the metrics, whatever its deliveries and
// attempts: counted once as timeout, with the whole time from its first attempt to the
// answer (at least its budget), and its execute span marked Error.
func TestTimedOutCallCountsOnce(t *testing.T) {
	reg := localtools.New()
	reg.Add(localtools.Tool{Info: messages.ToolInfo{Name: "slow", ReadOnly: true}, Run: func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	js, kv, results := callsOnBus(t, ctx)
	reader := sdkmetric.NewManualReader()
	rec := tracetest.NewSpanRecorder()
	const budget = 300 * time.Millisecond
	s := &Stage{Claims: claims.KV{KV: kv, Owner: "test"}, RedeliveryDelay: 10 * time.Millisecond,
		Exec: &Executor{Router: NewRouter(LocalBackend{Registry: reg}), Timeout: budget,
			Retry:   RetryPolicy{MaxAttempts: 3, InitialInterval: time.Millisecond, MaxInterval: time.Millisecond},
			Metrics: telemetry.NewMetrics(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))}}
	bustest.RunStage(t, js, messages.StreamCalls, messages.ConsumerExecutor, bus.Decoded(Decode, s.Execute),
		bus.RunOptions{Concurrency: 4, SpanName: "execute", Tracer: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("test")})
	call := messages.ToolCall{ID: "resp/0", ResponseID: "resp", Conversation: "c", Count: 1, Tool: "slow", Arguments: json.RawMessage(`{}`)}
	body, _ := json.Marshal(call)
	bustest.Publish(t, js, messages.CallSubject("c"), bus.Meta{ResponseID: "resp", Conversation: "c", Count: 1, MsgID: call.ID}, body)
	select {
	case r := <-results:
		if r.Success || r.Error.Code != messages.CodeTimeout {
			t.Fatalf("want timeout, got %+v", r)
		}
	case <-ctx.Done():
		t.Fatal("no result")
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	if n := counterSum(rm, "toolbus.calls"); n != 1 {
		t.Errorf("toolbus.calls = %d, want the call once", n)
	}
	var count uint64
	var sum float64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if h, ok := m.Data.(metricdata.Histogram[float64]); ok && m.Name == "toolbus.call.duration" {
				for _, dp := range h.DataPoints {
					count, sum = count+dp.Count, sum+dp.Sum
				}
			}
		}
	}
	if count != 1 || sum < budget.Seconds() {
		t.Errorf("call duration: %d samples summing %.3fs, want one of at least the budget %v", count, sum, budget)
	}
	// The span that answered is an error; wait for it, it ends once the result is stored.
	deadline := time.Now().Add(10 * time.Second)
	for {
		answered := false
		for _, sp := range rec.Ended() {
			answered = answered || (sp.Name() == "execute_tool slow" && sp.Status().Code == codes.Error && sp.Status().Description == "timeout")
		}
		if answered {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no execute span with status Error timeout")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A redelivery of a call this process is still running (handed back while it ran, or
// forwarded here again) waits for the run to end and is handed back, to be answered with
// the stored result; it never takes the call for abandoned (outcome_unknown) nor runs it
// twice.
func TestRedeliveryOfACallRunningHere(t *testing.T) {
	var runs atomic.Int32
	release := make(chan struct{})
	started := make(chan struct{})
	reg := localtools.New()
	reg.Add(localtools.Tool{Info: messages.ToolInfo{Name: "slow"}, Run: func(context.Context, json.RawMessage) (json.RawMessage, error) {
		runs.Add(1)
		close(started)
		<-release
		return json.RawMessage(`"done"`), nil
	}})
	cl := &claimstest.Memory{}
	s := &Stage{Claims: cl, Exec: &Executor{Router: NewRouter(LocalBackend{Registry: reg})}}
	call := messages.ToolCall{ID: "r/0", ResponseID: "r", Conversation: "c", Count: 1, Tool: "slow", Arguments: json.RawMessage(`{}`)}
	first := make(chan []bus.Outgoing, 1)
	go func() {
		out, err := deliver(s, context.Background(), call, &bus.Delivery{Delivered: 1})
		if err != nil {
			t.Error(err)
		}
		first <- out
	}()
	<-started
	again := make(chan error, 1)
	go func() {
		_, err := deliver(s, context.Background(), call, &bus.Delivery{Delivered: 2, Last: true})
		again <- err
	}()
	select {
	case err := <-again:
		t.Fatalf("the redelivery was answered while the call ran: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	var retry *bus.RetryError
	if err := <-again; !errors.As(err, &retry) {
		t.Errorf("the redelivery after the run: %v, want a hand-back", err)
	}
	<-first
	out, err := deliver(s, context.Background(), call, &bus.Delivery{Delivered: 3, Last: true})
	var res messages.ToolResult
	if err != nil || len(out) == 0 || json.Unmarshal(out[0].Body, &res) != nil || !res.Success || string(res.Result) != `"done"` {
		t.Errorf("the next delivery: %v, %+v; want the stored result", err, res)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("ran %d times, want 1", n)
	}
}
