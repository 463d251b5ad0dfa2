package helm_test

import (
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// podSpec is a Deployment's or a Job's pod.
func podSpec(o interface{ GetName() string }) *corev1.PodSpec {
	switch o := o.(type) {
	case *appsv1.Deployment:
		return &o.Spec.Template.Spec
	case *batchv1.Job:
		return &o.Spec.Template.Spec
	}
	panic("no pod")
}

// checkAll holds every rendering to what any values must give: hardened pods with
// resources, probes on the ports the commands open, credentials only from Secrets, and
// every reference (Secret, ConfigMap, Deployment, pods) to something rendered.
func checkAll(t *testing.T, r *rendered) {
	t.Helper()
	secrets := r.secretValues()
	for _, s := range stages {
		if r.Deployments["toolbus-"+s] == nil {
			t.Fatalf("no Deployment toolbus-%s", s)
		}
	}
	scaled := map[string]bool{}
	for _, h := range r.HPAs {
		scaled[h.Spec.ScaleTargetRef.Name] = true
	}
	for _, so := range r.ScaledObjects {
		scaled[so.Spec.ScaleTargetRef.Name] = true
	}
	for name := range scaled {
		if r.Deployments[name] == nil {
			t.Errorf("an autoscaler of %s, which is no Deployment", name)
		}
	}
	for name, d := range r.Deployments {
		component := strings.TrimPrefix(name, "toolbus-")
		if scaled[name] != (d.Spec.Replicas == nil) {
			t.Errorf("%s: replicas %v while autoscaled %v: an autoscaler owns the count, else the values do", name, d.Spec.Replicas, scaled[name])
		}
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("%s: its selector does not select its pods", name)
		}
		checkPod(t, r, d, secrets)
		c := d.Spec.Template.Spec.Containers[0]
		user := component
		if component == "console" {
			if len(c.Command) < 2 || c.Command[0] != "toolbus" || c.Command[1] != "console" {
				t.Errorf("%s runs %v", name, c.Command)
			}
		} else {
			if c.Command[0] != component {
				t.Errorf("%s runs %v, want its own binary, %s", name, c.Command, component)
			}
			ops := port(c, "ops")
			if !contains(c.Command, "--ops-addr=:"+strconv.Itoa(int(ops))) {
				t.Errorf("%s: %v does not open the ops port %d", name, c.Command, ops)
			}
			if c.LivenessProbe.HTTPGet.Path != "/healthz" || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
				t.Errorf("%s: probes on %s and %s, want /healthz and /readyz", name, c.LivenessProbe.HTTPGet.Path, c.ReadinessProbe.HTTPGet.Path)
			}
			switch pdb := r.PDBs[name]; {
			case pdb == nil && len(r.PDBs) > 0:
				t.Errorf("no PodDisruptionBudget of %s", name)
			case pdb != nil:
				if sel, _ := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
					t.Errorf("the PodDisruptionBudget of %s does not select its pods", name)
				}
			}
		}
		checkNATSUser(t, name, c, user)
		switch np := r.NetworkPolicies[name]; {
		case np == nil && len(r.NetworkPolicies) > 0: // none at all with networkPolicy.enabled false
			t.Errorf("no NetworkPolicy of %s", name)
		case np != nil:
			if sel, _ := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector); !sel.Matches(labels.Set(d.Spec.Template.Labels)) || len(np.Spec.PolicyTypes) != 2 {
				t.Errorf("the NetworkPolicy of %s does not hold its pods in and out", name)
			}
		}
	}
	for name, svc := range r.Services {
		d := r.Deployments[name]
		if d == nil || !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("Service %s selects no Deployment's pods", name)
			continue
		}
		for _, p := range svc.Spec.Ports {
			if port(d.Spec.Template.Spec.Containers[0], p.TargetPort.StrVal) == 0 {
				t.Errorf("Service %s: target port %v is not its pods'", name, p.TargetPort)
			}
		}
	}
	if job := r.Jobs["toolbus-provision"]; job == nil {
		t.Error("no provisioning Job")
	} else {
		c := job.Spec.Template.Spec.Containers[0]
		if len(c.Command) < 2 || c.Command[0] != "toolbus" || c.Command[1] != "provision" {
			t.Errorf("the provisioning Job runs %v", c.Command)
		}
		checkPod(t, r, job, secrets)
		checkNATSUser(t, job.Name, c, "admin")
		weight := hook(t, job.Annotations)
		for _, cm := range r.ConfigMaps {
			if cm.Name == "toolbus-config" && hook(t, cm.Annotations) >= weight {
				t.Error("the config ConfigMap is not made before the provisioning Job")
			}
		}
		if s := r.Secrets["toolbus-nats-users"]; s != nil && hook(t, s.Annotations) >= weight {
			t.Error("the credentials Secret is not made before the provisioning Job")
		}
	}
	for _, cm := range r.ConfigMaps {
		for _, v := range cm.Data {
			for _, s := range secrets {
				if strings.Contains(v, s) {
					t.Errorf("ConfigMap %s holds a secret in clear", cm.Name)
				}
			}
		}
	}
}

// hook is an object's pre-install hook weight; it fails when the object is no such hook.
func hook(t *testing.T, ann map[string]string) int {
	t.Helper()
	if !strings.Contains(ann["helm.sh/hook"], "pre-install") || !strings.Contains(ann["helm.sh/hook"], "pre-upgrade") {
		t.Errorf("not a pre-install, pre-upgrade hook: %v", ann)
	}
	w, err := strconv.Atoi(ann["helm.sh/hook-weight"])
	if err != nil {
		t.Errorf("hook weight %q", ann["helm.sh/hook-weight"])
	}
	return w
}

// checkPod holds a pod to the chart's hardening and references.
func checkPod(t *testing.T, r *rendered, o interface{ GetName() string }, secrets []string) {
	t.Helper()
	name, spec := o.GetName(), podSpec(o)
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Errorf("%s: the pod mounts a service account token it never uses", name)
	}
	if psc := spec.SecurityContext; psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Errorf("%s: the pod may run as root", name)
	}
	for _, v := range spec.Volumes {
		if v.ConfigMap != nil && r.ConfigMaps[v.ConfigMap.Name] == nil {
			t.Errorf("%s: volume %s of ConfigMap %s, which is not rendered", name, v.Name, v.ConfigMap.Name)
		}
	}
	for _, c := range spec.Containers {
		sc := c.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
			t.Errorf("%s: container %s is not read-only, unprivileged, without capabilities: %+v", name, c.Name, sc)
		}
		for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if req, lim := c.Resources.Requests[res], c.Resources.Limits[res]; req.IsZero() || lim.IsZero() {
				t.Errorf("%s: container %s has no %s request and limit", name, c.Name, res)
			}
		}
		for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
			if _, isJob := o.(*batchv1.Job); isJob {
				continue
			}
			if p == nil || p.HTTPGet == nil || port(c, p.HTTPGet.Port.StrVal) == 0 {
				t.Errorf("%s: a probe on no port of its container: %+v", name, p)
			}
		}
		for _, e := range c.Env {
			if ref := e.ValueFrom; ref != nil && ref.SecretKeyRef != nil {
				if s := r.Secrets[ref.SecretKeyRef.Name]; s != nil {
					if _, ok := s.Data[ref.SecretKeyRef.Key]; !ok {
						t.Errorf("%s: %s from key %s of Secret %s, which has no such key", name, e.Name, ref.SecretKeyRef.Key, s.Name)
					}
				}
			}
			for _, s := range secrets {
				if strings.Contains(e.Value, s) {
					t.Errorf("%s: %s holds a secret in clear", name, e.Name)
				}
			}
		}
		for _, a := range c.Command {
			for _, s := range secrets {
				if strings.Contains(a, s) {
					t.Errorf("%s: its command line holds a secret in clear", name)
				}
			}
		}
	}
}

// checkNATSUser checks that a container connects as user, its password from a Secret,
// defined before the URL that refers to it (Kubernetes expands $(VAR) only then).
func checkNATSUser(t *testing.T, name string, c corev1.Container, user string) {
	t.Helper()
	v := passwordVar(user)
	seen := false
	for _, e := range c.Env {
		switch e.Name {
		case v:
			if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Key != v {
				t.Errorf("%s: %s is not its Secret's key %s", name, v, v)
			}
			seen = true
		case "TOOLBUS_NATS_URL":
			if !seen {
				t.Errorf("%s: TOOLBUS_NATS_URL comes before %s, which it refers to", name, v)
			}
			for _, u := range strings.Split(e.Value, ",") {
				if !strings.Contains(u, "://"+user+":$("+v+")@") {
					t.Errorf("%s: NATS URL %q is not user %s's with its password", name, u, user)
				}
			}
			return
		}
	}
	t.Errorf("%s: no TOOLBUS_NATS_URL", name)
}

func port(c corev1.Container, name string) int32 {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
