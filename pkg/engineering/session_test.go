package engineering_test

import (
	"testing"

	"github.com/toolbus/toolbus/pkg/engineering"
	"github.com/toolbus/toolbus/pkg/engineering/sessiontest"
)

// TestMemorySessions runs the store suite; run it with -race: its concurrent subtest
// fails on lost updates, and the race detector on unguarded access.
func TestMemorySessions(t *testing.T) {
	sessiontest.Run(t, func(*testing.T) engineering.SessionStore { return engineering.NewMemorySessions() })
}
