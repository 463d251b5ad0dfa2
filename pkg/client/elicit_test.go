package client_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/toolbus/toolbus/internal/mcptest"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolbus"
)

// A server under the elicitation policy "ask" asks for a seat in the middle of a call:
// the question reaches the conversation's orchestrator (client.OnElicit), whose answer
// the tool gets; a conversation nobody answers for is declined at once.
func TestElicitationAsk(t *testing.T) {
	booking := mcptest.BookingServer(t)
	cfg, err := config.Parse([]byte(`{"mcpServers": {"booking": {"type": "http", "url": "`+booking+`", "elicitation": "ask"}},
		"engineering": {"enabled": false}}`), "toolbus.json", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	nc, _ := bustest.Provisioned(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := toolbus.Start(ctx, toolbus.Options{Provision: true, Conn: nc, Config: cfg, Topology: bus.Topology{Memory: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); n.Wait() }()
	c, err := client.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	asked := make(chan messages.ElicitRequest, 1)
	sub, err := c.OnElicit("c-ask", func(_ context.Context, req messages.ElicitRequest) messages.ElicitResponse {
		asked <- req
		return messages.ElicitResponse{Action: "accept", Content: map[string]any{"seat": "12A"}}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()

	book := func(conv string) map[string]any {
		t.Helper()
		out, err := c.Ask(ctx, conv, `<tool_call>{"name": "booking__book", "arguments": {}}</tool_call>`, nil)
		if err != nil || len(out.Results) != 1 || !out.Results[0].Success {
			t.Fatalf("%s: %+v, %v", conv, out, err)
		}
		var got map[string]any
		if err := json.Unmarshal(out.Results[0].Result, &got); err != nil {
			t.Fatalf("%s: %s", conv, out.Results[0].Result)
		}
		return got
	}
	if got := book("c-ask"); got["action"] != "accept" || got["seat"] != "12A" {
		t.Errorf("answered: %v", got)
	}
	req := <-asked
	if req.Conversation != "c-ask" || req.Server != "booking" || req.Message != "Which seat?" ||
		!strings.Contains(string(req.RequestedSchema), `"seat"`) || req.Deadline.IsZero() {
		t.Errorf("the orchestrator was asked %+v", req)
	}
	if got := book("c-nobody"); got["action"] != "decline" {
		t.Errorf("nobody to answer: %v", got)
	}
}
