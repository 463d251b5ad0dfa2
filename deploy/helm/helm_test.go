package helm_test

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// chart is the chart under test, release is the release name its tests install.
const (
	chart   = "toolbus"
	release = "toolbus"
)

// helmBin finds helm: PATH, then the repository's .cache/bin, where
// scripts/install-test-tools builds it. Without it the tests are skipped, unless
// TOOLBUS_REQUIRE_TOOLS is set, as scripts/test does after installing it.
func helmBin(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("helm"); err == nil {
		return p
	}
	if p, err := filepath.Abs("../../.cache/bin/helm"); err == nil {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if os.Getenv("TOOLBUS_REQUIRE_TOOLS") != "" {
		t.Fatal("helm not found (TOOLBUS_REQUIRE_TOOLS is set): scripts/install-test-tools builds it")
	}
	t.Skip("helm not found: scripts/install-test-tools builds it into .cache/bin")
	return ""
}

// helm runs helm with args and returns its standard output, or its error with what it
// printed.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helmBin(t), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), &helmError{err: err, stderr: errb.String()}
	}
	return out.String(), nil
}

type helmError struct {
	err    error
	stderr string
}

func (e *helmError) Error() string { return e.err.Error() + ": " + e.stderr }

// valuesFile writes values (YAML) to a file for -f. Not under t.TempDir: helm splits
// -f at commas, which a test's name may hold.
func valuesFile(t *testing.T, values string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "toolbus-values")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	f := filepath.Join(dir, "values.yaml")
	if err := os.WriteFile(f, []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// scaledObject is KEDA's keda.sh/v1alpha1 ScaledObject, the fields the chart may set
// (KEDA's own module is far too large to depend on for them).
type scaledObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		ScaleTargetRef struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Name       string `json:"name"`
		} `json:"scaleTargetRef"`
		PollingInterval *int32 `json:"pollingInterval"`
		CooldownPeriod  *int32 `json:"cooldownPeriod"`
		MinReplicaCount *int32 `json:"minReplicaCount"`
		MaxReplicaCount *int32 `json:"maxReplicaCount"`
		Triggers        []struct {
			Type     string            `json:"type"`
			Name     string            `json:"name"`
			Metadata map[string]string `json:"metadata"`
		} `json:"triggers"`
	} `json:"spec"`
}

// rendered is what `helm template` printed, each object decoded into its type.
type rendered struct {
	Deployments     map[string]*appsv1.Deployment
	Services        map[string]*corev1.Service
	Secrets         map[string]*corev1.Secret
	ConfigMaps      map[string]*corev1.ConfigMap
	Jobs            map[string]*batchv1.Job
	NetworkPolicies map[string]*networkingv1.NetworkPolicy
	PDBs            map[string]*policyv1.PodDisruptionBudget
	HPAs            map[string]*autoscalingv2.HorizontalPodAutoscaler
	ScaledObjects   map[string]*scaledObject
	ServiceMonitors map[string]*monitoringv1.ServiceMonitor
	PrometheusRules map[string]*monitoringv1.PrometheusRule
	count           int
}

// decode decodes every document of a `helm template` output strictly (an unknown or
// duplicate field fails) into the type of its apiVersion and kind; a kind the chart
// should not make fails too.
func decode(t *testing.T, manifest string) *rendered {
	t.Helper()
	r := &rendered{
		Deployments: map[string]*appsv1.Deployment{}, Services: map[string]*corev1.Service{}, Secrets: map[string]*corev1.Secret{},
		ConfigMaps: map[string]*corev1.ConfigMap{}, Jobs: map[string]*batchv1.Job{}, NetworkPolicies: map[string]*networkingv1.NetworkPolicy{},
		PDBs: map[string]*policyv1.PodDisruptionBudget{}, HPAs: map[string]*autoscalingv2.HorizontalPodAutoscaler{},
		ScaledObjects: map[string]*scaledObject{}, ServiceMonitors: map[string]*monitoringv1.ServiceMonitor{},
		PrometheusRules: map[string]*monitoringv1.PrometheusRule{},
	}
	reader := k8syaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifest)))
	for {
		doc, err := reader.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
		if tm.Kind == "" {
			if strings.TrimSpace(stripComments(string(doc))) != "" {
				t.Fatalf("a document without a kind:\n%s", doc)
			}
			continue
		}
		var into any
		var name func() string
		switch tm.APIVersion + " " + tm.Kind {
		case "apps/v1 Deployment":
			o := &appsv1.Deployment{}
			into, name = o, func() string { r.Deployments[o.Name] = o; return o.Name }
		case "v1 Service":
			o := &corev1.Service{}
			into, name = o, func() string { r.Services[o.Name] = o; return o.Name }
		case "v1 Secret":
			o := &corev1.Secret{}
			into, name = o, func() string { r.Secrets[o.Name] = o; return o.Name }
		case "v1 ConfigMap":
			o := &corev1.ConfigMap{}
			into, name = o, func() string { r.ConfigMaps[o.Name] = o; return o.Name }
		case "batch/v1 Job":
			o := &batchv1.Job{}
			into, name = o, func() string { r.Jobs[o.Name] = o; return o.Name }
		case "networking.k8s.io/v1 NetworkPolicy":
			o := &networkingv1.NetworkPolicy{}
			into, name = o, func() string { r.NetworkPolicies[o.Name] = o; return o.Name }
		case "policy/v1 PodDisruptionBudget":
			o := &policyv1.PodDisruptionBudget{}
			into, name = o, func() string { r.PDBs[o.Name] = o; return o.Name }
		case "autoscaling/v2 HorizontalPodAutoscaler":
			o := &autoscalingv2.HorizontalPodAutoscaler{}
			into, name = o, func() string { r.HPAs[o.Name] = o; return o.Name }
		case "keda.sh/v1alpha1 ScaledObject":
			o := &scaledObject{}
			into, name = o, func() string { r.ScaledObjects[o.Name] = o; return o.Name }
		case "monitoring.coreos.com/v1 ServiceMonitor":
			o := &monitoringv1.ServiceMonitor{}
			into, name = o, func() string { r.ServiceMonitors[o.Name] = o; return o.Name }
		case "monitoring.coreos.com/v1 PrometheusRule":
			o := &monitoringv1.PrometheusRule{}
			into, name = o, func() string { r.PrometheusRules[o.Name] = o; return o.Name }
		default:
			t.Fatalf("the chart renders a %s %s, which no test decodes:\n%s", tm.APIVersion, tm.Kind, doc)
		}
		if err := yaml.UnmarshalStrict(doc, into); err != nil {
			t.Fatalf("%s %s does not decode strictly into its type: %v\n%s", tm.APIVersion, tm.Kind, err, doc)
		}
		if n := name(); n == "" {
			t.Fatalf("a %s without a name", tm.Kind)
		}
		r.count++
	}
	return r
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// render runs `helm template` on the chart with values (YAML) and decodes the result.
func render(t *testing.T, values string) *rendered {
	t.Helper()
	out, err := helm(t, "template", release, chart, "--namespace", "agents", "-f", valuesFile(t, values))
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	return decode(t, out)
}

// secretValues are the decoded values of every Secret rendered.
func (r *rendered) secretValues() []string {
	var vals []string
	for _, s := range r.Secrets {
		for _, v := range s.Data {
			vals = append(vals, string(v))
		}
		for _, v := range s.StringData {
			vals = append(vals, v)
		}
	}
	return vals
}
