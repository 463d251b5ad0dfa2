package toolbus_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolbus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// One response with two calls, one retried once, through all four services on
// separate connections: one trace, with the parent/child structure of the pipeline.
func TestTracePipeline(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	connect := startBus(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var tries atomic.Int32
	local := flakyOrders("orders backend returned 503", &tries)
	startEach(t, connect, toolbus.Options{Tools: local, TracerProvider: tp}, toolbus.AllServices()...)

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
	// A stage's span ends once what it published is stored and its message acked, which
	// may come after the output reached the orchestrator: wait for every span expected.
	const (
		parse    = "process toolbus.responses.{conversation}"
		execute  = "process toolbus.calls.{conversation}"
		format   = "process toolbus.results.{conversation}"
		lookup   = "execute_tool lookup_order"
		clockRun = "execute_tool clock"
	)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		ended := rec.Ended()
		if countNamed(ended, format) >= 2 && countNamed(ended, clockRun) >= 1 && countNamed(ended, execute) >= 2 &&
			countNamed(ended, lookup) >= 1 && countNamed(ended, "attempt 1") >= 2 && countNamed(ended, parse) >= 1 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}

	// healthd's probes are traces of their own, each a root.
	var spans []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if strings.HasPrefix(s.Name(), "probe ") {
			if s.Parent().IsValid() {
				t.Errorf("probe span %q has a parent", s.Name())
			}
			continue
		}
		spans = append(spans, s)
	}
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
	// Each message's handling is named as OpenTelemetry's messaging conventions say,
	// "process <destination template>"; each call's work "execute_tool <tool>".
	want := map[string]struct {
		parent string
		count  int
	}{
		"agent turn":             {"?", 1},
		"send toolbus.responses": {"agent turn", 1},
		parse:                    {"send toolbus.responses", 1},
		// lookup_order is not read-only, so clock runs after it: the formatter that
		// gathered lookup_order's result released it.
		execute:     {"", 2},
		lookup:      {execute, 1},
		clockRun:    {execute, 1},
		"attempt 1": {"", 2},
		"attempt 2": {lookup, 1},
		format:      {execute, 2},
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
			if p != lookup && p != clockRun {
				t.Errorf("attempt 1 is a child of %q", p)
			}
		case execute:
			if p != parse && p != format {
				t.Errorf("%s is a child of %q, want the parse or the format that released it", execute, p)
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
		case parse, execute, format:
			if attrs["messaging.system"] != "nats" || attrs["messaging.operation.type"] != "process" || attrs["messaging.operation.name"] != "process" ||
				attrs["toolbus.conversation"] != "trace-1" || !strings.HasSuffix(attrs["messaging.destination.name"], ".trace-1") ||
				"process "+attrs["messaging.destination.template"] != s.Name() || attrs["messaging.message.id"] == "" {
				t.Errorf("%s: messaging attributes %v", s.Name(), attrs)
			}
		}
		switch s.Name() {
		case lookup:
			if attrs["toolbus.tool"] != "lookup_order" || attrs["gen_ai.tool.name"] != "lookup_order" || attrs["gen_ai.operation.name"] != "execute_tool" ||
				attrs["toolbus.server"] != "local" || attrs["toolbus.attempt"] != "2" {
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

// The trace reaches the MCP server: its tools/call request carries the attempt's W3C
// traceparent both as an HTTP header and in _meta, in the orchestrator's trace.
func TestTraceReachesTheMCPServer(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var headers, metas []string
	srv := mcp.NewServer(&mcp.Implementation{Name: "probe"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "lookup"}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		mu.Lock()
		defer mu.Unlock()
		tp, _ := req.Params.Meta["traceparent"].(string)
		metas = append(metas, tp)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "found"}}}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"tools/call"`)) {
			mu.Lock()
			headers = append(headers, r.Header.Get("traceparent"))
			mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close) // after the services have stopped and closed their sessions

	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	connect := startBus(t)
	cfg := mcpConfig(t, `{"mcpServers": {"probe": {"type": "http", "url": "`+ts.URL+`"}}}`)
	startEach(t, connect, toolbus.Options{Config: cfg, TracerProvider: tp}, toolbus.Parser, toolbus.Executor, toolbus.Formatter)
	c, err := client.New(connect("orchestrator"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rootCtx, root := tp.Tracer("orchestrator").Start(ctx, "agent turn")
	out, err := c.Ask(rootCtx, "trace-mcp", `<tool_call>{"name": "probe__lookup", "arguments": {}}</tool_call>`, nil)
	root.End()
	if err != nil || !out.Results[0].Success {
		t.Fatalf("%v %+v", err, out)
	}
	// A failed call marks its span as an error, so that a trace search for errors finds it.
	if out, err := c.Ask(ctx, "trace-mcp", `<tool_call>{"name": "no_such_tool", "arguments": {}}</tool_call>`, nil); err != nil || out.Results[0].Success {
		t.Fatalf("%v %+v", err, out)
	}
	// Its span ends once the result is stored, maybe after the output arrived: wait.
	failed := false
	for deadline := time.Now().Add(30 * time.Second); !failed && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, s := range rec.Ended() {
			failed = failed || (s.Name() == "execute_tool _unknown" && s.Status().Code == codes.Error && s.Status().Description == "unknown_tool")
		}
	}
	if !failed {
		t.Error("no execute span of the unknown tool with status Error unknown_tool")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(headers) != 1 || len(metas) != 1 {
		t.Fatalf("tools/call requests: headers %q, _meta %q", headers, metas)
	}
	var clientSpan sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "attempt 1" {
			attrs := spanAttrs(s)
			if attrs["mcp.method.name"] != "tools/call" || attrs["gen_ai.tool.name"] != "lookup" {
				t.Errorf("attempt span attributes %v, want the MCP method and the tool's name on its server", attrs)
			}
		}
		if s.Name() == "tools/call lookup" {
			clientSpan = s
		}
	}
	if clientSpan == nil {
		t.Fatal("no CLIENT span tools/call lookup")
	}
	// OpenTelemetry's MCP conventions on the request's own span.
	attrs := spanAttrs(clientSpan)
	u, _ := url.Parse(ts.URL)
	for k, v := range map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "lookup", "gen_ai.operation.name": "execute_tool",
		"network.transport": "tcp", "server.address": u.Hostname(), "server.port": u.Port(), "toolbus.server": "probe"} {
		if attrs[k] != v {
			t.Errorf("client span: %s = %q, want %q", k, attrs[k], v)
		}
	}
	for _, k := range []string{"mcp.session.id", "jsonrpc.request.id", "mcp.protocol.version"} {
		if attrs[k] == "" {
			t.Errorf("client span: no %s in %v", k, attrs)
		}
	}
	if clientSpan.SpanKind() != trace.SpanKindClient {
		t.Errorf("client span kind %v", clientSpan.SpanKind())
	}
	want := "00-" + root.SpanContext().TraceID().String() + "-" + clientSpan.SpanContext().SpanID().String() + "-01"
	if headers[0] != want || metas[0] != want {
		t.Errorf("traceparent: header %q, _meta %q; want %q (the request's span, in the orchestrator's trace)", headers[0], metas[0], want)
	}
}

// spanAttrs gives a span's attributes as text.
func spanAttrs(s sdktrace.ReadOnlySpan) map[string]string {
	attrs := map[string]string{}
	for _, a := range s.Attributes() {
		attrs[string(a.Key)] = a.Value.Emit()
	}
	return attrs
}

// One tool is one span name and one metric label, however the model spelled it (the
// spelling kept as an attribute); a streamed response of 200 chunks is one span for its
// chunks, with an event for each of the first 100, not a span per chunk.
func TestTraceNamesOneToolOnceAndStaysSmall(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	reg := localtools.New()
	type echoIn struct {
		Text string `json:"text"`
	}
	if err := localtools.AddFunc(reg.Server("spy"), messages.ToolInfo{Name: "echo", ReadOnly: true},
		func(_ context.Context, in echoIn) (string, error) { return in.Text, nil }); err != nil {
		t.Fatal(err)
	}
	connect := startBus(t)
	startEach(t, connect, toolbus.Options{Tools: reg, TracerProvider: tp,
		Config: mcpConfig(t, `{"parser": {"reasoning": "tagged"}}`)}, toolbus.Parser, toolbus.Executor, toolbus.Formatter)
	c, err := client.New(connect("orchestrator"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	spellings := []string{"spy__echo", "mcp__spy__echo", "spy::echo"}
	for _, name := range spellings {
		out, err := c.Ask(ctx, "names", `<tool_call>{"name": "`+name+`", "arguments": {"text": "hi"}}</tool_call>`, nil)
		if err != nil || len(out.Results) != 1 || !out.Results[0].Success {
			t.Fatalf("%s: %v %+v", name, err, out)
		}
	}
	written := map[string]bool{}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if countNamed(rec.Ended(), "execute_tool spy__echo") >= 3 {
			break
		}
	}
	for _, s := range rec.Ended() {
		if strings.HasPrefix(s.Name(), "execute_tool ") {
			if s.Name() != "execute_tool spy__echo" {
				t.Errorf("span %q: the three spellings are one tool, spy__echo", s.Name())
			}
			for _, a := range s.Attributes() {
				if a.Key == "toolbus.tool.written" {
					written[a.Value.AsString()] = true
				}
			}
		}
	}
	if countNamed(rec.Ended(), "execute_tool spy__echo") != 3 || !written["mcp__spy__echo"] || !written["spy::echo"] || written["spy__echo"] {
		t.Errorf("%d spans execute_tool spy__echo; spellings kept %v, want mcp__spy__echo and spy::echo",
			countNamed(rec.Ended(), "execute_tool spy__echo"), written)
	}

	// 200 chunks: text, two calls, more text.
	rootCtx, root := tp.Tracer("orchestrator").Start(ctx, "streamed turn")
	s, err := c.Stream(rootCtx, "long", nil)
	if err != nil {
		t.Fatal(err)
	}
	var chunks []string
	for i := range 98 {
		chunks = append(chunks, fmt.Sprintf("word%d ", i))
	}
	chunks = append(chunks, `<tool_call>{"name": "spy__echo", "arguments": {"text": "a"}}</tool_call>`,
		`<tool_call>{"name": "spy::echo", "arguments": {"text": "b"}}</tool_call>`)
	for i := range 99 {
		chunks = append(chunks, fmt.Sprintf(" more%d", i))
	}
	for _, ch := range chunks {
		if _, err := s.WriteString(ch); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(ctx); err != nil { // a chunk each
			t.Fatal(err)
		}
	}
	out, err := s.Close(ctx)
	root.End()
	if err != nil || len(out.Results) != 2 {
		t.Fatalf("streamed: %v %+v", err, out)
	}
	inTrace := func() []sdktrace.ReadOnlySpan {
		var spans []sdktrace.ReadOnlySpan
		for _, s := range rec.Ended() {
			if s.SpanContext().TraceID() == root.SpanContext().TraceID() {
				spans = append(spans, s)
			}
		}
		return spans
	}
	// The end's format span is the last to end.
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if countNamed(inTrace(), "process toolbus.results.{conversation}") >= 3 && countNamed(inTrace(), "process toolbus.stream.{conversation}") >= 1 {
			break
		}
	}
	spans := inTrace()
	var names []string
	for _, s := range spans {
		names = append(names, s.Name())
	}
	if len(spans) >= 30 || len(spans) < 5 {
		t.Errorf("a streamed response of %d chunks made %d spans, want fewer than 30: %v", len(chunks)+1, len(spans), names)
	}
	t.Logf("a streamed response of %d chunks and 2 calls: %d spans", len(chunks)+1, len(spans))
	if countNamed(spans, "process toolbus.stream.{conversation}") != 1 {
		t.Fatalf("want one span for the chunks: %v", names)
	}
	for _, s := range spans {
		if s.Name() != "process toolbus.stream.{conversation}" {
			continue
		}
		chunkEvents, rest := 0, int64(0)
		for _, e := range s.Events() {
			switch e.Name {
			case "chunk":
				chunkEvents++
			case "chunks":
				for _, a := range e.Attributes {
					if a.Key == "toolbus.chunks_not_listed" {
						rest = a.Value.AsInt64()
					}
				}
			}
		}
		if chunkEvents != 100 || rest != int64(len(chunks)+1-100) || s.StartTime().After(s.EndTime()) {
			t.Errorf("the chunks' span has %d chunk events and %d chunks not listed, want 100 and %d", chunkEvents, rest, len(chunks)+1-100)
		}
	}
}

// One trace per response, streamed or not: an orchestrator that starts no span of its
// own (tracing on, as `toolbus send` has it) streams a response of many chunks, and
// every span of it — the stream's, the parser's, the calls' — is in one trace.
func TestStreamedResponseIsOneTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp) // the orchestrator's tracing, configured as OTEL_* configures it
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	connect := startBus(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var tries atomic.Int32
	startEach(t, connect, toolbus.Options{Tools: flakyOrders("", &tries), TracerProvider: tp}, toolbus.AllServices()...)
	c, err := client.New(connect("orchestrator"))
	if err != nil {
		t.Fatal(err)
	}
	text := `Let me check. <tool_call>{"name": "clock", "arguments": {}}</tool_call> and <tool_call>{"name": "clock", "arguments": {}}</tool_call> done.`
	s, err := c.Stream(ctx, "trace-stream", nil) // no span in ctx
	if err != nil {
		t.Fatal(err)
	}
	chunks := 0
	for _, tok := range client.SplitTokens(text) {
		if _, err := s.WriteString(tok); err != nil {
			t.Fatal(err)
		}
		chunks++
	}
	out, err := s.Close(ctx)
	if err != nil || len(out.Results) != 2 {
		t.Fatalf("output %+v, %v", out, err)
	}
	if chunks < 20 {
		t.Fatalf("only %d chunks", chunks)
	}
	var streamSpan sdktrace.ReadOnlySpan
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		ended := rec.Ended()
		streamSpan = nil
		for _, sp := range ended {
			if sp.Name() == "send toolbus.stream" {
				streamSpan = sp
			}
		}
		if streamSpan != nil && countNamed(ended, "execute_tool clock") >= 2 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if streamSpan == nil {
		t.Fatal("no span of the stream")
	}
	if a := spanAttrs(streamSpan); a["messaging.operation.name"] != "send" || a["messaging.system"] != "nats" {
		t.Errorf("the stream's span: %v", a)
	}
	traces := map[string]bool{}
	for _, sp := range rec.Ended() {
		if a := spanAttrs(sp); a["toolbus.conversation"] == "trace-stream" || sp.Name() == "execute_tool clock" {
			traces[sp.SpanContext().TraceID().String()] = true
		}
	}
	if len(traces) != 1 || !traces[streamSpan.SpanContext().TraceID().String()] {
		t.Errorf("the streamed response made %d traces, want 1", len(traces))
	}
}
