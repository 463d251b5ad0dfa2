package order_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/order"
)

func calls(tools ...string) []messages.ToolCall {
	out := make([]messages.ToolCall, len(tools))
	for i, t := range tools {
		out[i] = messages.ToolCall{ID: messages.CallID("c", "r", i), ResponseID: "r", Conversation: "c", Index: i, Count: len(tools),
			Tool: t, Arguments: json.RawMessage(`{}`)}
	}
	return out
}

// readOnly: tools named "read*" may run together.
func readOnly(c *messages.ToolCall) bool { return c.Tool[:4] == "read" }

func TestSplit(t *testing.T) {
	tests := []struct {
		tools      []string
		wantStarts []int
		wantNext   []int
	}{
		{[]string{"read"}, []int{0}, []int{0}},
		{[]string{"read", "read", "read"}, []int{0}, []int{0, 0, 0}},
		{[]string{"write", "write"}, []int{0, 1}, []int{1, 0}},
		{[]string{"write", "read", "read", "write", "read"}, []int{0, 1, 3, 4}, []int{1, 3, 3, 4, 0}},
		{[]string{"read", "read", "write", "read", "read"}, []int{0, 2, 3}, []int{2, 2, 3, 0, 0}},
	}
	for _, tt := range tests {
		cs := calls(tt.tools...)
		starts := order.Split(cs, readOnly)
		var next []int
		for _, c := range cs {
			next = append(next, c.Next)
		}
		if !slices.Equal(starts, tt.wantStarts) || !slices.Equal(next, tt.wantNext) {
			t.Errorf("%v: starts %v next %v, want %v %v", tt.tools, starts, next, tt.wantStarts, tt.wantNext)
		}
		segs := order.Segments(cs, starts, order.Skip)
		n := 0
		for i, s := range segs {
			if s.Calls[0].Index != starts[i] || s.OnError != order.Skip {
				t.Errorf("%v: segment %d = %+v", tt.tools, i, s)
			}
			n += len(s.Calls)
		}
		if n != len(cs) {
			t.Errorf("%v: segments hold %d calls, want %d", tt.tools, n, len(cs))
		}
	}
}

func TestPolicy(t *testing.T) {
	p := order.Policy{Parallel: order.Ordered, Servers: map[string]order.Mode{"fs": order.All}}
	if p.Mode("fs") != order.All || p.Mode("other") != order.Ordered || p.Unordered() {
		t.Errorf("policy %+v: fs %s, other %s, unordered %v", p, p.Mode("fs"), p.Mode("other"), p.Unordered())
	}
	if (&order.Policy{}).Mode("x") != order.Safe {
		t.Error("the default mode is not safe")
	}
	if !(&order.Policy{Parallel: order.All}).Unordered() {
		t.Error("parallel all is not unordered")
	}
	for _, bad := range []string{"parallel", "Safe", "none"} {
		if _, err := order.ParseMode(bad); err == nil {
			t.Errorf("ParseMode(%q) accepted", bad)
		}
	}
	if _, err := order.ParseOnError("stop"); err == nil {
		t.Error(`ParseOnError("stop") accepted`)
	}
}

// Save keeps the first plan saved for a response: a later delivery that cut the calls
// differently (the catalog changed in between) gets the first plan's first segment, so the
// calls already published stay the plan's.
func TestStoreSaveKeepsTheFirstPlan(t *testing.T) {
	_, js := bustest.Provisioned(t)
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, messages.BucketGather)
	if err != nil {
		t.Fatal(err)
	}
	s := order.Store{KV: kv}
	first := calls("write", "read", "read", "write")
	segs := order.Segments(first, order.Split(first, readOnly), order.Continue)
	got, err := s.Save(ctx, "r", segs)
	if err != nil || len(got.Calls) != 1 {
		t.Fatalf("Save = %+v, %v; want the first segment of one call", got, err)
	}
	again := calls("write", "read", "read", "write")
	segs2 := order.Segments(again, order.Split(again, func(*messages.ToolCall) bool { return true }), order.Continue)
	got, err = s.Save(ctx, "r", segs2)
	if err != nil || len(got.Calls) != 1 || got.Calls[0].Next != 1 {
		t.Fatalf("second Save = %+v, %v; want the first plan's first segment", got, err)
	}
	for start, want := range map[int]int{1: 2, 3: 1} {
		seg, err := s.Load(ctx, "r", start)
		if err != nil || len(seg.Calls) != want || seg.Calls[0].Index != start {
			t.Errorf("Load(%d) = %+v, %v; want %d calls from %d", start, seg, err, want, start)
		}
	}
	if _, err := s.Load(ctx, "r", 2); err == nil {
		t.Error("Load of a start that begins no segment succeeded")
	}
	// Response ids of any shape get keys of their own.
	for _, id := range []string{"a/b", "ü.x", fmt.Sprint(make([]byte, 300))} {
		if _, err := s.Save(ctx, id, segs); err != nil {
			t.Errorf("Save(%q): %v", id, err)
		}
	}
}
