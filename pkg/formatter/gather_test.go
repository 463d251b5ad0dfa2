package formatter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/order"
)

// Two formatter replicas, 16 workers each, gather a wide response whose results come
// twice (redelivered): one delivery of a result not held before answers the last call,
// the results read back are every call's, in order, and what every result rewrites —
// the response's key — holds which calls are answered, not their results, so it stays
// a few bytes however wide the response is. Once finished, only the mark is left.
func TestGatherWideAcrossReplicas(t *testing.T) {
	const width = 200
	_, _, js, _ := storedBus(t)
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, messages.BucketGather)
	if err != nil {
		t.Fatal(err)
	}
	replicas := []KVGatherer{NewKVGatherer(kv), NewKVGatherer(kv)}
	rs := make([]messages.ToolResult, width)
	for i := range rs {
		rs[i] = messages.ToolResult{CallID: messages.CallID("c", "wide", i), ResponseID: "wide", Conversation: "c", Index: i, Count: width,
			Tool: "t", Success: i != 150 && i != 70, Result: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}
	}
	var (
		mu        sync.Mutex
		completes []int
		wg        sync.WaitGroup
		next      = make(chan int)
	)
	for w := range 32 {
		g := replicas[w%2]
		wg.Go(func() {
			for i := range next {
				got, err := g.Add(ctx, rs[i%width])
				if err != nil {
					t.Error(err)
					continue
				}
				if got.Failed != -1 && got.Failed != 70 && got.Failed != 150 {
					t.Errorf("first failure %d", got.Failed)
				}
				if got.Answered == width {
					mu.Lock()
					completes = append(completes, i)
					mu.Unlock()
				}
			}
		})
	}
	for i := range 2 * width {
		next <- i
	}
	close(next)
	wg.Wait()
	if len(completes) == 0 || slices.Min(completes) >= width {
		t.Fatalf("adds that saw every call answered: %v; want one delivery of a new result among them", completes)
	}
	e, err := kv.Get(ctx, bus.Key("c/wide"))
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Value()) > 80 {
		t.Errorf("the response's key holds %d bytes for %d calls: %s", len(e.Value()), width, e.Value())
	}
	g, err := replicas[0].Add(ctx, rs[0])
	if err != nil || g != (Gathered{Answered: width, Prefix: width, Failed: 70}) {
		t.Errorf("a redelivery: %+v %v", g, err)
	}
	all, err := replicas[1].Results(ctx, "c", "wide", width)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range all {
		if r.Index != i || string(r.Result) != fmt.Sprintf(`{"i":%d}`, i) {
			t.Fatalf("result %d: %+v", i, r)
		}
	}
	if err := replicas[0].Finish(ctx, "c/wide", finishKeys("c/wide", all)...); err != nil {
		t.Fatal(err)
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for k := range keys.Keys() {
		left = append(left, k)
	}
	if !slices.Equal(left, []string{"c/wide"}) {
		t.Errorf("keys left %v, want the mark only", left)
	}
	// A result that comes after the output finds the response answered and leaves
	// nothing behind.
	if _, err := replicas[1].Add(ctx, rs[3]); !errors.Is(err, order.ErrAnswered) {
		t.Errorf("a result after the output: %v", err)
	}
	if _, err := kv.Get(ctx, order.ResultKey("c/wide", 3)); err == nil {
		t.Error("a result after the output was kept")
	}
}

// What is answered of a response, read from the bits the response's key keeps.
func TestProgress(t *testing.T) {
	tests := []struct {
		name string
		add  []int // negative: -(index+1) failed
		want Gathered
	}{
		{name: "nothing", want: Gathered{Prefix: 0, Failed: -1}},
		{name: "the first", add: []int{0}, want: Gathered{Answered: 1, Prefix: 1, Failed: -1}},
		{name: "a gap", add: []int{0, 1, 3}, want: Gathered{Answered: 3, Prefix: 2, Failed: -1}},
		{name: "a byte full", add: []int{0, 1, 2, 3, 4, 5, 6, 7, 9}, want: Gathered{Answered: 9, Prefix: 8, Failed: -1}},
		{name: "failures: the first counts", add: []int{0, -(12 + 1), -(5 + 1), 1}, want: Gathered{Answered: 4, Prefix: 2, Failed: 5}},
		{name: "twice counts once", add: []int{3, 3, -(3 + 1)}, want: Gathered{Answered: 1, Prefix: 0, Failed: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p progress
			for _, i := range tt.add {
				if i < 0 {
					p.add(-i-1, false)
				} else {
					p.add(i, true)
				}
			}
			if got := p.gathered(); got != tt.want {
				t.Errorf("%+v, want %+v", got, tt.want)
			}
		})
	}
}

// A second result for a call already answered (the executor answered twice: a
// redelivery that ran again, a forwarded copy) never replaces the first: the output
// holds the first, whichever replica gathers the second, and the second changes nothing
// of what is answered.
func TestGatherKeepsTheFirstResult(t *testing.T) {
	_, _, js, _ := storedBus(t)
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, messages.BucketGather)
	if err != nil {
		t.Fatal(err)
	}
	a, b := NewKVGatherer(kv), NewKVGatherer(kv)
	first := messages.ToolResult{CallID: messages.CallID("c", "twice", 0), ResponseID: "twice", Conversation: "c", Index: 0, Count: 2,
		Tool: "pay", Success: true, Result: json.RawMessage(`{"paid":"alice"}`)}
	second := first
	second.Result = json.RawMessage(`{"paid":"mallory"}`)
	if _, err := a.Add(ctx, first); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Add(ctx, second); err != nil {
		t.Fatal(err)
	}
	other := messages.ToolResult{CallID: messages.CallID("c", "twice", 1), ResponseID: "twice", Conversation: "c", Index: 1, Count: 2,
		Tool: "pay", Success: true, Result: json.RawMessage(`{"paid":"bob"}`)}
	if _, err := a.Add(ctx, other); err != nil {
		t.Fatal(err)
	}
	all, err := b.Results(ctx, "c", "twice", 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || string(all[0].Result) != `{"paid":"alice"}` || string(all[1].Result) != `{"paid":"bob"}` {
		t.Fatalf("gathered %+v", all)
	}
}
