package executor_test

import (
	"fmt"
	"time"

	"github.com/toolbus/toolbus/pkg/executor"
	"github.com/toolbus/toolbus/pkg/messages"
)

// A server whose calls keep failing is refused at once; after the cool-down one trial
// call goes through, and its success closes the circuit.
func ExampleBreaker() {
	now := time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)
	gate := executor.NewBreaker(&executor.BreakerOptions{CoolDown: 5 * time.Second, FailureThreshold: 2, Now: func() time.Time { return now }})
	down := &messages.ToolError{Code: messages.CodeServerUnavailable, Message: "connection refused", Unsent: true}
	gate.Report("mcp:tickets", down)
	gate.Report("mcp:tickets", down)

	fmt.Println(gate.Allow("mcp:tickets"))
	fmt.Println(gate.Allow("local"))
	now = now.Add(5 * time.Second)
	fmt.Println(gate.Allow("mcp:tickets"))
	gate.Report("mcp:tickets", nil)
	fmt.Println(gate.Allow("mcp:tickets"))
	// Output:
	// server_unavailable: the server "tickets" is failing (2 calls in a row failed, the last with: connection refused); this call was not sent to it and will not be retried. A call made after 5s is let through to try the server again.
	// <nil>
	// <nil>
	// <nil>
}
