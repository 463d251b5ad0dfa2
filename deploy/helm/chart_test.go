package helm_test

import (
	"encoding/json"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// The NATS users of deploy/nats.conf, whose passwords the chart's Secret holds, and the
// variables nats.conf reads them from (deploy.PasswordVar).
var users = []string{"sys", "admin", "parser", "executor", "formatter", "healthd", "console", "orchestrator"}

func passwordVar(user string) string {
	return "TOOLBUS_" + strings.ToUpper(strings.ReplaceAll(user, "-", "_")) + "_PASSWORD"
}

// stages are the services with an ops server; each runs its own binary as its own user.
var stages = []string{"parser", "executor", "formatter", "healthd"}

// Each case renders the chart with its values; every case passes checkAll, and its own
// check.
var cases = []struct {
	name, values string
	check        func(t *testing.T, r *rendered)
}{
	{name: "default", values: "{}", check: func(t *testing.T, r *rendered) {
		sec := r.Secrets["toolbus-nats-users"]
		if sec == nil {
			t.Fatal("no Secret toolbus-nats-users")
		}
		var want []string
		for _, u := range users {
			want = append(want, passwordVar(u))
		}
		if got := slices.Sorted(maps.Keys(sec.Data)); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
			t.Errorf("the Secret's keys are %v, want the variables of nats.conf %v", got, want)
		}
		for k, v := range sec.Data {
			if len(v) < 32 || v[0] < 'a' || v[0] > 'z' {
				t.Errorf("%s = %q: want 32 characters or more, a letter first", k, v)
			}
		}
		if got := envOf(r.Deployments["toolbus-executor"], "TOOLBUS_NATS_URL"); got != "nats://executor:$(TOOLBUS_EXECUTOR_PASSWORD)@nats:4222" {
			t.Errorf("the executor's TOOLBUS_NATS_URL is %q", got)
		}
		if len(r.HPAs) != 3 || len(r.ScaledObjects) != 0 {
			t.Errorf("%d HPAs and %d ScaledObjects without KEDA, want 3 and 0", len(r.HPAs), len(r.ScaledObjects))
		}
		for name, np := range r.NetworkPolicies {
			to := np.Spec.Egress[0].To
			if len(to) != 1 || to[0].PodSelector == nil || to[0].PodSelector.MatchLabels["app.kubernetes.io/name"] != "nats" || to[0].NamespaceSelector != nil ||
				np.Spec.Egress[0].Ports[0].Port.IntValue() != 4222 {
				t.Errorf("%s: egress to NATS %+v, want the NATS chart's pods in this namespace on 4222", name, np.Spec.Egress[0])
			}
		}
		hpa := r.HPAs["toolbus-executor"]
		if m := hpa.Spec.Metrics[0].External; m == nil || m.Metric.Name != "toolbus_consumer_pending" || m.Metric.Selector.MatchLabels["consumer"] != "executor" ||
			m.Target.AverageValue.String() != "10" {
			t.Errorf("the executor's HPA metric is %+v, want toolbus_consumer_pending{consumer=executor} at 10 per replica", hpa.Spec.Metrics)
		}
		if g := r.Deployments["toolbus-executor"].Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g < 60 {
			t.Errorf("the executor's terminationGracePeriodSeconds is %v: shorter than the default call budget, 60s", g)
		}
		dash := r.ConfigMaps["toolbus-dashboard"]
		if dash == nil {
			t.Fatal("no dashboard ConfigMap")
		}
		file, err := os.ReadFile("../grafana/dashboards/toolbus.json")
		if err != nil {
			t.Fatal(err)
		}
		if dash.Data["toolbus.json"] != string(file) {
			t.Error("the dashboard ConfigMap is not deploy/grafana/dashboards/toolbus.json")
		}
		if len(r.ServiceMonitors)+len(r.PrometheusRules) != 0 {
			t.Error("a ServiceMonitor or PrometheusRule without the Prometheus operator asked for")
		}
	}},
	{name: "external NATS", values: `
nats:
  urls: ["nats://nats-a.example.com:4222", "tls://nats-b.example.com:4222"]
  monitoringEndpoint: nats-a.example.com:8222
  streamReplicas: 1
  egressTo: [{ipBlock: {cidr: 10.20.0.0/16}}]
credentials:
  existingSecret: my-nats-users
console:
  enabled: false
`, check: func(t *testing.T, r *rendered) {
		if len(r.Secrets) != 0 {
			t.Errorf("Secrets %v rendered with credentials.existingSecret and no console", slices.Collect(maps.Keys(r.Secrets)))
		}
		if _, ok := r.Deployments["toolbus-console"]; ok {
			t.Error("a console with console.enabled false")
		}
		want := "nats://parser:$(TOOLBUS_PARSER_PASSWORD)@nats-a.example.com:4222,tls://parser:$(TOOLBUS_PARSER_PASSWORD)@nats-b.example.com:4222"
		if got := envOf(r.Deployments["toolbus-parser"], "TOOLBUS_NATS_URL"); got != want {
			t.Errorf("TOOLBUS_NATS_URL %q, want %q", got, want)
		}
		for _, d := range r.Deployments {
			for _, e := range d.Spec.Template.Spec.Containers[0].Env {
				if ref := e.ValueFrom; ref != nil && ref.SecretKeyRef != nil && strings.HasSuffix(e.Name, "_PASSWORD") && ref.SecretKeyRef.Name != "my-nats-users" {
					t.Errorf("%s: %s from Secret %s, want my-nats-users", d.Name, e.Name, ref.SecretKeyRef.Name)
				}
			}
			if !slices.Contains(d.Spec.Template.Spec.Containers[0].Command, "--stream-replicas=1") {
				t.Errorf("%s: %v, want --stream-replicas=1", d.Name, d.Spec.Template.Spec.Containers[0].Command)
			}
		}
		for name, np := range r.NetworkPolicies {
			if to := np.Spec.Egress[0].To; len(to) != 1 || to[0].IPBlock == nil || to[0].IPBlock.CIDR != "10.20.0.0/16" || to[0].PodSelector != nil {
				t.Errorf("%s: egress to NATS %+v, want the ipBlock of nats.egressTo", name, to)
			}
		}
	}},
	{name: "two tenants", values: `
config:
  tenants:
    acme: {maxBytes: 1073741824}
    globex-west: {}
autoscaling:
  keda: {enabled: true}
`, check: func(t *testing.T, r *rendered) {
		sec := r.Secrets["toolbus-nats-users"]
		for _, v := range []string{"TOOLBUS_ACME_PASSWORD", "TOOLBUS_GLOBEX_WEST_PASSWORD"} {
			if _, ok := sec.Data[v]; !ok {
				t.Errorf("no %s in the Secret", v)
			}
		}
		var cfg struct {
			Tenants map[string]json.RawMessage `json:"tenants"`
		}
		if err := json.Unmarshal([]byte(r.ConfigMaps["toolbus-config"].Data["toolbus.json"]), &cfg); err != nil {
			t.Fatal(err)
		}
		if len(cfg.Tenants) != 2 {
			t.Errorf("toolbus.json has tenants %v", cfg.Tenants)
		}
		var streams []string
		for _, tr := range r.ScaledObjects["toolbus-parser"].Spec.Triggers {
			streams = append(streams, tr.Metadata["stream"])
		}
		want := []string{"TOOLBUS_RESPONSES", "TOOLBUS_STREAM", "TOOLBUS_RESPONSES_acme", "TOOLBUS_STREAM_acme", "TOOLBUS_RESPONSES_globex-west", "TOOLBUS_STREAM_globex-west"}
		if !slices.Equal(streams, want) {
			t.Errorf("the parser scales on streams %v, want %v", streams, want)
		}
	}},
	{name: "KEDA", values: `
autoscaling:
  keda: {enabled: true, pollingInterval: 5, cooldownPeriod: 120}
executor:
  autoscaling: {enabled: true, minReplicas: 1, maxReplicas: 40, lagThreshold: 4}
nats:
  monitoringEndpoint: nats-headless.messaging.svc.cluster.local:8222
`, check: func(t *testing.T, r *rendered) {
		if len(r.HPAs) != 0 || len(r.ScaledObjects) != 3 {
			t.Fatalf("%d HPAs and %d ScaledObjects with KEDA, want 0 and 3", len(r.HPAs), len(r.ScaledObjects))
		}
		so := r.ScaledObjects["toolbus-executor"]
		if *so.Spec.MinReplicaCount != 1 || *so.Spec.MaxReplicaCount != 40 || *so.Spec.PollingInterval != 5 || *so.Spec.CooldownPeriod != 120 {
			t.Errorf("the executor's ScaledObject: %+v", so.Spec)
		}
		want := map[string]string{"natsServerMonitoringEndpoint": "nats-headless.messaging.svc.cluster.local:8222", "account": "TOOLBUS",
			"stream": "TOOLBUS_CALLS", "consumer": "executor", "lagThreshold": "4", "activationLagThreshold": "0", "useHttps": "false"}
		if len(so.Spec.Triggers) != 1 || so.Spec.Triggers[0].Type != "nats-jetstream" || !maps.Equal(so.Spec.Triggers[0].Metadata, want) {
			t.Errorf("the executor's trigger is %+v, want nats-jetstream %v", so.Spec.Triggers, want)
		}
		if tr := r.ScaledObjects["toolbus-formatter"].Spec.Triggers; len(tr) != 1 || tr[0].Metadata["stream"] != "TOOLBUS_RESULTS" || tr[0].Metadata["consumer"] != "formatter" {
			t.Errorf("the formatter's triggers: %+v", tr)
		}
	}},
	{name: "fixed replicas and no policies", values: `
parser: {replicas: 3, autoscaling: {enabled: false, minReplicas: 1, maxReplicas: 1, lagThreshold: 1}}
executor: {replicas: 5, autoscaling: {enabled: false, minReplicas: 1, maxReplicas: 1, lagThreshold: 1}}
formatter: {replicas: 1, autoscaling: {enabled: false, minReplicas: 1, maxReplicas: 1, lagThreshold: 1}}
networkPolicy: {enabled: false}
podDisruptionBudget: {enabled: false}
metrics: {dashboard: {enabled: false}}
`, check: func(t *testing.T, r *rendered) {
		if len(r.HPAs)+len(r.ScaledObjects)+len(r.NetworkPolicies)+len(r.PDBs) != 0 {
			t.Errorf("%d HPAs, %d ScaledObjects, %d NetworkPolicies, %d PDBs: want none", len(r.HPAs), len(r.ScaledObjects), len(r.NetworkPolicies), len(r.PDBs))
		}
		for name, want := range map[string]int32{"toolbus-parser": 3, "toolbus-executor": 5, "toolbus-formatter": 1, "toolbus-healthd": 2} {
			if got := r.Deployments[name].Spec.Replicas; got == nil || *got != want {
				t.Errorf("%s: replicas %v, want %d", name, got, want)
			}
		}
		if _, ok := r.ConfigMaps["toolbus-dashboard"]; ok {
			t.Error("a dashboard with metrics.dashboard.enabled false")
		}
	}},
	{name: "monitoring and secrets", values: `
metrics:
  serviceMonitor: {enabled: true, labels: {release: prom}}
  prometheusRule: {enabled: true}
secretEnv:
  GITHUB_TOKEN: {name: github, key: token}
tokenKeySecret: {name: toolbus-oauth, key: key}
otlp:
  endpoint: http://otel-collector.observability:4318
longestCallSeconds: 600
config:
  timeout: 10m
  mcpServers:
    github: {type: http, url: "https://api.githubcopilot.com/mcp/", headers: {Authorization: "Bearer ${GITHUB_TOKEN}"}}
`, check: func(t *testing.T, r *rendered) {
		sm := r.ServiceMonitors["toolbus"]
		if sm == nil || sm.Spec.JobLabel != "toolbus.dev/job" || sm.Labels["release"] != "prom" {
			t.Fatalf("ServiceMonitor: %+v", sm)
		}
		for _, s := range stages {
			if job := r.Services["toolbus-"+s].Labels["toolbus.dev/job"]; job != "toolbus-"+s {
				t.Errorf("Service toolbus-%s: job label %q, want the job of deploy/prometheus's rules, toolbus-%s", s, job, s)
			}
		}
		pr := r.PrometheusRules["toolbus"]
		if pr == nil {
			t.Fatal("no PrometheusRule")
		}
		file, err := os.ReadFile("../prometheus/alerts.yml")
		if err != nil {
			t.Fatal(err)
		}
		var rules struct {
			Groups any `json:"groups"`
		}
		if err := yaml.UnmarshalStrict(file, &rules); err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal(pr.Spec)
		var gotAny struct {
			Groups any `json:"groups"`
		}
		json.Unmarshal(got, &gotAny)
		if !reflect.DeepEqual(normalize(gotAny.Groups), normalize(rules.Groups)) {
			t.Errorf("the PrometheusRule's groups are not deploy/prometheus/alerts.yml's:\n%s", got)
		}
		for _, name := range []string{"toolbus-executor", "toolbus-healthd"} {
			if e := envRef(r.Deployments[name], "GITHUB_TOKEN"); e == nil || e.Name != "github" || e.Key != "token" {
				t.Errorf("%s: GITHUB_TOKEN from %+v, want Secret github's token", name, e)
			}
			if e := envRef(r.Deployments[name], "TOOLBUS_TOKEN_KEY"); e == nil || e.Name != "toolbus-oauth" {
				t.Errorf("%s: TOOLBUS_TOKEN_KEY from %+v", name, e)
			}
		}
		if e := envRef(r.Deployments["toolbus-parser"], "GITHUB_TOKEN"); e != nil {
			t.Error("the parser is given the MCP servers' secrets")
		}
		if got := envOf(r.Deployments["toolbus-executor"], "OTEL_EXPORTER_OTLP_ENDPOINT"); got != "http://otel-collector.observability:4318" {
			t.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT %q", got)
		}
		if got := envOf(r.Deployments["toolbus-executor"], "OTEL_SERVICE_NAME"); got != "toolbus-executor" {
			t.Errorf("OTEL_SERVICE_NAME %q", got)
		}
		if g := *r.Deployments["toolbus-executor"].Spec.Template.Spec.TerminationGracePeriodSeconds; g < 600 {
			t.Errorf("terminationGracePeriodSeconds %d, shorter than longestCallSeconds 600", g)
		}
		if cm := r.ConfigMaps["toolbus-config"].Data["toolbus.json"]; !strings.Contains(cm, "${GITHUB_TOKEN}") {
			t.Errorf("toolbus.json lost its ${GITHUB_TOKEN}: %s", cm)
		}
	}},
}

// normalize turns numbers into float64 and maps into map[string]any, as JSON does.
func normalize(v any) any {
	b, _ := json.Marshal(v)
	var out any
	json.Unmarshal(b, &out)
	return out
}

func TestChart(t *testing.T) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := render(t, c.values)
			checkAll(t, r)
			c.check(t, r)
		})
	}
}

func envOf(d interface{ GetName() string }, name string) string {
	for _, e := range podSpec(d).Containers[0].Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func envRef(d interface{ GetName() string }, name string) *corev1.SecretKeySelector {
	for _, e := range podSpec(d).Containers[0].Env {
		if e.Name == name && e.ValueFrom != nil {
			return e.ValueFrom.SecretKeyRef
		}
	}
	return nil
}
