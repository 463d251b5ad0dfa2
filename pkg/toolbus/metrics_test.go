package toolbus_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/telemetry"
	"github.com/toolbus/toolbus/pkg/toolbus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// Metrics through the Prometheus endpoints of three processes (each an executor and a
// healthd, one also parser and formatter): calls by tool, server and outcome, retries,
// stage messages and latencies, the Go runtime's and the process's metrics on each, and
// the cluster's queues and servers reported once, by the leading healthd.
func TestMetrics(t *testing.T) {
	t.Parallel()
	connect := startBus(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var tries atomic.Int32
	local := flakyOrders("503", &tries)
	sctx, stop := context.WithCancel(ctx)
	var handlers []http.Handler
	var nodes []*toolbus.Toolbus
	defer func() {
		stop()
		for _, n := range nodes {
			n.Wait()
		}
	}()
	for i, services := range [][]string{{toolbus.Parser, toolbus.Executor, toolbus.Formatter, toolbus.Healthd}, {toolbus.Executor, toolbus.Healthd}, {toolbus.Executor, toolbus.Healthd}} {
		mp, handler, err := telemetry.NewPrometheus(nil)
		if err != nil {
			t.Fatal(err)
		}
		n, err := toolbus.Start(sctx, toolbus.Options{Provision: true, Conn: connect(fmt.Sprint("node", i)), Services: services, Tools: local, MeterProvider: mp})
		if err != nil {
			t.Fatal(err)
		}
		nodes, handlers = append(nodes, n), append(handlers, handler)
	}
	c, _ := client.New(connect("orchestrator"))
	if _, err := c.Ask(ctx, "m", `<tool_call>{"name": "lookup_order", "arguments": {}}</tool_call><tool_call>{"name": "nope", "arguments": {}}</tool_call>`, nil); err != nil {
		t.Fatal(err)
	}
	scrape := func() []string {
		var pages []string
		for _, h := range handlers {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
			body, _ := io.ReadAll(rec.Body)
			pages = append(pages, string(body))
		}
		return pages
	}
	// Wait for a healthd to lead and probe the local tools.
	var pages []string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if pages = scrape(); strings.Contains(strings.Join(pages, ""), `toolbus_server_up{`) {
			break
		}
	}
	all := strings.Join(pages, "\n")
	for _, want := range []string{
		`toolbus_calls_total{`, `outcome="ok"`, `tool="lookup_order"`, `server="local"`,
		`outcome="unknown_tool"`,
		`toolbus_retries_total{`, `code="server_unavailable"`,
		`toolbus_messages_total{`, `stage="parse"`, `stage="execute"`, `stage="format"`,
		`toolbus_stage_duration_seconds_bucket{`,
		`toolbus_consumer_pending{`, `consumer="executor"`, `toolbus_consumer_ack_pending{`,
		`toolbus_server_up{`, `toolbus_server_probe_duration_seconds_bucket{`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	for i, page := range pages {
		if !strings.Contains(page, "go_goroutines ") || !strings.Contains(page, "process_cpu_seconds_total ") {
			t.Errorf("process %d: no Go runtime or process metrics", i)
		}
	}
	// Summed over the processes, each queue and each server counts once.
	for series, want := range map[string]int{`toolbus_consumer_pending{`: 5, `toolbus_consumer_ack_pending{`: 5,
		`toolbus_server_up{ server="local"`: 1, `toolbus_server_up{ server="engineering"`: 1} {
		name, label, _ := strings.Cut(series, " ")
		got := 0
		for _, line := range strings.Split(all, "\n") {
			if strings.HasPrefix(line, name) && strings.Contains(line, label) {
				got++
			}
		}
		if got != want {
			t.Errorf("%d series %s over three processes, want %d", got, series, want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", all)
	}
}

// Tool names come from models: 1,000 invented names and 50 of 200 KB add no metric series
// and no span name of their own, and no label or span name is longer than the cap.
func TestInventedToolNamesAreBounded(t *testing.T) {
	t.Parallel() // waits mostly (processes starting, acks timing out): beside another test
	mp, handler, err := telemetry.NewPrometheus(nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	connect := startBus(t)
	// A bound on a hang, not a speed: 70 responses of 50 calls or 10 MB, beside other tests.
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	sctx, stop := context.WithCancel(ctx)
	n, err := toolbus.Start(sctx, toolbus.Options{Provision: true, Conn: connect("node"), Services: []string{toolbus.Parser, toolbus.Executor, toolbus.Formatter},
		MeterProvider: mp, TracerProvider: tp, Config: &config.Config{Executor: config.Executor{Parallel: "all"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { stop(); n.Wait() }()
	c, _ := client.New(connect("orchestrator"))
	var texts []string
	for r := range 20 {
		var b strings.Builder
		for i := range 50 {
			fmt.Fprintf(&b, `<tool_call>{"name": "invented_%d_%d", "arguments": {}}</tool_call>`, r, i)
		}
		texts = append(texts, b.String())
	}
	for i := range 50 {
		texts = append(texts, `<tool_call>{"name": "huge_`+strconv.Itoa(i)+strings.Repeat("x", 200<<10)+`", "arguments": {}}</tool_call>`)
	}
	for i, text := range texts {
		out, err := c.Ask(ctx, "inventions", text, nil)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		for _, r := range out.Results {
			if r.Success || r.Error.Code != messages.CodeUnknownTool {
				t.Fatalf("response %d: %+v, want unknown_tool", i, r)
			}
		}
	}
	w := httptest.NewRecorder()
	handler.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(w.Body)
	text := string(body)
	if strings.Contains(text, "invented_") || strings.Contains(text, "huge_") || !strings.Contains(text, `tool="`+telemetry.UnknownTool+`"`) {
		t.Errorf("/metrics names invented tools (or lacks %s); %d bytes", telemetry.UnknownTool, len(text))
	}
	if len(text) > 256<<10 {
		t.Errorf("/metrics is %d bytes", len(text))
	}
	names := map[string]bool{}
	for _, s := range rec.Ended() {
		names[s.Name()] = true
		for _, a := range s.Attributes() {
			if len(a.Value.Emit()) > telemetry.MaxLabelLen && a.Key == telemetry.Tool {
				t.Errorf("span %q: tool attribute of %d bytes", s.Name(), len(a.Value.Emit()))
			}
		}
	}
	for name := range names {
		if strings.Contains(name, "invented_") || strings.Contains(name, "huge_") || len(name) > 200 {
			t.Errorf("span name %.80q", name)
		}
	}
	if len(names) > 20 {
		t.Errorf("%d span names, want a handful: %v", len(names), names)
	}
}
