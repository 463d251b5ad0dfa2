package executor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/claims/claimstest"
	"github.com/toolbus/toolbus/pkg/executor"
	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/policy"
)

// BenchmarkStagePolicy is the executor's stage function on a read-only call (no claim on
// its first delivery) with no policy and with 20 rules, each applying to every tool and
// none matching, so that all 20 conditions are evaluated for the call: the overhead of
// the rules on the hot path (docs/performance.md).
func BenchmarkStagePolicy(b *testing.B) {
	reg := localtools.New()
	if err := reg.Add(localtools.Clock(func() time.Time { return time.Unix(1_800_000_000, 0) })); err != nil {
		b.Fatal(err)
	}
	var rules []policy.Rule
	for i := range 10 {
		rules = append(rules,
			policy.Rule{Name: fmt.Sprintf("tool-%d", i), When: fmt.Sprintf("tool == 'other_%d' && tenant == 'acme'", i), Effect: policy.Deny},
			policy.Rule{Name: fmt.Sprintf("path-%d", i), When: fmt.Sprintf("has(args.file_path) && args.file_path.startsWith('/etc/%d')", i), Effect: policy.Deny})
	}
	msg, err := json.Marshal(messages.ToolCall{ID: "r1/0", ResponseID: "r1", Conversation: "bench", Count: 1,
		Tool: "clock", Arguments: json.RawMessage(`{"timezone": "UTC"}`)})
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{0, 20} {
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) {
			exec := &executor.Executor{Router: executor.NewRouter(executor.LocalBackend{Registry: reg})}
			p, err := policy.Compile(rules[:n])
			if err != nil {
				b.Fatal(err)
			}
			exec.Policy.Store(p)
			s := &executor.Stage{Exec: exec, Claims: &claimstest.Memory{}}
			d := &bus.Delivery{Data: msg, Delivered: 1}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				call, err := executor.Decode(d)
				if err != nil {
					b.Fatal(err)
				}
				out, err := s.Execute(ctx, call, d)
				if err != nil || len(out) != 1 {
					b.Fatal(err, len(out))
				}
			}
		})
	}
}
