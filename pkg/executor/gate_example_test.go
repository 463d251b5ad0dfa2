package executor_test

import (
	"fmt"
	"time"

	"github.com/toolbus/toolbus/pkg/executor"
	"github.com/toolbus/toolbus/pkg/messages"
)

// A server healthd marks down is refused at once; after the cool-down one trial call
// goes through, and its success closes the circuit.
func ExampleBreaker() {
	now := time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)
	gate := executor.NewBreaker(&executor.BreakerOptions{CoolDown: 5 * time.Second, Now: func() time.Time { return now }})
	gate.SetHealth(messages.HealthStatus{Server: "tickets", State: messages.HealthDown, Failures: 3, CheckedAt: now})

	fmt.Println(gate.Allow("mcp:tickets"))
	fmt.Println(gate.Allow("local"))
	now = now.Add(5 * time.Second)
	fmt.Println(gate.Allow("mcp:tickets"))
	gate.Report("mcp:tickets", nil)
	fmt.Println(gate.Allow("mcp:tickets"))
	// Output:
	// server_unavailable: the server "tickets" is down (3 health probes in a row failed); this attempt was not sent to it. It will be tried again in 5s.
	// <nil>
	// <nil>
	// <nil>
}
