package node_test

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolbus/toolbus/internal/node"
	"github.com/toolbus/toolbus/internal/telemetry"
	"github.com/toolbus/toolbus/pkg/client"
)

// Metrics through the Prometheus endpoint: calls by tool, server and outcome, retries,
// stage messages and latencies, and the queue gauges.
func TestMetrics(t *testing.T) {
	mp, handler, err := telemetry.NewPrometheus()
	if err != nil {
		t.Fatal(err)
	}
	connect := startBus(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var tries atomic.Int32
	local := flakyOrders("503", &tries)
	sctx, stop := context.WithCancel(ctx)
	n, err := node.Start(sctx, connect("node"), node.Options{Services: []string{node.Parser, node.Executor, node.Formatter}, Local: local, MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { stop(); n.Wait() }()
	c, _ := client.New(connect("orchestrator"))
	if _, err := c.Ask(ctx, "m", `<tool_call>{"name": "lookup_order", "arguments": {}}</tool_call><tool_call>{"name": "nope", "arguments": {}}</tool_call>`, nil); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	text := string(body)
	for _, want := range []string{
		`toolbus_calls_total{`, `outcome="ok"`, `tool="lookup_order"`, `server="local"`,
		`outcome="unknown_tool"`,
		`toolbus_retries_total{`, `code="server_unavailable"`,
		`toolbus_messages_total{`, `stage="parse"`, `stage="execute"`, `stage="format"`,
		`toolbus_stage_duration_seconds_bucket{`,
		`toolbus_consumer_pending{`, `consumer="executor"`, `toolbus_consumer_ack_pending{`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", text)
	}
}
