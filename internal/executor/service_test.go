package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/internal/bus"
	"github.com/toolbus/toolbus/internal/bus/bustest"
	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/messages"
)

type harness struct {
	t       *testing.T
	js      jetstream.JetStream
	results chan messages.ToolResult
	claims  Claims
}

// startExecutor runs one executor service over reg on an embedded JetStream, and
// collects the results it publishes.
func startExecutor(t *testing.T, reg *localtools.Registry, topo bus.Topology) *harness {
	t.Helper()
	nc, js := bustest.JetStream(t)
	ctx, cancel := context.WithCancel(context.Background())
	if err := bus.Provision(ctx, js, topo); err != nil {
		t.Fatal(err)
	}
	exec := &Executor{Router: NewRouter(LocalBackend{Registry: reg}), Retry: RetryPolicy{MaxAttempts: 2, InitialInterval: time.Millisecond, MaxInterval: time.Millisecond}}
	svc, err := New(ctx, js, exec, &Options{RedeliveryDelay: 10 * time.Millisecond, Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { svc.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	h := &harness{t: t, js: js, results: make(chan messages.ToolResult, 100), claims: svc.claims}
	sub, err := nc.Subscribe(messages.AllResults, func(m *nats.Msg) {
		var r messages.ToolResult
		json.Unmarshal(m.Data, &r)
		h.results <- r
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Unsubscribe() })
	return h
}

func (h *harness) send(tool, msgID string) {
	h.t.Helper()
	call := messages.ToolCall{ID: "resp/0", ResponseID: "resp", Conversation: "c", Count: 1, Tool: tool, Arguments: json.RawMessage(`{}`)}
	body, _ := json.Marshal(call)
	m := bus.Meta{ResponseID: "resp", Conversation: "c", Count: 1, MsgID: msgID}
	if err := bus.Publish(context.Background(), h.js, messages.CallSubject("c"), m, body); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) next() messages.ToolResult {
	h.t.Helper()
	select {
	case r := <-h.results:
		return r
	case <-time.After(20 * time.Second):
		h.t.Fatal("no result")
	}
	return messages.ToolResult{}
}

func counting(name string, idempotent bool, runs *atomic.Int32) localtools.Tool {
	return localtools.Tool{
		Info: messages.ToolInfo{Name: name, Idempotent: idempotent},
		Run: func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return json.Marshal(map[string]int32{"run": runs.Add(1)})
		},
	}
}

func TestRedeliveredCallIsAnsweredFromStore(t *testing.T) {
	var runs atomic.Int32
	reg := localtools.New()
	reg.Add(counting("create_ticket", false, &runs))
	h := startExecutor(t, reg, bus.Topology{})
	h.send("create_ticket", "m1")
	first := h.next()
	// The same call again, as JetStream redelivers it when an ack is lost.
	h.send("create_ticket", "m2")
	second := h.next()
	if !first.Success || !second.Success || string(first.Result) != string(second.Result) {
		t.Fatalf("results differ: %+v / %+v", first, second)
	}
	if runs.Load() != 1 {
		t.Fatalf("the tool ran %d times, want 1", runs.Load())
	}
}

func TestAbandonedCall(t *testing.T) {
	tests := []struct {
		name       string
		idempotent bool
		wantRuns   int32
		wantCode   messages.ErrorCode
	}{
		{name: "side effect is not repeated", idempotent: false, wantRuns: 0, wantCode: messages.CodeOutcomeUnknown},
		{name: "idempotent tool runs again", idempotent: true, wantRuns: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var runs atomic.Int32
			reg := localtools.New()
			reg.Add(counting("t", tt.idempotent, &runs))
			h := startExecutor(t, reg, bus.Topology{})
			// An executor claimed the call and died before finishing it.
			dead := Claims{KV: h.claims.KV, Owner: "executor-that-died"}
			if _, err := dead.Begin(context.Background(), "resp/0"); err != nil {
				t.Fatal(err)
			}
			h.send("t", "m1")
			r := h.next()
			if tt.wantCode == "" && !r.Success {
				t.Fatalf("want success, got %+v", r.Error)
			}
			if tt.wantCode != "" && (r.Success || r.Error.Code != tt.wantCode) {
				t.Fatalf("want %s, got %+v", tt.wantCode, r)
			}
			if runs.Load() != tt.wantRuns {
				t.Errorf("ran %d times, want %d", runs.Load(), tt.wantRuns)
			}
		})
	}
}

func TestTransientFailureRetriedAcrossDeliveries(t *testing.T) {
	var runs atomic.Int32
	reg := localtools.New()
	// Fails 3 times (connection refused: never reached the tool), then succeeds. With 2
	// attempts per delivery that takes two deliveries.
	reg.Add(localtools.Tool{Info: messages.ToolInfo{Name: "t"}, Run: func(context.Context, json.RawMessage) (json.RawMessage, error) {
		if runs.Add(1) <= 3 {
			return nil, &messages.ToolError{Code: messages.CodeServerUnavailable, Message: "connection refused", Unsent: true}
		}
		return json.RawMessage(`{"ok":true}`), nil
	}})
	h := startExecutor(t, reg, bus.Topology{MaxDeliver: 5})
	h.send("t", "m1")
	r := h.next()
	if !r.Success || r.Attempts != 4 {
		t.Fatalf("want success after 4 attempts, got %+v attempts=%d", r.Error, r.Attempts)
	}
}

func TestAlwaysDownIsAnsweredAndDeadLettered(t *testing.T) {
	var runs atomic.Int32
	reg := localtools.New()
	reg.Add(localtools.Tool{Info: messages.ToolInfo{Name: "t", Idempotent: true}, Run: func(context.Context, json.RawMessage) (json.RawMessage, error) {
		runs.Add(1)
		return nil, &messages.ToolError{Code: messages.CodeServerUnavailable, Message: "503 from tickets"}
	}})
	h := startExecutor(t, reg, bus.Topology{MaxDeliver: 3})
	h.send("t", "m1")
	r := h.next()
	if r.Success || r.Error.Code != messages.CodeServerUnavailable {
		t.Fatalf("want server_unavailable, got %+v", r)
	}
	if runs.Load() != 6 || r.Attempts != 6 {
		t.Errorf("ran %d times, result says %d attempts; want 3 deliveries × 2 = 6", runs.Load(), r.Attempts)
	}
	ctx := context.Background()
	s, err := h.js.Stream(ctx, messages.StreamDead)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := s.Info(ctx)
	if info.State.Msgs != 1 {
		t.Errorf("dead-letter stream holds %d calls, want 1", info.State.Msgs)
	}
	select {
	case extra := <-h.results:
		t.Errorf("a second result was published: %+v", extra)
	case <-time.After(200 * time.Millisecond):
	}
}

func TestCallLogQuietTools(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	reg := localtools.New()
	var runs atomic.Int32
	reg.Add(counting("poll_status", true, &runs))
	reg.Add(counting("create_ticket", false, &runs))
	_, js := bustest.JetStream(t)
	ctx := context.Background()
	bus.Provision(ctx, js, bus.Topology{})
	svc, err := New(ctx, js, &Executor{Router: NewRouter(LocalBackend{Registry: reg})}, &Options{QuietTools: []string{"poll_status"}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"poll_status", "create_ticket"} {
		call := messages.ToolCall{ID: tool + "/0", ResponseID: tool, Conversation: "c", Count: 1, Tool: tool, Arguments: json.RawMessage(`{"secret":"hunter2"}`)}
		body, _ := json.Marshal(call)
		bus.Publish(ctx, js, messages.CallSubject("c"), bus.Meta{ResponseID: tool, Conversation: "c", Count: 1, MsgID: call.ID}, body)
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { svc.Run(cctx); close(done) }()
	for runs.Load() < 2 {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	cancel()
	<-done
	out := buf.String()
	if !strings.Contains(out, `"tool":"create_ticket"`) || strings.Contains(out, `"tool":"poll_status"`) {
		t.Errorf("log:\n%s", out)
	}
	if strings.Contains(out, "hunter2") {
		t.Errorf("arguments were logged:\n%s", out)
	}
}
