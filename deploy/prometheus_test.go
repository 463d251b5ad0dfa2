package deploy_test

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
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

// runbookBase is where every alert's runbook_url points: docs/runbooks.md on GitHub,
// which shows the page of the repository and jumps to the section the anchor names.
const runbookBase = "https://github.com/toolbus/toolbus/blob/main/docs/runbooks.md#"

type alertRule struct {
	Alert       string            `yaml:"alert"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// alertRules returns the alert rules of alerts.yml.
func alertRules(t *testing.T) []alertRule {
	t.Helper()
	var f struct {
		Groups []struct {
			Rules []alertRule `yaml:"rules"`
		} `yaml:"groups"`
	}
	readYAML(t, "prometheus/alerts.yml", &f)
	var rules []alertRule
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				rules = append(rules, r)
			}
		}
	}
	if len(rules) == 0 {
		t.Fatal("alerts.yml has no alert")
	}
	return rules
}

// TestEveryAlertTestedWithRunbook: alerts_test.yml makes every alert of alerts.yml fire
// at least once (and so checks its labels and annotations), and every alert has a
// severity and a runbook_url whose anchor is a section of docs/runbooks.md.
func TestEveryAlertTestedWithRunbook(t *testing.T) {
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	readYAML(t, "prometheus/alerts_test.yml", &tests)
	fires := map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			fires[a.Alertname] = fires[a.Alertname] || len(a.ExpAlerts) > 0
		}
	}
	sections := markdownAnchors(t, "../docs/runbooks.md")
	for _, r := range alertRules(t) {
		if !fires[r.Alert] {
			t.Errorf("%s: no test of alerts_test.yml expects it to fire", r.Alert)
		}
		if r.Labels["severity"] == "" {
			t.Errorf("%s: no severity label", r.Alert)
		}
		url := r.Annotations["runbook_url"]
		anchor, ok := strings.CutPrefix(url, runbookBase)
		if !ok {
			t.Errorf("%s: runbook_url %q does not start with %s", r.Alert, url, runbookBase)
			continue
		}
		if !sections[anchor] {
			t.Errorf("%s: runbook_url's anchor #%s is no section of docs/runbooks.md (%v)", r.Alert, anchor, slices.Sorted(maps.Keys(sections)))
		}
	}
}

// markdownAnchors returns the anchors GitHub gives the headings of a Markdown page.
func markdownAnchors(t *testing.T, file string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	fenced := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		heading := strings.TrimSpace(strings.TrimLeft(line, "#"))
		anchors[githubAnchor(heading)] = true
	}
	return anchors
}

// githubAnchor is the fragment GitHub gives a heading: lower case, punctuation dropped,
// spaces as hyphens.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
