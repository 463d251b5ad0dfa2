package telemetry

import (
	"context"
	"fmt"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// Call keeps a bounded number of attribute sets (tool names come from models) and
// counts every call, cached or not.
func TestCallCountsBeyondTheCache(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	m := NewMetrics(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	ctx := context.Background()
	const tools = maxCachedCalls + 100
	for i := range tools {
		m.Call(ctx, fmt.Sprintf("tool_%d", i), "local", "", "ok", time.Millisecond)
	}
	m.Call(ctx, "tool_0", "local", "", "ok", time.Millisecond) // cached
	m.Call(ctx, fmt.Sprintf("tool_%d", tools-1), "local", "", "ok", time.Millisecond)
	if n := m.callAttrs.len(); n != maxCachedCalls {
		t.Errorf("%d attribute sets cached, want %d", n, maxCachedCalls)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, sm := range rm.ScopeMetrics {
		for _, md := range sm.Metrics {
			if md.Name != "toolbus.calls" {
				continue
			}
			for _, dp := range md.Data.(metricdata.Sum[int64]).DataPoints {
				total += dp.Value
				if tool, _ := dp.Attributes.Value("tool"); tool.AsString() == "tool_0" && dp.Value != 2 {
					t.Errorf("tool_0 counted %d, want 2", dp.Value)
				}
			}
		}
	}
	// (The SDK itself folds series beyond its cardinality limit into one overflow series.)
	if total != tools+2 {
		t.Errorf("counted %d calls, want %d", total, tools+2)
	}
}

// Recording a handled message or an answered call allocates nothing once its attribute
// sets are built (with the no-op provider, as services run without a metrics endpoint).
func TestMetricsDoNotAllocate(t *testing.T) {
	m := NewMetrics(nil)
	ctx := context.Background()
	m.Handled(ctx, "execute", "ack", time.Millisecond, 2)
	m.Call(ctx, "clock", "local", "", "ok", time.Millisecond)
	if n := testing.AllocsPerRun(100, func() {
		m.Handled(ctx, "execute", "ack", time.Millisecond, 2)
		m.Call(ctx, "clock", "local", "", "ok", time.Millisecond)
	}); n != 0 {
		t.Errorf("%v allocations a message, want 0", n)
	}
}
