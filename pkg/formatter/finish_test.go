package formatter

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/order"
)

// Once a response's output is stored, its results and segments leave the gather bucket
// and only the mark that it is answered stays: a result redelivered after that produces
// nothing (its output is stored already), and nothing of the response is started again.
func TestFinishLeavesTheMark(t *testing.T) {
	_, gather, _, _ := storedBus(t)
	ctx := context.Background()
	plans := order.Store{KV: gather.KV}
	s := &Stage{Gather: gather, Plans: plans}
	calls := make([]messages.ToolCall, 2)
	for i := range calls {
		calls[i] = messages.ToolCall{ID: messages.CallID("c", "r", i), ResponseID: "r", Conversation: "c", Index: i, Count: 2, Tool: "w", Arguments: json.RawMessage(`{}`)}
	}
	calls[0].Next = 1
	if _, err := plans.Save(ctx, "c/r", order.Segments(calls, []int{0, 1}, "")); err != nil {
		t.Fatal(err)
	}
	res := func(i int) messages.ToolResult {
		r := messages.ResultFor(calls[i])
		r.Success, r.Result = true, json.RawMessage(`{}`)
		return r
	}
	if out, err := s.Format(ctx, res(0), &bus.Delivery{}); err != nil || len(out) != 1 || out[0].Subject != messages.CallSubject("c") {
		t.Fatalf("the first result: %v %v", out, err)
	}
	out, err := s.Format(ctx, res(1), &bus.Delivery{})
	if err != nil || len(out) != 1 || out[0].Subject != messages.OutputSubject("c") {
		t.Fatalf("the last result: %v %v", out, err)
	}
	if got := segmentKeys("c/r", []messages.ToolResult{res(0), res(1)}); !slices.Equal(got, []string{order.Key("c/r", 0), order.Key("c/r", 1)}) {
		t.Fatalf("segment keys %v", got)
	}
	if err := gather.Finish(ctx, "c/r", finishKeys("c/r", []messages.ToolResult{res(0), res(1)})...); err != nil {
		t.Fatal(err)
	}
	keys, err := gather.KV.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for k := range keys.Keys() {
		left = append(left, k)
	}
	if !slices.Equal(left, []string{"c/r"}) {
		t.Errorf("keys left %v, want the mark only", left)
	}
	for i := range calls {
		if out, err := s.Format(ctx, res(i), &bus.Delivery{}); err != nil || len(out) != 0 {
			t.Errorf("result %d after the output: %v %v", i, out, err)
		}
	}
	if _, err := gather.Results(ctx, "c", "r", 0); !errors.Is(err, order.ErrAnswered) {
		t.Errorf("results after the output: %v", err)
	}
}
