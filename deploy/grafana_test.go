package deploy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v4"
)

const (
	dashboardFile  = "grafana/dashboards/toolbus.json"
	datasourceFile = "grafana/provisioning/datasources/prometheus.yml"
	providerFile   = "grafana/provisioning/dashboards/toolbus.yml"
)

// dataSource is a Grafana data source reference, as a panel or target names it.
type dataSource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type panel struct {
	ID         int         `json:"id"`
	Type       string      `json:"type"`
	Title      string      `json:"title"`
	Datasource *dataSource `json:"datasource"`
	Targets    []struct {
		RefID      string      `json:"refId"`
		Datasource *dataSource `json:"datasource"`
		Expr       string      `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

// dashboardPanels loads the dashboard and returns its panels, rows left out and the
// panels of collapsed rows included.
func dashboardPanels(t *testing.T) []panel {
	t.Helper()
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID    string  `json:"uid"`
		Title  string  `json:"title"`
		Panels []panel `json:"panels"`
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("%s: no uid or title", dashboardFile)
	}
	var out []panel
	for _, p := range d.Panels {
		if p.Type == "row" {
			out = append(out, p.Panels...)
			continue
		}
		out = append(out, p)
	}
	return out
}

// provisionedDataSource returns the one data source Grafana is given.
func provisionedDataSource(t *testing.T) (uid, typ, url string) {
	t.Helper()
	var f struct {
		APIVersion  int `yaml:"apiVersion"`
		Datasources []struct {
			Name, UID, Type, URL, Access string
			IsDefault                    bool `yaml:"isDefault"`
		} `yaml:"datasources"`
	}
	readYAML(t, datasourceFile, &f)
	if f.APIVersion != 1 || len(f.Datasources) != 1 {
		t.Fatalf("%s: want apiVersion 1 and one data source, got %+v", datasourceFile, f)
	}
	ds := f.Datasources[0]
	if ds.Access != "proxy" || !ds.IsDefault {
		t.Errorf("%s: %s is not the default, proxied data source", datasourceFile, ds.Name)
	}
	return ds.UID, ds.Type, ds.URL
}

func readYAML(t *testing.T, file string, v any) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// grafanaVars are the variables Grafana puts into a query before Prometheus sees it,
// each with a value of its kind; no other $ may appear in a panel's query.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")

// TestGrafanaDashboard: the dashboard loads; every panel reads the provisioned
// Prometheus and has a query; every query parses with Prometheus's own parser (promtool,
// each written as a recording rule) and reads only metrics a running toolbus exports.
func TestGrafanaDashboard(t *testing.T) {
	panels := dashboardPanels(t)
	uid, typ, _ := provisionedDataSource(t)
	if typ != "prometheus" {
		t.Fatalf("%s: the data source is %s, not prometheus", datasourceFile, typ)
	}
	want := dataSource{Type: typ, UID: uid}

	type query struct{ where, expr string }
	var queries []query
	for _, p := range panels {
		where := fmt.Sprintf("panel %d %q", p.ID, p.Title)
		if p.Datasource == nil || *p.Datasource != want {
			t.Errorf("%s: data source %+v, want the provisioned %+v", where, p.Datasource, want)
		}
		if len(p.Targets) == 0 {
			t.Errorf("%s: no query", where)
		}
		for _, q := range p.Targets {
			if q.Datasource != nil && *q.Datasource != want {
				t.Errorf("%s, query %s: data source %+v, want %+v", where, q.RefID, q.Datasource, want)
			}
			expr := grafanaVars.Replace(q.Expr)
			if strings.TrimSpace(expr) == "" || strings.Contains(expr, "$") {
				t.Errorf("%s, query %s: %q is empty or uses a variable the dashboard does not define", where, q.RefID, q.Expr)
				continue
			}
			queries = append(queries, query{where + ", query " + q.RefID, expr})
		}
	}
	if len(panels) < 10 || len(queries) < len(panels) {
		t.Fatalf("%d panels, %d queries", len(panels), len(queries))
	}

	// Prometheus's parser: each query as a recording rule, checked by promtool.
	type rule struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rules []rule
	for i, q := range queries {
		rules = append(rules, rule{Record: fmt.Sprintf("dashboard:query_%d", i), Expr: q.expr})
	}
	data, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool(t), "check", "rules", file).CombinedOutput(); err != nil {
		t.Errorf("promtool check rules (the dashboard's queries): %v\n%s", err, out)
		for i, q := range queries {
			t.Logf("dashboard:query_%d = %s: %s", i, q.where, q.expr)
		}
	}

	// Every metric a query reads is one toolbus exports.
	exported := exportedMetrics(t)
	used := map[string]bool{}
	for _, q := range queries {
		names := promqlMetrics(q.expr)
		if len(names) == 0 {
			t.Errorf("%s: reads no metric: %s", q.where, q.expr)
		}
		for _, n := range names {
			used[n] = true
			if !exported[n] {
				t.Errorf("%s reads %s, which toolbus does not export", q.where, n)
			}
		}
	}
	// What the issue asks the dashboard to show, each by the metric that tells it.
	for _, m := range []string{"toolbus_messages_total", "toolbus_consumer_pending", "toolbus_calls_total",
		"toolbus_call_duration_seconds_bucket", "toolbus_server_up", "toolbus_breaker_open", "toolbus_retries_total",
		"toolbus_dead_letters", "toolbus_mcp_sessions"} {
		if !used[m] {
			t.Errorf("no panel reads %s", m)
		}
	}
}

var (
	promqlStrings  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	promqlMatchers = regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]`)
	promqlLabels   = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promqlIdent    = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
	promqlKeywords = []string{"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
		"group_left", "group_right", "inf", "nan", "start", "end", "atan2"}
)

// promqlMetrics returns the metric names a PromQL expression reads: what is left of its
// identifiers once strings, label matchers, ranges, grouping labels, function and
// aggregation names, keywords and numbers are taken away.
func promqlMetrics(expr string) []string {
	expr = promqlStrings.ReplaceAllString(expr, `""`)
	expr = promqlMatchers.ReplaceAllString(expr, " ")
	expr = promqlLabels.ReplaceAllString(expr, " ")
	var names []string
	for _, loc := range promqlIdent.FindAllStringIndex(expr, -1) {
		name := expr[loc[0]:loc[1]]
		if loc[0] > 0 && strings.ContainsAny(expr[loc[0]-1:loc[0]], "0123456789.") {
			continue // 1e3, 0x1f
		}
		if rest := strings.TrimLeft(expr[loc[1]:], " \t\n"); strings.HasPrefix(rest, "(") {
			continue // a function or an aggregation
		}
		if slices.Contains(promqlKeywords, strings.ToLower(name)) || slices.Contains(names, name) {
			continue
		}
		names = append(names, name)
	}
	return names
}

func TestPromQLMetrics(t *testing.T) {
	for _, tc := range []struct{ name, expr, want string }{
		{"quantile", `histogram_quantile(0.99, sum by (tool, le) (rate(toolbus_call_duration_seconds_bucket{job=~"a|b"}[5m])))`, "toolbus_call_duration_seconds_bucket"},
		{"ratio", `sum by (tool) (rate(a_total{outcome!="ok"}[1m])) / on (tool) group_left (server) sum without (x) (rate(b_total[1m])) > 1e3`, "a_total b_total"},
		{"keywords", `max(x) - min_over_time(x[10m]) > bool 0 and y offset 5m unless absent(z)`, "x y z"},
		{"string", `label_replace(up, "dst", "$1", "src", "(toolbus_.*)")`, "up"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := strings.Join(promqlMetrics(tc.expr), " "); got != tc.want {
				t.Errorf("promqlMetrics(%s) = %q, want %q", tc.expr, got, tc.want)
			}
		})
	}
}
