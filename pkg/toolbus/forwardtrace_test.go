package toolbus_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolbus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// A call forwarded to the executor that holds its conversation's session is traced
// there as a consumer span with the messaging attributes every consume span has, marked
// toolbus.forwarded, a child of the puller's span in the response's trace, the tool's
// span under it. Before, it was a bare "execute forwarded" span.
func TestForwardedCallIsTraced(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	srv := newStatefulServer(t)
	cfg := mcpConfig(t, fmt.Sprintf(`{"engineering": {"enabled": false}, "executor": {"concurrency": 1, "prefetch": -1},
		"mcpServers": {"git": {"type": "http", "url": %q}}}`, srv.url))
	connect := startBus(t)
	startEach(t, connect, toolbus.Options{Config: cfg, TracerProvider: tp},
		toolbus.Parser, toolbus.Executor, toolbus.Executor, toolbus.Formatter)
	c, err := client.New(connect("orchestrator"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a bound on a hang
	defer cancel()
	ask := func(tool, args string) {
		out, err := c.Ask(ctx, "fwd", fmt.Sprintf(`<tool_call>{"name": %q, "arguments": %s}</tool_call>`, tool, args), nil)
		if err != nil || len(out.Results) != 1 || !out.Results[0].Success {
			t.Errorf("%s: %v %+v", tool, err, out)
		}
	}
	ask("set_dir", `{"dir": "/repo"}`)
	forwarded := func() []sdktrace.ReadOnlySpan {
		var fs []sdktrace.ReadOnlySpan
		for _, s := range rec.Ended() {
			if spanAttrs(s)["toolbus.forwarded"] == "true" {
				fs = append(fs, s)
			}
		}
		return fs
	}
	// Calls one after another are pulled by either executor: some reach the other.
	for i := 0; i < 40 && len(forwarded()) == 0; i++ {
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() { defer wg.Done(); ask("get_dir", `{}`) }()
		}
		wg.Wait()
	}
	fs := forwarded()
	if len(fs) == 0 {
		t.Fatal("no call was forwarded")
	}
	byID := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		byID[s.SpanContext().SpanID().String()] = s
	}
	for _, f := range fs {
		a := spanAttrs(f)
		for k, want := range map[string]string{"messaging.system": "nats", "messaging.operation.name": "process", "messaging.operation.type": "process",
			"messaging.destination.template": "toolbus.calls.{conversation}", "messaging.consumer.group.name": messages.ConsumerExecutor,
			"toolbus.conversation": "fwd"} {
			if a[k] != want {
				t.Errorf("forwarded span %q: %s = %q, want %q", f.Name(), k, a[k], want)
			}
		}
		if f.Name() != "process toolbus.calls.{conversation}" || a["messaging.message.id"] == "" || a["toolbus.response_id"] == "" || a["toolbus.delivery"] == "" {
			t.Errorf("forwarded span %q: %v", f.Name(), a)
		}
		parent, ok := byID[f.Parent().SpanID().String()]
		if !ok || parent.SpanContext().TraceID() != f.SpanContext().TraceID() || spanAttrs(parent)["toolbus.forwarded"] == "true" {
			t.Errorf("forwarded span's parent: %v (found %t); want the puller's span in the same trace", f.Parent().SpanID(), ok)
		}
		tools := 0
		for _, s := range rec.Ended() {
			if s.Parent().SpanID() == f.SpanContext().SpanID() && s.Name() == "execute_tool git__get_dir" {
				tools++
			}
		}
		if tools != 1 {
			t.Errorf("forwarded span has %d execute_tool children, want 1", tools)
		}
	}
	t.Logf("%d forwarded calls traced", len(fs))
}
