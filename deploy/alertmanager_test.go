package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const alertmanagerFile = "alertmanager/alertmanager.yml"

// receivers are where each severity of alerts.yml must go.
var receivers = map[string]string{"page": "pager", "warn": "ticket"}

type amRoute struct {
	Receiver string    `yaml:"receiver"`
	Matchers []string  `yaml:"matchers"`
	Routes   []amRoute `yaml:"routes"`
}

type amConfig struct {
	Route     amRoute `yaml:"route"`
	Receivers []struct {
		Name           string `yaml:"name"`
		WebhookConfigs []struct {
			URL     string `yaml:"url"`
			URLFile string `yaml:"url_file"`
		} `yaml:"webhook_configs"`
	} `yaml:"receivers"`
}

// alertmanagerURLFiles returns the files the webhook receivers read their URLs from.
func alertmanagerURLFiles(t *testing.T) []string {
	t.Helper()
	var c amConfig
	readYAML(t, alertmanagerFile, &c)
	var files []string
	for _, r := range c.Receivers {
		for _, w := range r.WebhookConfigs {
			if w.URL != "" || w.URLFile == "" {
				t.Errorf("%s: receiver %s has its URL in the file, not in url_file", alertmanagerFile, r.Name)
			}
			files = append(files, w.URLFile)
		}
	}
	return files
}

// amtool finds Alertmanager's amtool (PATH, ../.cache/bin, $GOPATH/bin), or "".
func amtool(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("amtool"); err == nil {
		return p
	}
	if p, err := filepath.Abs("../.cache/bin/amtool"); err == nil && fileExists(p) {
		return p
	}
	gopath, _ := exec.Command("go", "env", "GOPATH").Output()
	if p := filepath.Join(strings.TrimSpace(string(gopath)), "bin", "amtool"); fileExists(p) {
		return p
	}
	return ""
}

// TestAlertmanagerConfig: every severity the alerts use is routed to its receiver by a
// route of its own, and every receiver exists; with amtool at hand (`go install
// github.com/prometheus/alertmanager/cmd/amtool@v0.34.1`, the image's version), the file
// is valid and each alert, with its labels, reaches its receiver.
func TestAlertmanagerConfig(t *testing.T) {
	var c amConfig
	readYAML(t, alertmanagerFile, &c)
	var names []string
	for _, r := range c.Receivers {
		names = append(names, r.Name)
	}
	if !slices.Contains(names, c.Route.Receiver) {
		t.Errorf("the default receiver %q is not defined (%v)", c.Route.Receiver, names)
	}
	routed := map[string]string{}
	for _, r := range c.Route.Routes {
		if !slices.Contains(names, r.Receiver) {
			t.Errorf("route %v: receiver %q is not defined (%v)", r.Matchers, r.Receiver, names)
		}
		for _, m := range r.Matchers {
			if v, ok := strings.CutPrefix(m, `severity="`); ok {
				routed[strings.TrimSuffix(v, `"`)] = r.Receiver
			}
		}
	}
	rules := alertRules(t)
	for _, r := range rules {
		sev := r.Labels["severity"]
		if want, ok := receivers[sev]; !ok || routed[sev] != want {
			t.Errorf("%s: severity %q is routed to %q, want %q", r.Alert, sev, routed[sev], receivers[sev])
		}
	}

	bin := amtool(t)
	if bin == "" {
		if os.Getenv("TOOLBUS_REQUIRE_AMTOOL") != "" {
			t.Fatal("amtool not found (TOOLBUS_REQUIRE_AMTOOL is set)")
		}
		t.Skip("amtool not found: the routes were checked from the file alone")
	}
	if out, err := exec.Command(bin, "check-config", alertmanagerFile).CombinedOutput(); err != nil {
		t.Fatalf("amtool check-config: %v\n%s", err, out)
	}
	for _, r := range rules {
		args := []string{"config", "routes", "test", "--config.file=" + alertmanagerFile, "alertname=" + r.Alert}
		for k, v := range r.Labels {
			args = append(args, k+"="+v)
		}
		out, err := exec.Command(bin, args...).CombinedOutput()
		if got := strings.TrimSpace(string(out)); err != nil || got != receivers[r.Labels["severity"]] {
			t.Errorf("amtool %s: %v: %s, want %s", strings.Join(args, " "), err, got, receivers[r.Labels["severity"]])
		}
	}
}
