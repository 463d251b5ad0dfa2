package formatter

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/messages"
)

// BenchmarkGather is the formatter gathering the results of responses of 1, 8 and 64
// calls in the gather bucket of an embedded JetStream, as the stage's 16 workers do:
// each result formatted on one of 16 goroutines, the output rendered once, and the
// response's keys cleared away after. ns/result is the cost of one result; it should
// not grow with the width.
func BenchmarkGather(b *testing.B) {
	for _, width := range []int{1, 8, 64} {
		b.Run(fmt.Sprint("width=", width), func(b *testing.B) {
			_, js := bustest.Provisioned(b)
			ctx := context.Background()
			kv, err := js.KeyValue(ctx, messages.BucketGather)
			if err != nil {
				b.Fatal(err)
			}
			gather := NewKVGatherer(kv)
			s := &Stage{Gather: gather}
			results := func(id string) []messages.ToolResult {
				rs := make([]messages.ToolResult, width)
				for i := range rs {
					rs[i] = messages.ToolResult{CallID: messages.CallID("bench", id, i), ResponseID: id, Conversation: "bench", Index: i, Count: width,
						Tool: "execute_tool", Success: true, Backend: "engineering", Attempts: 1,
						Result: json.RawMessage(`{"tool":"geometry.solve_circle_area","value":3.14159,"unit":"m²","answer":"A = 3.14159 m²"}`)}
				}
				return rs
			}
			n := 0
			b.ReportAllocs()
			for b.Loop() {
				n++
				rs := results(fmt.Sprint("r", n))
				if err := gatherAll(ctx, s, gather, rs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n*width), "ns/result")
		})
	}
}

// gatherAll formats rs on 16 goroutines, checks that exactly one output came, and
// clears the response away as the runner does once the output is stored.
func gatherAll(ctx context.Context, s *Stage, gather KVGatherer, rs []messages.ToolResult) error {
	var (
		mu      sync.Mutex
		outputs int
		first   error
		wg      sync.WaitGroup
		next    = make(chan messages.ToolResult)
	)
	for range 16 {
		wg.Go(func() {
			for r := range next {
				out, err := s.Format(ctx, r, &bus.Delivery{Delivered: 1})
				mu.Lock()
				if err != nil && first == nil {
					first = err
				}
				outputs += len(out)
				mu.Unlock()
			}
		})
	}
	for _, r := range rs {
		next <- r
	}
	close(next)
	wg.Wait()
	if first != nil {
		return first
	}
	if outputs != 1 {
		return fmt.Errorf("%d outputs of a response of %d calls, want 1", outputs, len(rs))
	}
	if len(rs) == 1 {
		return nil
	}
	return gather.Finish(ctx, messages.ScopedID("bench", rs[0].ResponseID), finishKeys(messages.ScopedID("bench", rs[0].ResponseID), rs)...)
}
