package mcpwire

import (
	"errors"
	"testing"

	"github.com/toolbus/toolbus/pkg/catalog"
)

// The allow-lists decide from the configuration alone: a server that has not listed its
// tools yet (the first response after start or a reload) refuses a tool they forbid under
// every spelling, and still resolves the ones they allow.
func TestAllowListsBeforeListing(t *testing.T) {
	in := map[string]catalogInput{
		"everything": {cfg: ServerConfig{Command: "x", AllowedTools: []string{"echo"}}},
		"blocky":     {cfg: ServerConfig{Command: "x", BlockedTools: []string{"rm*"}}},
		"open":       {cfg: ServerConfig{Command: "x"}},
	}
	routed := "everything"
	c := newCatalog(in, map[string]*string{"sum": &routed}, catalog.Lists{Allowed: []string{"everything__*", "blocky__*"}})
	for _, name := range []string{"everything__get-sum", "mcp__everything__get-sum", "everything::get-sum", "sum",
		"blocky__rm_rf", "mcp__blocky__rmdir", "blocky::rm", "open__anything", "open::anything", "mcp__open__x"} {
		if _, err := c.Resolve(name); !errors.Is(err, ErrNotAllowed) {
			t.Errorf("Resolve(%q) = %v, want not allowed", name, err)
		}
	}
	for _, name := range []string{"everything__echo", "mcp__everything__echo", "everything::echo", "blocky__ls"} {
		if _, err := c.Resolve(name); err != nil {
			t.Errorf("Resolve(%q) = %v, want the tool", name, err)
		}
	}
}
