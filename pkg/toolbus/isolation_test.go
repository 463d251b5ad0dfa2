package toolbus_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolbus"
)

// Conversations are isolated: the subject decides a response's conversation, response ids
// need only be unique within a conversation, and a conversation id no subject can carry
// is dead-lettered at once.
func TestConversationsAreIsolated(t *testing.T) {
	t.Parallel()
	url := bustest.Server(t)
	var mu sync.Mutex
	runs := map[string]int{} // ticket title → runs
	local := localtools.New()
	err := localtools.AddFunc(local, messages.ToolInfo{Name: "create_ticket", Description: "not idempotent"},
		func(_ context.Context, in struct {
			Title string `json:"title"`
		}) (map[string]string, error) {
			mu.Lock()
			runs[in.Title]++
			mu.Unlock()
			return map[string]string{"created": in.Title}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nc, js := bustest.Connect(t, url, nats.Name("services"))
	n, err := toolbus.Start(ctx, toolbus.Options{Provision: true, Conn: nc, Config: &config.Config{}, Tools: local, Services: []string{toolbus.Parser, toolbus.Executor, toolbus.Formatter}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); n.Wait() })
	onc, _ := bustest.Connect(t, url, nats.Name("orchestrator"))
	c, err := client.New(onc)
	if err != nil {
		t.Fatal(err)
	}
	ticket := func(title string) string {
		return `<tool_call>{"name": "create_ticket", "arguments": {"title": "` + title + `"}}</tool_call>`
	}

	t.Run("the same response id in two conversations", func(t *testing.T) {
		for _, conv := range []string{"tenant-a", "tenant-b"} {
			out, err := c.Ask(ctx, conv, ticket("ticket of "+conv), &client.SubmitOptions{ResponseID: "turn-3"})
			if err != nil {
				t.Fatalf("%s: %v", conv, err)
			}
			if out.Conversation != conv || len(out.Results) != 1 || !out.Results[0].Success ||
				string(out.Results[0].Result) != `{"created":"ticket of `+conv+`"}` {
				t.Errorf("%s got %+v", conv, out)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if runs["ticket of tenant-a"] != 1 || runs["ticket of tenant-b"] != 1 {
			t.Errorf("runs %v, want each ticket created once", runs)
		}
	})

	t.Run("a conversation header naming another conversation", func(t *testing.T) {
		msg := nats.NewMsg(messages.ResponseSubject("attacker"))
		msg.Data = []byte(ticket("spoofed"))
		msg.Header.Set(messages.HeaderResponseID, "spoof-1")
		msg.Header.Set(messages.HeaderConversation, "victim")
		if _, err := js.PublishMsg(ctx, msg); err != nil {
			t.Fatal(err)
		}
		out, err := c.Wait(ctx, "attacker", "spoof-1")
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Results) != 1 || out.Results[0].Success || out.Results[0].Error.Code != messages.CodeNotAllowed {
			t.Errorf("the attacker got %+v, want not_allowed", out.Results)
		}
		stream, err := js.Stream(ctx, messages.StreamOutput)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := stream.GetLastMsgForSubject(ctx, messages.OutputSubject("victim")); !errors.Is(err, jetstream.ErrMsgNotFound) {
			t.Errorf("the victim's conversation got an output (%v)", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if runs["spoofed"] != 0 {
			t.Error("the spoofed response's call ran")
		}
	})

	// A response whose subject carries no valid conversation, or a conversation of a
	// tenant the deployment does not serve, has no stream to go to: the publisher is told
	// at once, and nothing of it runs.
	for _, subject := range []string{"toolbus.responses.a.b.c", "toolbus.responses.a.b", "toolbus.stream.a.b"} {
		msg := nats.NewMsg(subject)
		msg.Data = []byte(ticket("dotted"))
		if _, err := js.PublishMsg(ctx, msg); !errors.Is(err, jetstream.ErrNoStreamResponse) {
			t.Errorf("a response on %s: %v, want no stream to take it", subject, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if runs["dotted"] != 0 {
		t.Error("the call of a response without a valid conversation ran")
	}
}
