package node_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolbus/toolbus/internal/node"
	"github.com/toolbus/toolbus/pkg/client"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// One response with two calls, one retried once, through all four services on
// separate connections: one trace, with the parent/child structure of the pipeline.
func TestTracePipeline(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	connect := startBus(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var tries atomic.Int32
	local := flakyOrders("orders backend returned 503", &tries)
	startEach(t, connect, node.Options{Local: local, TracerProvider: tp}, node.AllServices()...)

	c, err := client.New(connect("orchestrator"))
	if err != nil {
		t.Fatal(err)
	}
	rootCtx, root := tp.Tracer("orchestrator").Start(ctx, "agent turn")
	out, err := c.Ask(rootCtx, "trace-1", `<tool_call>{"name": "lookup_order", "arguments": {"id": 7}}</tool_call>
<tool_call>{"name": "clock", "arguments": {}}</tool_call>`, nil)
	root.End()
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Results) != 2 || !out.Results[0].Success || !out.Results[1].Success {
		t.Fatalf("output %+v", out)
	}
	// The formatter's spans end after the output is published.
	deadline := time.Now().Add(10 * time.Second)
	for countNamed(rec.Ended(), "format") < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}

	spans := rec.Ended()
	byID := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		if s.SpanContext().TraceID() != root.SpanContext().TraceID() {
			t.Errorf("span %q is in trace %s, want %s", s.Name(), s.SpanContext().TraceID(), root.SpanContext().TraceID())
		}
		byID[s.SpanContext().SpanID().String()] = s
	}
	parentName := func(s sdktrace.ReadOnlySpan) string {
		if p, ok := byID[s.Parent().SpanID().String()]; ok {
			return p.Name()
		}
		return "?"
	}
	want := map[string]struct {
		parent string
		count  int
	}{
		"agent turn":             {"?", 1},
		"send toolbus.responses": {"agent turn", 1},
		"parse":                  {"send toolbus.responses", 1},
		"execute lookup_order":   {"parse", 1},
		// lookup_order is not read-only, so clock runs after it: the formatter that
		// gathered lookup_order's result released it.
		"execute clock": {"format", 1},
		"attempt 1":     {"", 2},
		"attempt 2":     {"execute lookup_order", 1},
		"format":        {"", 2},
	}
	for name, w := range want {
		if got := countNamed(spans, name); got != w.count {
			t.Errorf("%d spans named %q, want %d", got, name, w.count)
		}
	}
	for _, s := range spans {
		w, ok := want[s.Name()]
		if !ok {
			t.Errorf("unexpected span %q", s.Name())
			continue
		}
		p := parentName(s)
		switch s.Name() {
		case "attempt 1":
			if p != "execute lookup_order" && p != "execute clock" {
				t.Errorf("attempt 1 is a child of %q", p)
			}
		case "format":
			if p != "execute lookup_order" && p != "execute clock" {
				t.Errorf("format is a child of %q, want an execute span", p)
			}
		default:
			if w.parent != "" && p != w.parent {
				t.Errorf("%q is a child of %q, want %q", s.Name(), p, w.parent)
			}
		}
		attrs := map[string]string{}
		for _, a := range s.Attributes() {
			attrs[string(a.Key)] = a.Value.Emit()
		}
		switch s.Name() {
		case "parse", "execute lookup_order", "execute clock", "format":
			if attrs["messaging.system"] != "nats" || attrs["messaging.operation.type"] != "process" ||
				attrs["toolbus.conversation"] != "trace-1" || attrs["messaging.destination.name"] == "" || attrs["messaging.message.id"] == "" {
				t.Errorf("%s: messaging attributes %v", s.Name(), attrs)
			}
		}
		switch s.Name() {
		case "execute lookup_order":
			if attrs["toolbus.tool"] != "lookup_order" || attrs["toolbus.server"] != "local" || attrs["toolbus.attempt"] != "2" {
				t.Errorf("execute attributes %v", attrs)
			}
		case "attempt 1":
			if attrs["toolbus.tool"] == "lookup_order" && (attrs["toolbus.error_code"] != "server_unavailable" || attrs["toolbus.retry_reason"] != "orders backend returned 503") {
				t.Errorf("failed attempt attributes %v", attrs)
			}
		case "attempt 2":
			if attrs["toolbus.attempt"] != "2" || attrs["toolbus.error_code"] != "" {
				t.Errorf("second attempt attributes %v", attrs)
			}
		}
	}
}

func countNamed(spans []sdktrace.ReadOnlySpan, name string) int {
	n := 0
	for _, s := range spans {
		if s.Name() == name {
			n++
		}
	}
	return n
}
