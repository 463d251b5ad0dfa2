package healthd_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/toolbus/toolbus/pkg/healthd"
	"github.com/toolbus/toolbus/pkg/messages"
)

// Three failed probes in a row mark a server down; two successes in a row bring it
// back (one would let a server answering every other probe flap).
func ExampleNext() {
	now := time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)
	st := messages.HealthStatus{Server: "tickets", State: messages.HealthUp}
	for range 3 {
		st = healthd.Next(st, healthd.Result{Err: errors.New("connection refused")}, 3, now)
		fmt.Println(st.State, st.Failures)
	}
	for range 2 {
		st = healthd.Next(st, healthd.Result{Tools: 2, Protocol: "2025-11-25"}, 3, now)
		fmt.Println(st.State, st.Failures, st.Tools)
	}
	// Output:
	// up 1
	// up 2
	// down 3
	// down 0 2
	// up 0 2
}
