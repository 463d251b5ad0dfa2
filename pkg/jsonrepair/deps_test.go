package jsonrepair

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies holds the package to being usable without the rest of toolbus:
// what it builds on, beside the standard library, is pkg/jsonscan alone (which is
// itself standard library only), never a toolbus package of calls, messages or NATS.
func TestDependencies(t *testing.T) {
	allowed := map[string]bool{
		"github.com/toolbus/toolbus/pkg/jsonrepair": true,
		"github.com/toolbus/toolbus/pkg/jsonscan":   true,
	}
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if !allowed[dep] {
			t.Errorf("pkg/jsonrepair depends on %s; it may import only the standard library and pkg/jsonscan", dep)
		}
	}
}
