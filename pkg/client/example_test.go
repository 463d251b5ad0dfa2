package client_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolbus"
)

// An orchestrator asks toolbus to run the calls in a model's answer and feeds the
// output's text back to the model. Here toolbus runs in the same process on an
// embedded NATS (startToolbus); in a deployment the client only needs the NATS
// connection.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, stop, err := startToolbus(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stop()
	modelText := "Let me activate the geometry calculators.\n" +
		`<tool_call>{"name": "dispatch_engineering", "arguments": {"domain": "geometry", "action": "activate"}}</tool_call>`
	out, err := c.Ask(ctx, "conv-1", modelText, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out.Kind, len(out.Results), out.Results[0].Tool, out.Results[0].Success)
	// Output: tool_results 1 dispatch_engineering true
}

// An orchestrator streams a model's answer as the model writes it: each call runs as
// soon as its block is complete, and Close returns the same output a whole response
// gets.
func ExampleClient_Stream() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, stop, err := startToolbus(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stop()
	answered := make(chan string, 1)
	s, err := c.Stream(ctx, "conv-2", &client.StreamOptions{
		// The model marks its reasoning with <think>…</think> (or has none): a call
		// may run before the response ends.
		SubmitOptions: client.SubmitOptions{Reasoning: "tagged"},
		Progress:      func(r messages.ToolResult) { answered <- r.Tool },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, chunk := range []string{"What time is it? ", `<tool_call>{"name": "clock", `, `"arguments": {}}</tool_call>`} {
		if _, err := s.WriteString(chunk); err != nil {
			fmt.Println(err)
			return
		}
	}
	fmt.Println("answered while the model writes:", <-answered)
	if _, err := s.WriteString(" I will tell you."); err != nil {
		fmt.Println(err)
		return
	}
	out, err := s.Close(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out.Kind, len(out.Results), out.Results[0].Tool, out.Results[0].Success)
	// Output:
	// answered while the model writes: clock
	// tool_results 1 clock true
}

// startToolbus runs toolbus in this process on an embedded NATS and returns a client of
// it, and what stops it all; in a deployment the client only needs the NATS connection.
func startToolbus(ctx context.Context) (c *client.Client, stop func(), err error) {
	var undo []func()
	stop = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	dir, err := os.MkdirTemp("", "toolbus-example")
	if err != nil {
		return nil, nil, err
	}
	undo = append(undo, func() { os.RemoveAll(dir) })
	srv, stopServer, err := bus.StartEmbedded(bus.EmbeddedOptions{StoreDir: dir})
	if err != nil {
		return nil, nil, err
	}
	undo = append(undo, stopServer)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		return nil, nil, err
	}
	undo = append(undo, nc.Close)
	sctx, cancel := context.WithCancel(ctx)
	services, err := toolbus.Start(sctx, toolbus.Options{Provision: true, Conn: nc})
	if err != nil {
		cancel()
		return nil, nil, err
	}
	undo = append(undo, func() { cancel(); services.Wait() })
	c, err = client.New(nc)
	return c, stop, err
}
