package engineering_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolbus/toolbus/pkg/engineering"
)

// connect serves suite's MCP server over in-memory transports and returns a client session.
func connect(t *testing.T, suite *engineering.Suite, opts *engineering.MCPOptions) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	serverT, clientT := mcp.NewInMemoryTransports()
	ss, err := suite.MCPServer(opts).Connect(ctx, serverT, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, clientT, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// callText calls a tool and returns its text, failing on a protocol error; isError
// reports a tool error.
func callText(t *testing.T, cs *mcp.ClientSession, name string, args any, meta mcp.Meta) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args, Meta: meta})
	if err != nil {
		t.Fatalf("CallTool %s: %v", name, err)
	}
	if len(res.Content) != 1 {
		t.Fatalf("CallTool %s: %d contents", name, len(res.Content))
	}
	return res.Content[0].(*mcp.TextContent).Text, res.IsError
}

// mcpWorkflow lists the tools and runs info → list → activate → execute_tool on a
// connected session, checking each answer.
func mcpWorkflow(t *testing.T, cs *mcp.ClientSession, meta mcp.Meta) {
	t.Helper()
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	if !slices.Equal(names, []string{"clock", "dispatch_engineering", "execute_tool"}) {
		t.Fatalf("tools/list = %v, want exactly the three visible tools", names)
	}

	steps := []struct {
		name     string
		tool     string
		args     map[string]any
		want     string
		wantErr  bool
		wantText string
	}{
		{name: "info", tool: "dispatch_engineering", args: map[string]any{"action": "info"}, want: `"name":"pressure"`},
		{name: "execute before activation", tool: "execute_tool", args: map[string]any{"tool_name": "pressure.solve_kesselformel", "parameters": map[string]any{"p": 10, "d": 100, "sigma": 160}},
			wantErr: true, want: `domain_not_active: pressure.solve_kesselformel belongs to the domain "pressure"`},
		{name: "list", tool: "dispatch_engineering", args: map[string]any{"domain": "pressure", "action": "list"}, want: `"input_schema"`},
		{name: "activate", tool: "dispatch_engineering", args: map[string]any{"domain": "pressure", "action": "activate"}, want: `"answer":"s = 0.3125 mm"`},
		{name: "execute", tool: "execute_tool", args: map[string]any{"tool_name": "pressure.solve_kesselformel", "parameters": map[string]any{"p": "10 bar", "d": "100 mm", "sigma": 160}},
			want: `"answer":"s = 0.3125 mm"`},
		{name: "execute with string parameters", tool: "execute_tool", args: map[string]any{"tool_name": "pressure.solve_kesselformel", "parameters": `{"p": 10, "d": 100, "s": 0.3125}`},
			want: `"answer":"sigma = 160 N/mm²"`},
		{name: "invalid arguments", tool: "execute_tool", args: map[string]any{"tool_name": "pressure.solve_kesselformel", "parameters": map[string]any{"p": -10, "d": 100, "sigma": 160}},
			wantErr: true, want: "invalid_arguments: pressure.solve_kesselformel: p must be greater than 0"},
	}
	for _, st := range steps {
		text, isErr := callText(t, cs, st.tool, st.args, meta)
		if isErr != st.wantErr || !strings.Contains(text, st.want) {
			t.Fatalf("%s: isError %v, text %s\nwant isError %v and %q", st.name, isErr, text, st.wantErr, st.want)
		}
	}
}

func TestMCPWorkflow(t *testing.T) {
	mcpWorkflow(t, connect(t, engineering.New(nil), nil), nil)
}

func TestMCPSessionsAreIsolated(t *testing.T) {
	suite := engineering.New(nil)
	a, b := connect(t, suite, nil), connect(t, suite, nil)
	if _, isErr := callText(t, a, "dispatch_engineering", map[string]any{"domain": "geometry", "action": "activate"}, nil); isErr {
		t.Fatal("activate failed")
	}
	args := map[string]any{"tool_name": "geometry.solve_circle_area", "parameters": map[string]any{"r": 1}}
	if text, isErr := callText(t, a, "execute_tool", args, nil); isErr {
		t.Fatalf("session a: %s", text)
	}
	if text, isErr := callText(t, b, "execute_tool", args, nil); !isErr || !strings.Contains(text, "domain_not_active") {
		t.Fatalf("session b ran without activating: %s", text)
	}
}

func TestMCPConversationFromMeta(t *testing.T) {
	store := engineering.NewMemorySessions()
	suite := engineering.New(&engineering.Options{Sessions: store})
	// Two MCP sessions of one conversation share its activation, in stateless mode too.
	a := connect(t, suite, &engineering.MCPOptions{Stateless: true})
	b := connect(t, suite, nil)
	meta := mcp.Meta{engineering.MetaConversation: "conv-7"}
	if text, isErr := callText(t, a, "dispatch_engineering", map[string]any{"domain": "materials", "action": "activate"}, meta); isErr {
		t.Fatal(text)
	}
	args := map[string]any{"tool_name": "materials.lookup", "parameters": map[string]any{"material": "P355GH"}}
	if text, isErr := callText(t, b, "execute_tool", args, mcp.Meta{engineering.MetaConversationShort: "conv-7"}); isErr {
		t.Fatalf("conversation from _meta not used: %s", text)
	}
	if got, _ := store.Get(context.Background(), "conv-7"); !slices.Equal(got.ActiveDomains, []string{"materials"}) {
		t.Fatalf("stored %+v", got)
	}
	if text, isErr := callText(t, b, "execute_tool", args, mcp.Meta{engineering.MetaConversation: "bad id!"}); !isErr || !strings.Contains(text, "invalid_arguments") {
		t.Fatalf("invalid conversation id accepted: %s", text)
	}
}

func TestMCPStatelessWithoutConversation(t *testing.T) {
	cs := connect(t, engineering.New(nil), &engineering.MCPOptions{Stateless: true})
	text, isErr := callText(t, cs, "execute_tool", map[string]any{"tool_name": "pressure.solve_kesselformel", "parameters": map[string]any{"p": 10, "d": 100, "sigma": 160}}, nil)
	if isErr || !strings.Contains(text, "no conversation id: ran without domain activation") {
		t.Fatalf("per-request execution: %s", text)
	}
}

func TestMCPToolAnnotationsAndStructuredContent(t *testing.T) {
	cs := connect(t, engineering.New(nil), nil)
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]bool{ // read-only, idempotent
		"clock":                {true, true},
		"dispatch_engineering": {false, true},
		"execute_tool":         {true, true},
	}
	for _, tool := range tools.Tools {
		a := tool.Annotations
		if a == nil || a.ReadOnlyHint != want[tool.Name][0] || a.IdempotentHint != want[tool.Name][1] || a.OpenWorldHint == nil || *a.OpenWorldHint {
			t.Errorf("%s annotations %+v", tool.Name, a)
		}
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "clock", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	var clock engineering.ClockResult
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &clock); err != nil || !strings.HasSuffix(clock.UTC, "Z") {
		t.Fatalf("structured clock %s: %v", b, err)
	}
}

// The server continues the trace a call's _meta carries: its SERVER span is a child of
// the caller's span, in the caller's trace.
func TestMCPContinuesTheTraceInMeta(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	cs := connect(t, engineering.New(nil), &engineering.MCPOptions{TracerProvider: tp})
	const traceID, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	callText(t, cs, "clock", map[string]any{}, mcp.Meta{"traceparent": "00-" + traceID + "-" + parent + "-01"})
	callText(t, cs, "clock", map[string]any{}, nil)
	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want one per call", len(spans))
	}
	s := spans[0]
	if s.Name() != "tools/call clock" || s.SpanKind() != trace.SpanKindServer ||
		s.SpanContext().TraceID().String() != traceID || s.Parent().SpanID().String() != parent {
		t.Errorf("span %q kind %v trace %s parent %s; want a SERVER span in trace %s under %s",
			s.Name(), s.SpanKind(), s.SpanContext().TraceID(), s.Parent().SpanID(), traceID, parent)
	}
	if spans[1].Parent().IsValid() {
		t.Errorf("a call without _meta got parent %s", spans[1].Parent().SpanID())
	}
}
