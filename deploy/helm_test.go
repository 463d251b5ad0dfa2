package deploy_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v4"

	"github.com/toolbus/toolbus/deploy"
	"github.com/toolbus/toolbus/internal/testbin"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/config"
)

// helmBin finds helm (PATH, then the repository's .cache/bin, where
// scripts/install-test-tools builds it). Without it the test is skipped, unless
// TOOLBUS_REQUIRE_TOOLS is set, as scripts/test does after installing it.
func helmBin(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("helm"); err == nil {
		return p
	}
	if p, err := filepath.Abs("../.cache/bin/helm"); err == nil && fileExists(p) {
		return p
	}
	if os.Getenv("TOOLBUS_REQUIRE_TOOLS") != "" {
		t.Fatal("helm not found (TOOLBUS_REQUIRE_TOOLS is set)")
	}
	t.Skip("helm not found: scripts/install-test-tools builds it")
	return ""
}

// k8sObject is what these tests read of a rendered object: the parts that say how its
// containers run.
type k8sObject struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Data map[string]string `yaml:"data"`
	Spec struct {
		Template struct {
			Spec k8sPod `yaml:"spec"`
		} `yaml:"template"`
		Triggers []struct {
			Type     string            `yaml:"type"`
			Metadata map[string]string `yaml:"metadata"`
		} `yaml:"triggers"`
	} `yaml:"spec"`
}

type k8sPod struct {
	TerminationGracePeriodSeconds *int           `yaml:"terminationGracePeriodSeconds"`
	Containers                    []k8sContainer `yaml:"containers"`
	InitContainers                []k8sContainer `yaml:"initContainers"`
	Volumes                       []struct {
		Name      string `yaml:"name"`
		ConfigMap *struct {
			Name string `yaml:"name"`
		} `yaml:"configMap"`
	} `yaml:"volumes"`
}

type k8sContainer struct {
	Name    string   `yaml:"name"`
	Command []string `yaml:"command"`
	Env     []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			SecretKeyRef *struct {
				Name string `yaml:"name"`
				Key  string `yaml:"key"`
			} `yaml:"secretKeyRef"`
			ResourceFieldRef *struct {
				Resource string `yaml:"resource"`
			} `yaml:"resourceFieldRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	LivenessProbe  *k8sProbe `yaml:"livenessProbe"`
	ReadinessProbe *k8sProbe `yaml:"readinessProbe"`
	VolumeMounts   []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
	Resources struct {
		Limits map[string]string `yaml:"limits"`
	} `yaml:"resources"`
}

type k8sProbe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
}

// chart is one rendering of deploy/helm/toolbus: its objects by kind and name.
type chart map[string]*k8sObject

func (c chart) get(t *testing.T, kind, name string) *k8sObject {
	t.Helper()
	o := c[kind+"/"+name]
	if o == nil {
		t.Fatalf("the chart renders no %s %s", kind, name)
	}
	return o
}

// renderChart runs `helm template toolbus helm/toolbus` with args.
func renderChart(t *testing.T, args ...string) chart {
	t.Helper()
	cmd := exec.Command(helmBin(t), append([]string{"template", "toolbus", "helm/toolbus"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, stderr.String())
	}
	c := chart{}
	dec := yaml.NewDecoder(bytes.NewReader(out))
	for {
		o := &k8sObject{}
		if err := dec.Decode(o); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if o.Kind != "" {
			c[o.Kind+"/"+o.Metadata.Name] = o
		}
	}
	return c
}

// secret is a rendered Secret's values.
func (c chart) secret(t *testing.T, name string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for k, v := range c.get(t, "Secret", name).Data {
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			t.Fatal(err)
		}
		out[k] = string(b)
	}
	return out
}

// pod is a rendered container as a process of this machine: the volumes it mounts
// under root, its ports on free loopback ports.
type pod struct {
	root  string         // the container's file system: mount paths under it
	ports map[int]string // container port → the loopback address it listens on here
}

// natsHost is the host the rendering's NATS URLs name, which the tests point at their
// embedded server.
const natsHost = "nats-under-test.invalid:4222"

// process turns container c into a command of this machine: its command line with the
// binaries of bin, its environment as Kubernetes would give it (values, Secrets' keys,
// resource fields, $(VAR)s of earlier variables), paths under p.root and each
// --*-addr flag on a port of a container port moved to a free loopback port. NATS's
// address becomes natsAddr.
func (p *pod) process(t *testing.T, c k8sContainer, bin string, secrets map[string]map[string]string, natsAddr string) *exec.Cmd {
	t.Helper()
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = filepath.Join(p.root, m.MountPath)
		if err := os.MkdirAll(mounts[m.MountPath], 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A path under a mount (a value, or a flag's "=value") moves under root, once.
	moved := func(s string) string {
		for from, to := range mounts {
			if s == from || strings.HasPrefix(s, from+"/") {
				return to + strings.TrimPrefix(s, from)
			}
			if i := strings.Index(s, "="+from+"/"); i >= 0 {
				return s[:i+1] + to + s[i+1+len(from):]
			}
		}
		return s
	}
	containerPorts := map[int]bool{}
	for _, cp := range c.Ports {
		containerPorts[cp.ContainerPort] = true
	}
	addrFlag := regexp.MustCompile(`^(--[a-z-]+-addr=)([^:]*):(\d+)$`)
	var args []string
	for _, a := range c.Command[1:] {
		if m := addrFlag.FindStringSubmatch(a); m != nil {
			port, _ := strconv.Atoi(m[3])
			if !containerPorts[port] {
				t.Fatalf("container %s: %s listens on port %d, which is none of its container ports", c.Name, a, port)
			}
			p.ports[port] = freeAddr(t)
			a = m[1] + p.ports[port]
		}
		args = append(args, moved(a))
	}
	env := map[string]string{}
	environ := []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + p.root}
	expand := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	for _, e := range c.Env {
		v := e.Value
		switch {
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			s, ok := secrets[ref.Name][ref.Key]
			if !ok {
				t.Fatalf("container %s: %s from key %s of Secret %s, which the chart does not make", c.Name, e.Name, ref.Key, ref.Name)
			}
			v = s
		case e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil:
			v = strconv.FormatInt(quantity(t, c.Resources.Limits[strings.TrimPrefix(e.ValueFrom.ResourceFieldRef.Resource, "limits.")]), 10)
		default:
			v = expand.ReplaceAllStringFunc(v, func(ref string) string {
				name := expand.FindStringSubmatch(ref)[1]
				if val, ok := env[name]; ok {
					return val
				}
				return ref // Kubernetes leaves a reference to no earlier variable as it is
			})
		}
		v = strings.ReplaceAll(moved(v), natsHost, natsAddr)
		env[e.Name] = v
		environ = append(environ, e.Name+"="+v)
	}
	binary := filepath.Join(bin, c.Command[0])
	if !fileExists(binary) {
		t.Fatalf("container %s runs %s, which is no toolbus binary", c.Name, c.Command[0])
	}
	cmd := exec.Command(binary, args...)
	cmd.Env, cmd.Dir = environ, p.root
	return cmd
}

// quantity reads a Kubernetes memory quantity ("512Mi", "1Gi") as bytes.
func quantity(t *testing.T, q string) int64 {
	t.Helper()
	for suffix, mult := range map[string]int64{"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30} {
		if n, ok := strings.CutSuffix(q, suffix); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			if err != nil {
				t.Fatalf("quantity %q", q)
			}
			return v * mult
		}
	}
	t.Fatalf("quantity %q: no Ki, Mi or Gi", q)
	return 0
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// probe waits until GET path on the container port named port answers 200, as the
// kubelet's httpGet probe asks.
func (p *pod) probe(ctx context.Context, c k8sContainer, pr *k8sProbe) error {
	var port int
	for _, cp := range c.Ports {
		if cp.Name == pr.HTTPGet.Port {
			port = cp.ContainerPort
		}
	}
	addr, ok := p.ports[port]
	if !ok {
		return fmt.Errorf("the probe's port %q (%d) is not one the command line opens", pr.HTTPGet.Port, port)
	}
	var last string
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+pr.HTTPGet.Path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, body)
			if resp.StatusCode == http.StatusNotFound { // no such endpoint: it never will be
				return fmt.Errorf("GET %s: %s", pr.HTTPGet.Path, last)
			}
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("GET %s: %s", pr.HTTPGet.Path, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// natsInitContainer is what the NATS pods of deploy/helm/nats-values.yaml run before NATS: the
// init container that writes toolbus's accounts.
func natsInitContainer(t *testing.T) k8sContainer {
	t.Helper()
	data, err := os.ReadFile("helm/nats-values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Only the init container's patch decodes into containers.
	var raw struct {
		PodTemplate struct {
			Patch []yaml.Node `yaml:"patch"`
		} `yaml:"podTemplate"`
	}
	if err := yaml.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	for _, n := range raw.PodTemplate.Patch {
		var p struct {
			Path  string         `yaml:"path"`
			Value []k8sContainer `yaml:"value"`
		}
		if n.Decode(&p) == nil && p.Path == "/spec/initContainers" && len(p.Value) == 1 {
			return p.Value[0]
		}
	}
	t.Fatal("nats-values.yaml has no init container")
	return k8sContainer{}
}

// TestChartRunsForReal renders the chart, serves NATS as the NATS pods of
// helm/nats-values.yaml would (the accounts written by their init container's command,
// the passwords of the rendered Secret), runs the provisioning Job's command, then each
// Deployment's container — its binary, arguments and environment as rendered — and
// waits for each to pass its liveness and readiness probes; then a call goes through,
// and each service, sent SIGTERM, stops within its terminationGracePeriodSeconds. So the
// chart's flags, environment names, ports and probes are the ones the binaries take.
func TestChartRunsForReal(t *testing.T) {
	tenant := "acme-west"
	c := renderChart(t, "--set", "nats.urls[0]=nats://"+natsHost, "--set", "nats.streamReplicas=1",
		"--set-json", `config={"tenants":{"`+tenant+`":{}}}`)
	bin := t.TempDir()
	for _, pkg := range []string{"./cmd/parser", "./cmd/executor", "./cmd/formatter", "./cmd/healthd", "./cmd/toolbus"} {
		if err := os.Symlink(testbin.Path(t, pkg), filepath.Join(bin, testbin.Name(pkg))); err != nil {
			t.Fatal(err)
		}
	}
	secrets := map[string]map[string]string{
		"toolbus-nats-users": c.secret(t, "toolbus-nats-users"),
		"toolbus-console":    c.secret(t, "toolbus-console"),
	}
	// The ConfigMap as its volume shows it.
	configs := map[string]string{}
	for name, o := range c {
		if strings.HasPrefix(name, "ConfigMap/") {
			configs[o.Metadata.Name] = o.Data["toolbus.json"]
		}
	}
	mountConfig := func(p *pod, spec k8sPod) {
		for _, v := range spec.Volumes {
			if v.ConfigMap == nil {
				continue
			}
			for _, ctr := range append(slices.Clone(spec.Containers), spec.InitContainers...) {
				for _, m := range ctr.VolumeMounts {
					if m.Name == v.Name {
						dir := filepath.Join(p.root, m.MountPath)
						os.MkdirAll(dir, 0o755)
						if err := os.WriteFile(filepath.Join(dir, "toolbus.json"), []byte(configs[v.ConfigMap.Name]), 0o644); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
		}
	}

	// NATS: the init container of nats-values.yaml writes the accounts (its config
	// volume is toolbus's ConfigMap), which a configuration like the NATS chart's
	// includes from /etc/nats-config/nats.conf.
	natsPod := &pod{root: t.TempDir(), ports: map[int]string{}}
	init := natsInitContainer(t)
	cfgDir := filepath.Join(natsPod.root, "etc/toolbus")
	os.MkdirAll(cfgDir, 0o755)
	if err := os.WriteFile(filepath.Join(cfgDir, "toolbus.json"), []byte(configs["toolbus-config"]), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := natsPod.process(t, init, bin, secrets, "").CombinedOutput(); err != nil {
		t.Fatalf("the NATS pods' init container: %v\n%s", err, out)
	}
	for k, v := range secrets["toolbus-nats-users"] {
		t.Setenv(k, v) // the NATS container's envFrom
	}
	confDir := filepath.Join(natsPod.root, "etc/nats-config")
	os.MkdirAll(confDir, 0o755)
	conf := filepath.Join(confDir, "nats.conf")
	if err := os.WriteFile(conf, []byte("jetstream {}\ninclude ../toolbus-nats/accounts.conf\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := loadConf(t, conf)
	srv := startServer(t, opts)
	natsAddr := srv.Addr().String()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// The provisioning hook Job, as admin.
	job := c.get(t, "Job", "toolbus-provision").Spec.Template.Spec
	jp := &pod{root: t.TempDir(), ports: map[int]string{}}
	mountConfig(jp, job)
	if out, err := jp.process(t, job.Containers[0], bin, secrets, natsAddr).CombinedOutput(); err != nil {
		t.Fatalf("the provisioning Job: %v\n%s", err, out)
	}

	type running struct {
		name  string
		cmd   *exec.Cmd
		out   *bytes.Buffer
		grace int
	}
	var procs []running
	defer func() {
		for _, p := range procs {
			if p.cmd.ProcessState == nil {
				p.cmd.Process.Kill()
				p.cmd.Wait()
			}
		}
	}()
	for _, name := range []string{"parser", "executor", "formatter", "healthd", "console"} {
		d := c.get(t, "Deployment", "toolbus-"+name).Spec.Template.Spec
		p := &pod{root: t.TempDir(), ports: map[int]string{}}
		mountConfig(p, d)
		ctr := d.Containers[0]
		cmd := p.process(t, ctr, bin, secrets, natsAddr)
		out := &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, running{name, cmd, out, *d.TerminationGracePeriodSeconds})
		for kind, pr := range map[string]*k8sProbe{"liveness": ctr.LivenessProbe, "readiness": ctr.ReadinessProbe} {
			if pr == nil {
				t.Fatalf("%s: no %s probe", name, kind)
			}
			if err := p.probe(ctx, ctr, pr); err != nil {
				t.Fatalf("%s never passed its %s probe: %v\n%s", name, kind, err, out)
			}
		}
	}

	// A call, as the default tenant's orchestrator and as the tenant's.
	for _, user := range []string{"orchestrator", tenant} {
		nc, errs := connectAs(t, []string{"nats://" + natsAddr}, user, secrets["toolbus-nats-users"][deploy.PasswordVar(user)])
		cl, err := client.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		conv := "k8s-1"
		if user != "orchestrator" {
			conv = tenant + ".k8s-1"
		}
		out, err := cl.Ask(ctx, conv, `<tool_call>{"name": "clock", "arguments": {}}</tool_call>`, nil)
		if err != nil {
			t.Fatalf("a call as %s: %v", user, err)
		}
		if len(out.Results) != 1 || !out.Results[0].Success {
			t.Fatalf("a call as %s: %+v", user, out.Results)
		}
		errs.none(t, user)
	}

	for _, p := range procs {
		p.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- p.cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s exited with %v after SIGTERM\n%s", p.name, err, p.out)
			}
		case <-time.After(time.Duration(p.grace) * time.Second):
			t.Errorf("%s did not stop within its terminationGracePeriodSeconds, %ds", p.name, p.grace)
		}
	}
}

// The executors' terminationGracePeriodSeconds covers the longest budget a call of the
// rendered configuration may have, as the executor reads it (pkg/executor: the tool's
// budget, else its server's, else the executor's, else 60s), with the drain margin.
func TestChartGraceCoversLongestCall(t *testing.T) {
	for _, tc := range []struct{ name, config, extra string }{
		{"defaults", `{}`, ""},
		{"executor timeout", `{"executor": {"timeout": "1m30.5s"}}`, ""},
		{"a tool's, in hours and minutes", `{"executor": {"timeout": 20, "tool_timeouts": {"report": "1h30m", "ping": "1500ms"}}}`, ""},
		{"a server's, in seconds", `{"mcpServers": {"slow": {"type": "http", "url": "http://slow:8080/mcp", "timeout": 300}}}`, ""},
		{"longestCallSeconds longer", `{"executor": {"timeout": "10s"}}`, "900"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"--set-json", "config=" + tc.config}
			if tc.extra != "" {
				args = append(args, "--set", "longestCallSeconds="+tc.extra)
			}
			c := renderChart(t, args...)
			file := filepath.Join(t.TempDir(), "toolbus.json")
			os.WriteFile(file, []byte(c.get(t, "ConfigMap", "toolbus-config").Data["toolbus.json"]), 0o644)
			cfg, err := config.Load(file)
			if err != nil {
				t.Fatal(err)
			}
			longest := cmp.Or(time.Duration(cfg.Executor.Timeout), 60*time.Second)
			for _, d := range cfg.Executor.ToolTimeouts {
				longest = max(longest, time.Duration(d))
			}
			for _, s := range cfg.MCPServers {
				longest = max(longest, s.CallTimeout())
			}
			if tc.extra != "" {
				floor, _ := strconv.Atoi(tc.extra)
				longest = max(longest, time.Duration(floor)*time.Second)
			}
			want := int(math.Ceil(longest.Seconds())) + 30 // drainMarginSeconds
			if got := *c.get(t, "Deployment", "toolbus-executor").Spec.Template.Spec.TerminationGracePeriodSeconds; got != want {
				t.Errorf("terminationGracePeriodSeconds %d, want %d: the longest call (%v) and the drain margin", got, want, longest)
			}
		})
	}
}
