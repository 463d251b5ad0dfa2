package frontdoor_test

import (
	"context"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/frontdoor"
	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolbus"
)

// An MCP client calls a Go tool of toolbus through the front door: the call is a
// response through the pipeline (here every stage on an embedded NATS in process), and
// its output the MCP result. The client is the go-sdk's, over an in-memory transport.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reg := localtools.New()
	type args struct {
		City string `json:"city"`
	}
	_ = localtools.AddFunc(reg, messages.ToolInfo{Name: "forecast", ReadOnly: true}, func(_ context.Context, a args) (string, error) {
		return "sunny in " + a.City, nil
	})
	tb, err := toolbus.Start(ctx, toolbus.Options{Tools: reg, Embedded: &bus.EmbeddedOptions{}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer tb.Close()
	door, err := frontdoor.New(tb.Conn(), &frontdoor.Options{Offers: toolbus.ToolOffers(&config.Config{})})
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = tb.WaitForTools(ctx) // the executor has written its tools in the catalog
	go door.Run(ctx)
	<-door.Ready()

	serverSide, clientSide := mcp.NewInMemoryTransports()
	go door.Serve(ctx, "", serverSide) // the default tenant's view
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "desktop"}, nil).Connect(ctx, clientSide, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "forecast", Arguments: map[string]any{"city": "Oslo"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.IsError, res.Content[0].(*mcp.TextContent).Text)
	// Output: false sunny in Oslo
}
