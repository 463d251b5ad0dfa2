package toolbus_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolbus"
)

// The parser learns the tools from the catalog the executors publish: a bare JSON call
// naming a known tool is executed, and arguments that do not fit a tool's schema are
// answered by the parser with invalid_arguments before any executor sees them.
func TestParserUsesTheCatalog(t *testing.T) {
	t.Parallel()
	connect := startBus(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	local := localtools.New()
	type orderArgs struct {
		ID int `json:"id" jsonschema:"the order number"`
	}
	if err := localtools.AddFunc(local, messages.ToolInfo{Name: "order_status", Description: "status of an order"},
		func(ctx context.Context, in orderArgs) (map[string]any, error) {
			return map[string]any{"id": in.ID, "status": "shipped"}, nil
		}); err != nil {
		t.Fatal(err)
	}
	startEach(t, connect, toolbus.Options{Tools: local}, toolbus.Executor, toolbus.Parser, toolbus.Formatter)
	c, err := client.New(connect("orchestrator"))
	if err != nil {
		t.Fatal(err)
	}

	// Bare JSON counts as a call only when it names a known tool; the catalog reaches the
	// parser through a watch, so allow it a moment.
	var out *messages.Output
	for range 50 {
		if out, err = c.Ask(ctx, "cat", `{"name": "order_status", "arguments": {"id": 7}}`, nil); err != nil {
			t.Fatal(err)
		}
		if out.Kind == messages.KindToolResults {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if out.Kind != messages.KindToolResults || !out.Results[0].Success || !strings.Contains(string(out.Results[0].Result), "shipped") {
		t.Fatalf("bare JSON naming a known tool: %+v", out)
	}
	// Ordinary JSON in an answer is not a call.
	if out, _ = c.Ask(ctx, "cat", `Here is the data: {"name": "Alice", "arguments": {"x": 1}}`, nil); out.Kind != messages.KindNoToolCall {
		t.Errorf("JSON naming no tool was executed: %+v", out)
	}

	out, err = c.Ask(ctx, "cat", `<tool_call>{"name": "order_status", "arguments": {"id": "seven"}}</tool_call>`, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := out.Results[0]
	if r.Success || r.Error.Code != messages.CodeInvalidArguments || !strings.Contains(r.Error.Message, `"id"`) {
		t.Fatalf("want invalid_arguments naming id, got %+v", r.Error)
	}
	if r.Attempts != 0 {
		t.Errorf("the call reached an executor (%d attempts); the parser should have answered", r.Attempts)
	}

	// A response can pin its format: as pythonic, this list is a call.
	sub := &client.SubmitOptions{Format: "pythonic"}
	if out, err = c.Ask(ctx, "cat", `[order_status(id=9)]`, sub); err != nil {
		t.Fatal(err)
	}
	if out.Kind != messages.KindToolResults || !out.Results[0].Success {
		t.Errorf("pinned pythonic call: %+v", out)
	}
}
