package executor_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/toolbus/toolbus/pkg/engineering"
	"github.com/toolbus/toolbus/pkg/engineering/backend"
	"github.com/toolbus/toolbus/pkg/executor"
	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/messages"
)

// BenchmarkExecuteStage is the executor's handler without the bus: the call message is
// decoded, routed, run and its result encoded. "local" runs an in-process Go tool,
// "engineering" the calculator toolbus bench calls (sessions in memory).
func BenchmarkExecuteStage(b *testing.B) {
	reg := localtools.New()
	if err := reg.Add(localtools.Clock(func() time.Time { return time.Unix(1_800_000_000, 0) })); err != nil {
		b.Fatal(err)
	}
	sessions := engineering.NewMemorySessions()
	suite := engineering.New(&engineering.Options{Sessions: sessions})
	exec := &executor.Executor{Router: executor.NewRouter(executor.LocalBackend{Registry: reg}, backend.New(suite))}
	ctx := context.Background()
	if _, err := suite.Call(ctx, "bench", engineering.ToolDispatch, json.RawMessage(`{"domain": "geometry", "action": "activate"}`)); err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name, tool, args string
	}{
		{"local", "clock", `{}`},
		{"engineering", engineering.ToolExecute, `{"tool_name": "geometry.solve_circle_area", "parameters": {"r": 1}}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			msg, err := json.Marshal(messages.ToolCall{ID: "r1/0", ResponseID: "r1", Conversation: "bench", Count: 1,
				Tool: tc.tool, Arguments: json.RawMessage(tc.args)})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				var call messages.ToolCall
				if err := messages.DecodeCall(msg, &call); err != nil {
					b.Fatal(err)
				}
				route, err := exec.Router.Resolve(ctx, call.Tool)
				if err != nil {
					b.Fatal(err)
				}
				res, _ := exec.ExecuteRoute(ctx, call, route, err, executor.Earlier{})
				if !res.Success {
					b.Fatal(res.Error)
				}
				if _, err := json.Marshal(res); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
