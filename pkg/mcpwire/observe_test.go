package mcpwire_test

import (
	"context"
	"encoding/json"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolbus/toolbus/pkg/mcpwire"
)

// A stdio server gets the trace of the call in _meta, with the request's own CLIENT
// span as parent; the span carries OpenTelemetry's MCP attributes, and the call's
// duration lands in mcp.client.operation.duration.
func TestTraceReachesAStdioServer(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	p := newPool(t, map[string]mcpwire.ServerConfig{"local": {Command: stdioServer(t)}},
		&mcpwire.Options{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ctx, root := tp.Tracer("test").Start(ctxT(t), "attempt 1")
	out, err := p.Call(ctx, "traceparent", nil)
	root.End()
	if err != nil {
		t.Fatal(err)
	}
	var got string
	if err := json.Unmarshal(out, &got); err != nil {
		got = string(out)
	}
	var client sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "tools/call traceparent" {
			client = s
		}
	}
	if client == nil {
		t.Fatalf("no span tools/call traceparent among %d", len(rec.Ended()))
	}
	if want := "00-" + root.SpanContext().TraceID().String() + "-" + client.SpanContext().SpanID().String() + "-01"; got != want {
		t.Errorf("the server saw traceparent %q, want %q", got, want)
	}
	if client.SpanKind() != trace.SpanKindClient || client.Parent().SpanID() != root.SpanContext().SpanID() {
		t.Errorf("span kind %v, parent %v", client.SpanKind(), client.Parent().SpanID())
	}
	attrs := map[attribute.Key]string{}
	for _, a := range client.Attributes() {
		attrs[a.Key] = a.Value.Emit()
	}
	for k, v := range map[attribute.Key]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "traceparent",
		"network.transport": "pipe", "toolbus.server": "local"} {
		if attrs[k] != v {
			t.Errorf("%s = %q, want %q", k, attrs[k], v)
		}
	}
	if attrs["jsonrpc.request.id"] == "" || attrs["mcp.protocol.version"] == "" {
		t.Errorf("no request id or protocol version: %v", attrs)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var count uint64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if h, ok := m.Data.(metricdata.Histogram[float64]); ok && m.Name == mcpwire.OperationDuration {
				for _, dp := range h.DataPoints {
					if v, _ := dp.Attributes.Value("gen_ai.tool.name"); v.AsString() == "traceparent" {
						count += dp.Count
					}
				}
			}
		}
	}
	if count != 1 {
		t.Errorf("%s counted %d calls of traceparent, want 1", mcpwire.OperationDuration, count)
	}
}
