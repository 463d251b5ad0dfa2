package helm_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// helm lint --strict finds nothing to say, for the default values and each case's.
func TestLint(t *testing.T) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := helm(t, "lint", "--strict", chart, "-f", valuesFile(t, c.values))
			if err != nil {
				t.Fatalf("helm lint --strict: %v\n%s", err, out)
			}
			if strings.Contains(out, "[WARNING]") || strings.Contains(out, "[ERROR]") {
				t.Errorf("helm lint --strict:\n%s", out)
			}
		})
	}
}

// Wrong values are refused, by the schema with a message that names what is wrong.
func TestSchemaRefusesWrongValues(t *testing.T) {
	for _, tc := range []struct {
		name, values, wantErr string
	}{
		{"a password in a NATS URL", `nats: {urls: ["nats://executor:secret@nats:4222"]}`, "/nats/urls/0"},
		{"no NATS URL", `nats: {urls: []}`, "/nats/urls"},
		{"a URL of another scheme", `nats: {urls: ["http://nats:4222"]}`, "/nats/urls/0"},
		{"a monitoring endpoint with a scheme", `nats: {monitoringEndpoint: "http://nats:8222"}`, "/nats/monitoringEndpoint"},
		{"two stream replicas", `nats: {streamReplicas: 2}`, "/nats/streamReplicas"},
		{"an unknown value", `executorr: {replicas: 3}`, "executorr"},
		{"an unknown stage value", `executor: {replica: 3}`, "replica"},
		{"a lag threshold of zero", `executor: {autoscaling: {enabled: true, minReplicas: 1, maxReplicas: 3, lagThreshold: 0}}`, "/executor/autoscaling/lagThreshold"},
		{"replicas as a string", `parser: {replicas: "2"}`, "/parser/replicas"},
		{"a tenant named like a service user", `config: {tenants: {executor: {}}}`, "executor"},
		{"a tenant name in capitals", `config: {tenants: {Acme: {}}}`, "Acme"},
		{"root", `podSecurityContext: {runAsNonRoot: false, runAsUser: 0}`, "/podSecurityContext"},
		{"a writable root filesystem", `securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: false}`, "/securityContext/readOnlyRootFilesystem"},
		{"no limits", `executor: {resources: {limits: null}}`, "/executor/resources"},
		{"a secretEnv without its key", `secretEnv: {TOKEN: {name: s}}`, "/secretEnv/TOKEN"},
		{"an OTLP protocol toolbus does not speak", `otlp: {endpoint: "http://c:4318", protocol: thrift}`, "/otlp/protocol"},
		{"an ops port below 1024", `opsPort: 80`, "/opsPort"},
		{"a pull policy misspelt", `image: {pullPolicy: always}`, "/image/pullPolicy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := helm(t, "template", release, chart, "-f", valuesFile(t, tc.values))
			if err == nil {
				t.Fatalf("accepted:\n%.300s", out)
			}
			msg := err.Error()
			if !strings.Contains(msg, "don't meet the specifications of the schema") || !strings.Contains(msg, tc.wantErr) {
				t.Errorf("refused, but not by the schema naming %q: %v", tc.wantErr, msg)
			}
		})
	}
}

// The chart's copies of deploy/prometheus/alerts.yml and the Grafana dashboard are the
// files themselves (a chart reads no file outside its folder).
func TestChartFilesAreDeploys(t *testing.T) {
	for copy, orig := range map[string]string{
		"toolbus/files/alerts.yml":             "../prometheus/alerts.yml",
		"toolbus/files/toolbus-dashboard.json": "../grafana/dashboards/toolbus.json",
	} {
		a, err := os.ReadFile(copy)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(orig)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs from deploy/%s: cp deploy/%[2]s deploy/helm/%[1]s", copy, strings.TrimPrefix(orig, "../"))
		}
	}
}

// nats-values.yaml, for the official NATS chart, names what toolbus's chart makes for a
// release called toolbus: the credentials Secret, the config ConfigMap and the image;
// and the accounts file its init container writes is the one the NATS configuration
// includes.
func TestNATSValues(t *testing.T) {
	r := render(t, "{}")
	data, err := os.ReadFile("nats-values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Config struct {
			Cluster struct {
				Enabled  bool `json:"enabled"`
				Replicas int  `json:"replicas"`
			} `json:"cluster"`
			JetStream struct {
				Enabled   bool `json:"enabled"`
				FileStore struct {
					Enabled bool `json:"enabled"`
				} `json:"fileStore"`
			} `json:"jetstream"`
			Merge map[string]any `json:"merge"`
		} `json:"config"`
		Container struct {
			Merge struct {
				EnvFrom []struct {
					SecretRef struct {
						Name string `json:"name"`
					} `json:"secretRef"`
				} `json:"envFrom"`
			} `json:"merge"`
			Patch []patch `json:"patch"`
		} `json:"container"`
		PodTemplate struct {
			Patch []patch `json:"patch"`
		} `json:"podTemplate"`
	}
	// The NATS chart's values, of which these are a few: not strictly.
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	if !v.Config.Cluster.Enabled || v.Config.Cluster.Replicas != 3 || !v.Config.JetStream.Enabled || !v.Config.JetStream.FileStore.Enabled {
		t.Errorf("NATS: cluster %+v, JetStream %+v; want 3 replicas, JetStream on file storage", v.Config.Cluster, v.Config.JetStream)
	}
	if len(v.Container.Merge.EnvFrom) != 1 || r.Secrets[v.Container.Merge.EnvFrom[0].SecretRef.Name] == nil {
		t.Errorf("NATS reads its passwords from %+v, not the chart's Secret", v.Container.Merge.EnvFrom)
	}
	var init corev1.Container // strictly: a field Kubernetes does not know fails
	volumes := map[string]map[string]any{}
	for _, p := range v.PodTemplate.Patch {
		switch p.Path {
		case "/spec/volumes/-":
			var vol map[string]any
			yaml.Unmarshal(p.Value, &vol)
			volumes[vol["name"].(string)] = vol
		case "/spec/initContainers":
			var list []json.RawMessage
			if err := yaml.Unmarshal(p.Value, &list); err != nil || len(list) != 1 {
				t.Fatalf("initContainers: %v", err)
			}
			if err := yaml.UnmarshalStrict(list[0], &init); err != nil {
				t.Fatal(err)
			}
		}
	}
	if cm, _ := volumes["toolbus-config"]["configMap"].(map[string]any); cm == nil || r.ConfigMaps[cm["name"].(string)] == nil {
		t.Errorf("the NATS pods mount ConfigMap %v, not the chart's", volumes["toolbus-config"])
	}
	if want := r.Deployments["toolbus-executor"].Spec.Template.Spec.Containers[0].Image; init.Image != want {
		t.Errorf("the init container runs %s, the chart %s", init.Image, want)
	}
	if len(init.Command) < 3 || init.Command[0] != "toolbus" || init.Command[1] != "nats-conf" || !contains(init.Command, "--accounts") {
		t.Fatalf("the init container runs %v, not toolbus nats-conf --accounts", init.Command)
	}
	var output, config string
	for _, a := range init.Command {
		if o, ok := strings.CutPrefix(a, "--output="); ok {
			output = o
		}
		if c, ok := strings.CutPrefix(a, "--config="); ok {
			config = c
		}
	}
	mounts := map[string]string{}
	for _, m := range init.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	if path.Dir(config) != mounts["toolbus-config"] || path.Base(config) != "toolbus.json" {
		t.Errorf("the init container reads %s; the config is at %s/toolbus.json", config, mounts["toolbus-config"])
	}
	if path.Dir(output) != mounts["toolbus-nats"] {
		t.Errorf("the init container writes %s, outside its volume %s", output, mounts["toolbus-nats"])
	}
	// The NATS chart's configuration is /etc/nats-config/nats.conf; includes are
	// relative to it.
	include, _ := v.Config.Merge["$include"].(string)
	var natsMount string
	for _, p := range v.Container.Patch {
		var m struct {
			Name      string `json:"name"`
			MountPath string `json:"mountPath"`
		}
		yaml.Unmarshal(p.Value, &m)
		if p.Path == "/volumeMounts/-" && m.Name == "toolbus-nats" {
			natsMount = m.MountPath
		}
	}
	if got := path.Join("/etc/nats-config", include); got != path.Join(natsMount, path.Base(output)) {
		t.Errorf("NATS includes %s; the accounts are at %s in the NATS container", got, path.Join(natsMount, path.Base(output)))
	}
}

type patch struct {
	Op    string          `json:"op"`
	Path  string          `json:"path"`
	Value json.RawMessage `json:"value"`
}
