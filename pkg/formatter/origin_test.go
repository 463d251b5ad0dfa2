package formatter

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/order"
)

// The message that first used a response's id, recorded by the parser in the
// response's key (order.Claim), stays there through the formatter's gathering and in
// the answered mark: a message that uses the id after the output is told from a
// redelivery of the first.
func TestGatherKeepsTheOrigin(t *testing.T) {
	_, gather, _, _ := storedBus(t)
	ctx := context.Background()
	first := order.Origin{Seq: 7, At: time.Now().UTC()}
	if _, err := order.Claim(ctx, gather.KV, "c/r", first); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		r := messages.ToolResult{CallID: messages.CallID("c", "r", i), ResponseID: "r", Conversation: "c", Index: i, Count: 2,
			Tool: "t", Success: true, Result: json.RawMessage(`{}`)}
		if g, err := gather.Add(ctx, r); err != nil || g.Answered != i+1 {
			t.Fatalf("result %d: %+v %v", i, g, err)
		}
	}
	if use, err := order.Claim(ctx, gather.KV, "c/r", order.Origin{Seq: 8, At: time.Now()}); err != nil || !use.Origin.Same(first) || use.Answered {
		t.Fatalf("while gathering: %+v, %v", use, err)
	}
	if err := gather.Finish(ctx, "c/r", order.ResultKeys("c/r", 2)...); err != nil {
		t.Fatal(err)
	}
	if use, err := order.Claim(ctx, gather.KV, "c/r", order.Origin{Seq: 8, At: time.Now()}); err != nil || !use.Origin.Same(first) || !use.Answered {
		t.Fatalf("after the output: %+v, %v", use, err)
	}
}
