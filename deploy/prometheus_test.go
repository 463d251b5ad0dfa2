package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// promtool finds Prometheus's promtool (PATH, the repository's .cache/bin where
// scripts/install-test-tools puts it, then $GOPATH/bin). Without it the test is skipped,
// unless TOOLBUS_REQUIRE_TOOLS is set, as scripts/test does after installing it.
func promtool(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("promtool"); err == nil {
		return p
	}
	if p, err := filepath.Abs("../.cache/bin/promtool"); err == nil && fileExists(p) {
		return p
	}
	gopath, _ := exec.Command("go", "env", "GOPATH").Output()
	if p := filepath.Join(strings.TrimSpace(string(gopath)), "bin", "promtool"); fileExists(p) {
		return p
	}
	if os.Getenv("TOOLBUS_REQUIRE_TOOLS") != "" {
		t.Fatal("promtool not found (TOOLBUS_REQUIRE_TOOLS is set)")
	}
	t.Skip("promtool not found: scripts/test installs it")
	return ""
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// The alert rules are valid and do what their unit tests say; compose's Prometheus
// configuration is valid.
func TestPrometheusRules(t *testing.T) {
	bin := promtool(t)
	for _, args := range [][]string{
		{"check", "rules", "alerts.yml"},
		{"test", "rules", "alerts_test.yml"},
		{"check", "config", "prometheus.yml"},
	} {
		cmd := exec.Command(bin, args...)
		cmd.Dir = "prometheus"
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// alertMetrics lists the toolbus metrics the alert rules read.
func alertMetrics(t *testing.T) []string {
	t.Helper()
	rules, err := os.ReadFile("prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range regexp.MustCompile(`\btoolbus_[a-z_]+`).FindAllString(string(rules), -1) {
		if !slices.Contains(names, m) {
			names = append(names, m)
		}
	}
	slices.Sort(names)
	return names
}
