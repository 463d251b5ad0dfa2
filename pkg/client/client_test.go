package client_test

import (
	"context"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolbus"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/client"
)

// A conversation of a tenant the deployment does not serve (no output stream of its
// own) is refused at once, not waited for until the deadline: its response would be
// dead-lettered.
func TestTenantNotServed(t *testing.T) {
	nc, _ := bustest.Provisioned(t)
	c, err := client.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.Ask(ctx, "acme.c1", "hello", nil); err == nil || !strings.Contains(err.Error(), `serves no tenant "acme"`) {
		t.Errorf("Ask: %v", err)
	}
	if _, err := c.Stream(ctx, "acme.c1", nil); err == nil || !strings.Contains(err.Error(), `serves no tenant "acme"`) {
		t.Errorf("Stream: %v", err)
	}
	if _, err := c.Submit(ctx, "c1", "hello", nil); err != nil {
		t.Errorf("the default tenant: %v", err)
	}
}

// Asking again under the id of a response answered earlier (a caller's retry) runs
// nothing again and returns the first output, though it was published before the
// second Ask subscribed.
func TestAskAgainReturnsTheFirstOutput(t *testing.T) {
	var runs atomic.Int32
	reg := localtools.New()
	if err := localtools.AddFunc(reg, messages.ToolInfo{Name: "count"}, func(context.Context, struct{}) (int32, error) {
		return runs.Add(1), nil
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tb, err := toolbus.Start(ctx, toolbus.Options{Tools: reg, Embedded: &bus.EmbeddedOptions{StoreDir: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	c := tb.Client()
	text := `<tool_call>{"name": "count", "arguments": {}}</tool_call>`
	first, err := c.Ask(ctx, "c1", text, &client.SubmitOptions{ResponseID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // older than the second Ask's look-back
	again, err := c.Ask(ctx, "c1", text, &client.SubmitOptions{ResponseID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	if again.Text != first.Text || runs.Load() != 1 {
		t.Errorf("the retry got %q (first %q); the tool ran %d times", again.Text, first.Text, runs.Load())
	}
}

// Asking again under the id of a response that was read before the NATS server
// restarted and answered after it returns that output and runs nothing again: the
// restarted responses stream no longer holds the response it had handed out (a work
// queue), so it takes the second publish as new, while the output stream knows the
// output and drops its second publish — the output is found in the stream.
func TestAskAgainAfterARestart(t *testing.T) {
	var runs atomic.Int32
	started := make(chan struct{}, 1)
	reg := localtools.New()
	if err := localtools.AddFunc(reg, messages.ToolInfo{Name: "count"}, func(context.Context, struct{}) (int32, error) {
		n := runs.Add(1)
		started <- struct{}{}
		time.Sleep(time.Second) // under way while the server stops: answered after the restart
		return n, nil
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store := t.TempDir()
	text := `<tool_call>{"name": "count", "arguments": {}}</tool_call>`
	tb, err := toolbus.Start(ctx, toolbus.Options{Tools: reg, Embedded: &bus.EmbeddedOptions{StoreDir: store}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Client().Submit(ctx, "c1", text, &client.SubmitOptions{ResponseID: "r1"}); err != nil {
		t.Fatal(err)
	}
	<-started
	tb.Close()
	if tb, err = toolbus.Start(ctx, toolbus.Options{Tools: reg, Embedded: &bus.EmbeddedOptions{StoreDir: store}}); err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	first, err := tb.Client().Wait(ctx, "c1", "r1")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // older than the second Ask's look-back
	// Bounded well under the test's minute: a hang is the failure.
	actx, acancel := context.WithTimeout(ctx, 20*time.Second)
	defer acancel()
	again, err := tb.Client().Ask(actx, "c1", text, &client.SubmitOptions{ResponseID: "r1"})
	if err != nil {
		t.Fatalf("asked again: %v", err)
	}
	if again.Text != first.Text || runs.Load() != 1 {
		t.Errorf("asked again: %q (first %q); the tool ran %d times", again.Text, first.Text, runs.Load())
	}
}
