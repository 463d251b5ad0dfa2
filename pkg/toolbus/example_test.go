package toolbus_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolbus"
)

func Example() {
	// The program's own Go function, as a tool.
	reg := localtools.New()
	err := localtools.AddFunc(reg, messages.ToolInfo{Name: "add", ReadOnly: true},
		func(_ context.Context, in struct{ A, B int }) (map[string]int, error) {
			return map[string]int{"sum": in.A + in.B}, nil
		})
	if err != nil {
		log.Fatal(err)
	}
	// The configuration as Go values (config.Load reads a file): only the program's tool.
	cfg := &config.Config{Engineering: config.Engineering{Enabled: new(false)}}
	cfg.Local.Clock = new(false)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tb, err := toolbus.Start(ctx, toolbus.Options{Config: cfg, Tools: reg}) // on an embedded NATS
	if err != nil {
		log.Fatal(err)
	}
	defer tb.Close()

	out, err := tb.Client().Ask(ctx, "example", `<tool_call>{"name": "add", "arguments": {"A": 2, "B": 40}}</tool_call>`, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(out.Results[0].Tool, out.Results[0].Success)
	fmt.Println(out.Text)
	// Output:
	// add true
	// <tool_result>
	// {
	//   "tool": "add",
	//   "success": true,
	//   "result": {
	//     "sum": 42
	//   }
	// }
	// </tool_result>
}
