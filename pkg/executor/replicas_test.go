package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/claims"
	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/messages"
)

// A call with side effects whose earlier delivery failed safely (released: it was never
// sent) is delivered to two executor replicas at once, as a redelivery racing a
// duplicate may be: the calls bucket lets exactly one of them run it.
func TestReleasedCallRunsOnceAcrossReplicas(t *testing.T) {
	url := bustest.Server(t)
	_, js := bustest.Connect(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := bus.Provision(ctx, js, bus.Topology{Memory: true}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	runs := map[string]int{}
	reg := localtools.New()
	reg.Add(localtools.Tool{Info: messages.ToolInfo{Name: "create_ticket"}, Run: func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
		var a struct{ ID string }
		json.Unmarshal(args, &a)
		mu.Lock()
		runs[a.ID]++
		mu.Unlock()
		return json.RawMessage(`{"ticket":"T-1"}`), nil
	}})
	replica := func(owner string) *Stage {
		_, js := bustest.Connect(t, url)
		kv, err := js.KeyValue(ctx, messages.BucketCalls)
		if err != nil {
			t.Fatal(err)
		}
		return &Stage{Claims: claims.KV{KV: kv, Owner: owner}, RedeliveryDelay: time.Millisecond,
			Exec: &Executor{Router: NewRouter(LocalBackend{Registry: reg})}}
	}
	replicas := []*Stage{replica("executor-a"), replica("executor-b")}
	first := replica("executor-first").Claims

	for round := range 20 {
		id := fmt.Sprintf("c/r%d/0", round)
		if _, err := first.Begin(ctx, id, ""); err != nil {
			t.Fatal(err)
		}
		if err := first.Release(ctx, id, claims.Progress{Attempts: 1, Sent: 1, First: time.Now()}); err != nil {
			t.Fatal(err)
		}
		call := messages.ToolCall{ID: id, ResponseID: fmt.Sprintf("r%d", round), Conversation: "c", Count: 1, Tool: "create_ticket",
			Arguments: json.RawMessage(fmt.Sprintf(`{"id": %q}`, id))}
		start := make(chan struct{})
		answered := make([]bool, len(replicas))
		var wg sync.WaitGroup
		for i, s := range replicas {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				out, err := deliver(s, ctx, call, &bus.Delivery{Delivered: 2})
				var retry *bus.RetryError
				switch {
				case err == nil && len(out) == 1:
					answered[i] = true
				case !errors.As(err, &retry):
					t.Errorf("round %d, replica %d: %d messages, %v; want an answer or a retry", round, i, len(out), err)
				}
			}()
		}
		close(start)
		wg.Wait()
		mu.Lock()
		n := runs[id]
		mu.Unlock()
		if n != 1 {
			t.Errorf("round %d: the call ran %d times, want once", round, n)
		}
		// The other either handed it back or, coming after the first finished, answered
		// from the stored result.
		if !answered[0] && !answered[1] {
			t.Errorf("round %d: no replica answered", round)
		}
	}
}
