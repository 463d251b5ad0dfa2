package deploy_test

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/toolbus/toolbus/deploy"
	"github.com/toolbus/toolbus/internal/cli"
	"github.com/toolbus/toolbus/internal/testbin"
	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/toolbus"
)

// No Docker engine runs where these tests run: compose.yaml and the Dockerfile are checked
// statically, against the code and against nats.conf.

var natsNodes = []string{"nats-1", "nats-2", "nats-3"}

// root is the repository's top directory.
func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func loadCompose(t *testing.T, env map[string]string, files ...string) (*types.Project, error) {
	t.Helper()
	top := root(t)
	configs := []types.ConfigFile{{Filename: filepath.Join(top, "compose.yaml")}}
	for _, f := range files {
		configs = append(configs, types.ConfigFile{Filename: filepath.Join(top, f)})
	}
	return loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  top,
		ConfigFiles: configs,
		Environment: env,
	}, func(o *loader.Options) {
		o.SetProjectName("toolbus", true)
		o.Profiles = []string{"*"}
	})
}

// flagSpec is what a command accepts: flag name → type ("" for a boolean flag), and the
// environment variables it reads.
type flagSpec struct {
	flags map[string]string
	env   map[string]bool
}

var usageLine = regexp.MustCompile(`(?m)^  -([^\s=]+)(?: (\S+))?`)

func parseUsage(usage string) map[string]string {
	flags := map[string]string{}
	for _, m := range usageLine.FindAllStringSubmatch(usage, -1) {
		flags[m[1]] = m[2]
	}
	return flags
}

// serviceSpec asks the code itself: it runs a per-service binary's entry point
// (cli.Service, what cmd/parser etc. call) with -h and records the flags it prints and the
// environment variables it looks up.
func serviceSpec(t *testing.T, name string) flagSpec {
	t.Helper()
	var out bytes.Buffer
	spec := flagSpec{env: map[string]bool{}}
	env := cli.Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &out, Getenv: func(k string) string {
		spec.env[k] = true
		return ""
	}}
	cli.Service(context.Background(), name, []string{"-h"}, env)
	spec.flags = parseUsage(out.String())
	if len(spec.flags) == 0 {
		t.Fatalf("%s -h printed no flags:\n%s", name, out.String())
	}
	return spec
}

// binarySpec builds cmd/<name> and asks it for its flags, for binaries that are not
// toolbus services (engineering). It reports false when the command is not in the tree.
func binarySpec(t *testing.T, dir string) (flagSpec, bool) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(root(t), dir)); err != nil {
		return flagSpec{}, false
	}
	out, _ := exec.Command(testbin.Path(t, "./"+dir), "-h").CombinedOutput()
	return flagSpec{flags: parseUsage(string(out))}, true
}

// checkArgs parses args against the flags and returns the values given.
func checkArgs(args []string, flags map[string]string) (map[string]string, error) {
	got := map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			return nil, fmt.Errorf("argument %q: the command takes no positional arguments", a)
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		typ, ok := flags[name]
		if !ok {
			return nil, fmt.Errorf("flag %q: the code has no such flag (it has %v)", a, slices.Sorted(maps.Keys(flags)))
		}
		switch {
		case typ == "":
			if !hasVal {
				val = "true"
			}
			if _, err := strconv.ParseBool(val); err != nil {
				return nil, fmt.Errorf("flag %s=%q: not a boolean", name, val)
			}
		case !hasVal:
			if i++; i == len(args) {
				return nil, fmt.Errorf("flag %s: no value", name)
			}
			val = args[i]
		}
		if typ == "int" {
			if _, err := strconv.Atoi(val); err != nil {
				return nil, fmt.Errorf("flag %s=%q: not an integer", name, val)
			}
		}
		got[name] = val
	}
	return got, nil
}

// configVars are the variables deploy/toolbus.json reads (${VAR} and ${VAR:-default}).
func configVars(t *testing.T) map[string]bool {
	t.Helper()
	data, err := os.ReadFile("toolbus.json")
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]bool{}
	for _, m := range regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)`).FindAllStringSubmatch(string(data), -1) {
		vars[m[1]] = true
	}
	return vars
}

func envOf(s types.ServiceConfig) map[string]string {
	env := map[string]string{}
	for k, v := range s.Environment {
		if v != nil {
			env[k] = *v
		}
	}
	return env
}

// hostPath returns the host file or directory mounted at target in s.
func hostPath(s types.ServiceConfig, target string) string {
	for _, v := range s.Volumes {
		if v.Type == types.VolumeTypeBind && v.Target == target {
			return v.Source
		}
	}
	return ""
}

func TestCompose(t *testing.T) {
	pw := setPasswords(t)
	env := composeEnv(pw)

	if _, err := loadCompose(t, map[string]string{}); err == nil || !strings.Contains(err.Error(), "TOOLBUS_") {
		t.Errorf("compose.yaml loads without the NATS passwords: %v", err)
	}
	p, err := loadCompose(t, env)
	if err != nil {
		t.Fatal(err)
	}
	top := root(t)
	stages := dockerStages(t)

	// Without the console's token or Grafana's password compose refuses to start.
	for _, v := range []string{"TOOLBUS_CONSOLE_TOKEN", "TOOLBUS_GRAFANA_PASSWORD"} {
		without := maps.Clone(env)
		delete(without, v)
		if _, err := loadCompose(t, without); err == nil || !strings.Contains(err.Error(), v) {
			t.Errorf("compose.yaml loads without %s: %v", v, err)
		}
	}

	want := slices.Concat(natsNodes, toolbus.AllServices(), []string{"engineering", "ticket-service", "jaeger", "toolbus",
		"prometheus", "alertmanager", "grafana", "console"})
	for _, name := range want {
		if _, ok := p.Services[name]; !ok {
			t.Errorf("no service %q", name)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	built := func(s types.ServiceConfig, target string) {
		t.Helper()
		if s.Build == nil || s.Build.Context != top || s.Build.Target != target {
			t.Errorf("%s: not built from the Dockerfile's %s target: %+v", s.Name, target, s.Build)
		}
		if !slices.Contains(stages, target) {
			t.Errorf("%s: the Dockerfile has no stage %q (it has %v)", s.Name, target, stages)
		}
	}

	// Every toolbus service runs under an init, which reaps what tools leave behind.
	for _, name := range toolbus.AllServices() {
		if s := p.Services[name]; s.Init == nil || !*s.Init {
			t.Errorf("%s: no init (init: true) to reap the processes its tools leave", name)
		}
	}

	// The NATS cluster: the cluster variant of nats.conf on each node, every password it
	// reads, its name, the cluster port kept private.
	confVars := confVariables(t)
	clientPort := loadConf(t, baseConf).Port
	for _, name := range natsNodes {
		s := p.Services[name]
		if want := "nats:" + goModVersion(t, "github.com/nats-io/nats-server/v2") + "-alpine"; s.Image != want {
			t.Errorf("%s: image %q, want %q (the server version of go.mod)", name, s.Image, want)
		}
		dir := hostPath(s, "/etc/nats")
		if dir != filepath.Join(top, "deploy") {
			t.Errorf("%s: deploy/ is not mounted at /etc/nats (%q)", name, dir)
		}
		if !slices.Equal(s.Command, []string{"-c", "/etc/nats/" + clusterConf}) {
			t.Errorf("%s: command %v does not run %s", name, s.Command, clusterConf)
		}
		e := envOf(s)
		if e["NATS_SERVER_NAME"] != name {
			t.Errorf("%s: NATS_SERVER_NAME=%q", name, e["NATS_SERVER_NAME"])
		}
		for v := range confVars {
			if v != "NATS_SERVER_NAME" && e[v] == "" {
				t.Errorf("%s: $%s, which nats.conf reads, is not set", name, v)
			}
		}
		for _, port := range s.Ports {
			if port.Target == 6222 {
				t.Errorf("%s: the unauthenticated cluster port is published", name)
			}
		}
	}

	// The toolbus services: one binary each, flags and environment the code accepts, their
	// own NATS user, every cluster node, three replicas of every stream.
	vars := configVars(t)
	for _, name := range toolbus.AllServices() {
		s := p.Services[name]
		built(s, "toolbus")
		spec := serviceSpec(t, name)
		if len(s.Command) == 0 || s.Command[0] != name {
			t.Errorf("%s: command %v does not start the %s binary", name, s.Command, name)
			continue
		}
		if _, err := os.Stat(filepath.Join(top, "cmd", name)); err != nil {
			t.Errorf("%s: no cmd/%s to build it from", name, name)
		}
		args, err := checkArgs(s.Command[1:], spec.flags)
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if args["stream-replicas"] != strconv.Itoa(len(natsNodes)) {
			t.Errorf("%s: --stream-replicas %q, want %d on a %d-node cluster", name, args["stream-replicas"], len(natsNodes), len(natsNodes))
		}
		e := envOf(s)
		for k := range e {
			if !spec.env[k] && !strings.HasPrefix(k, "OTEL_") && !vars[k] {
				t.Errorf("%s: environment %s is read by neither the service nor deploy/toolbus.json", name, k)
			}
		}
		checkNATSURL(t, name, e["TOOLBUS_NATS_URL"], name, pw[name], clientPort)
		checkOTEL(t, s, p.Services["jaeger"])

		cfgPath := e["TOOLBUS_CONFIG"]
		host := hostPath(s, cfgPath)
		if cfgPath == "" || host != filepath.Join(top, "deploy", "toolbus.json") {
			t.Errorf("%s: TOOLBUS_CONFIG=%q is not deploy/toolbus.json mounted (%q)", name, cfgPath, host)
		} else if _, err := config.Load(host); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		for _, n := range natsNodes {
			if d, ok := s.DependsOn[n]; !ok || d.Condition != types.ServiceConditionHealthy {
				t.Errorf("%s: does not wait for %s to be healthy", name, n)
			}
		}
	}
	if r := p.Services[toolbus.Executor].Deploy; r == nil || r.Replicas == nil || *r.Replicas != 3 {
		t.Errorf("executor: deploy.replicas is not 3")
	}

	// The tool servers: the engineering MCP server from the toolbus image, the ticket
	// service from its own target (its entrypoint is the binary). Their flags are those of
	// their code, and deploy/toolbus.json reaches each where it listens.
	listens := map[string]string{}
	tools := []struct{ service, dir, target string }{
		{"engineering", "cmd/engineering", "toolbus"},
		{"ticket-service", "examples/ticket-service", "ticket-service"},
	}
	for _, tool := range tools {
		s := p.Services[tool.service]
		built(s, tool.target)
		args := []string(s.Command)
		if tool.target == "toolbus" {
			if len(args) == 0 || args[0] != filepath.Base(tool.dir) {
				t.Errorf("%s: command %v does not start %s", tool.service, args, filepath.Base(tool.dir))
				continue
			}
			args = args[1:]
		}
		spec, ok := binarySpec(t, tool.dir)
		if !ok {
			t.Errorf("%s: no %s in the tree", tool.service, tool.dir)
			continue
		}
		given, err := checkArgs(args, spec.flags)
		if err != nil {
			t.Errorf("%s: %v", tool.service, err)
		}
		for _, v := range given {
			if _, port, err := net.SplitHostPort(v); err == nil {
				listens[tool.service] = port
			}
		}
	}
	cfg, err := config.Load(filepath.Join(top, "deploy", "toolbus.json"))
	if err != nil {
		t.Fatal(err)
	}
	for name, sc := range cfg.MCPServers {
		u, err := url.Parse(sc.URL)
		if err != nil || listens[u.Hostname()] == "" || u.Port() != listens[u.Hostname()] {
			t.Errorf("deploy/toolbus.json: server %s at %s is not where a compose service listens (%v)", name, sc.URL, listens)
		}
	}

	// Jaeger: its UI published on 16686.
	if !slices.ContainsFunc(p.Services["jaeger"].Ports, func(pc types.ServicePortConfig) bool {
		return pc.Target == 16686 && pc.Published == "16686"
	}) {
		t.Error("jaeger: the UI is not published on 16686")
	}

	// The toolbus command for operators: admin, every node.
	cliSvc := p.Services["toolbus"]
	built(cliSvc, "toolbus")
	if !slices.Equal(cliSvc.Entrypoint, []string{"toolbus"}) {
		t.Errorf("toolbus: entrypoint %v", cliSvc.Entrypoint)
	}
	checkNATSURL(t, "toolbus", envOf(cliSvc)["TOOLBUS_NATS_URL"], "admin", pw["admin"], clientPort)

	checkConsole(t, p, env, pw[consoleU], clientPort)
	checkMonitoring(t, p)
}

// composeEnv is what .env holds for compose.yaml: every NATS password, the console's
// token and Grafana's password.
func composeEnv(pw map[string]string) map[string]string {
	env := map[string]string{
		"TOOLBUS_CONSOLE_TOKEN":    "console-token-" + pw["admin"],
		"TOOLBUS_GRAFANA_PASSWORD": "grafana-" + pw["admin"],
	}
	for _, u := range users {
		env[deploy.PasswordVar(u)] = pw[u]
	}
	return env
}

// checkConsole checks the console service: `toolbus console` from the toolbus image with
// flags the command has, as the console user on every node, with the token of .env; it
// listens on its container's interfaces, its port is published on the host's loopback
// only, and it answers to the names a browser on the host reaches that port by.
func checkConsole(t *testing.T, p *types.Project, env map[string]string, password string, clientPort int) {
	t.Helper()
	s := p.Services["console"]
	top := root(t)
	if s.Build == nil || s.Build.Context != top || s.Build.Target != "toolbus" {
		t.Errorf("console: not built from the Dockerfile's toolbus target: %+v", s.Build)
	}
	if !slices.Equal(s.Entrypoint, []string{"toolbus"}) || len(s.Command) == 0 || s.Command[0] != "console" {
		t.Errorf("console: entrypoint %v, command %v: want toolbus console", s.Entrypoint, s.Command)
		return
	}
	// The flags and variables `toolbus console` has, asked of the code.
	var out bytes.Buffer
	read := map[string]bool{}
	cli.Main(context.Background(), []string{"console", "-h"}, cli.Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &out,
		Getenv: func(k string) string { read[k] = true; return "" }})
	flags := parseUsage(out.String())
	if len(flags) == 0 {
		t.Fatalf("toolbus console -h printed no flags:\n%s", out.String())
	}
	args, err := checkArgs(s.Command[1:], flags)
	if err != nil {
		t.Errorf("console: %v", err)
	}
	e := envOf(s)
	// The token is read when the console starts serving (internal/cli/console.go), not
	// for -h.
	read["TOOLBUS_CONSOLE_TOKEN"] = true
	for k := range e {
		if !read[k] {
			t.Errorf("console: environment %s is not read by toolbus console", k)
		}
	}
	checkNATSURL(t, "console", e["TOOLBUS_NATS_URL"], consoleU, password, clientPort)
	if e["TOOLBUS_CONSOLE_TOKEN"] != env["TOOLBUS_CONSOLE_TOKEN"] {
		t.Errorf("console: TOOLBUS_CONSOLE_TOKEN=%q is not .env's", e["TOOLBUS_CONSOLE_TOKEN"])
	}
	if host := hostPath(s, e["TOOLBUS_CONFIG"]); host != filepath.Join(top, "deploy", "toolbus.json") {
		t.Errorf("console: TOOLBUS_CONFIG=%q is not deploy/toolbus.json mounted (%q)", e["TOOLBUS_CONFIG"], host)
	}

	host, port, err := net.SplitHostPort(args["console-addr"])
	if err != nil || net.ParseIP(host) == nil || !net.ParseIP(host).IsUnspecified() {
		t.Errorf("console: --console-addr %q: want every interface of the container (0.0.0.0:PORT)", args["console-addr"])
		return
	}
	if len(s.Ports) != 1 || strconv.Itoa(int(s.Ports[0].Target)) != port || s.Ports[0].HostIP != "127.0.0.1" {
		t.Errorf("console: ports %+v: want its port %s published on 127.0.0.1 only", s.Ports, port)
		return
	}
	hosts := strings.Split(args["console-host"], ",")
	for _, name := range []string{"localhost", "127.0.0.1"} {
		if h := net.JoinHostPort(name, s.Ports[0].Published); !slices.Contains(hosts, h) {
			t.Errorf("console: --console-host %v lacks %s, where a browser on the host reaches it", hosts, h)
		}
	}
	if u, err := url.Parse(args["jaeger-url"]); err != nil || u.Port() != "16686" {
		t.Errorf("console: --jaeger-url %q is not Jaeger's UI as the host publishes it", args["jaeger-url"])
	}
}

// checkMonitoring checks Prometheus, Alertmanager and Grafana: pinned images; Prometheus
// sends its alerts to the Alertmanager service, which reads deploy/alertmanager with its
// receivers' URLs as secrets from the environment; Grafana's provisioning, mounted where
// Grafana reads it, names the Prometheus service and the folder where the dashboard is
// mounted.
func checkMonitoring(t *testing.T, p *types.Project) {
	t.Helper()
	top := root(t)
	pinned := regexp.MustCompile(`:v?\d+\.\d+\.\d+$`)
	for _, name := range []string{"prometheus", "alertmanager", "grafana"} {
		if img := p.Services[name].Image; !pinned.MatchString(img) {
			t.Errorf("%s: image %q has no pinned version", name, img)
		}
	}
	published := func(s types.ServiceConfig, port uint32) bool {
		return slices.ContainsFunc(s.Ports, func(pc types.ServicePortConfig) bool { return pc.Target == port })
	}

	// Prometheus → Alertmanager.
	prom := p.Services["prometheus"]
	promDir := hostPath(prom, "/etc/prometheus")
	if promDir != filepath.Join(top, "deploy", "prometheus") {
		t.Errorf("prometheus: deploy/prometheus is not mounted at /etc/prometheus (%q)", promDir)
	}
	var promCfg struct {
		Alerting struct {
			Alertmanagers []struct {
				StaticConfigs []struct {
					Targets []string `yaml:"targets"`
				} `yaml:"static_configs"`
			} `yaml:"alertmanagers"`
		} `yaml:"alerting"`
	}
	readYAML(t, "prometheus/prometheus.yml", &promCfg)
	var targets []string
	for _, am := range promCfg.Alerting.Alertmanagers {
		for _, sc := range am.StaticConfigs {
			targets = append(targets, sc.Targets...)
		}
	}
	am := p.Services["alertmanager"]
	if !slices.Equal(targets, []string{"alertmanager:9093"}) || !published(am, 9093) {
		t.Errorf("prometheus.yml sends alerts to %v; want the alertmanager service on 9093, where it listens", targets)
	}

	// Alertmanager: its configuration mounted, each receiver's URL a secret it is given,
	// read from a variable deploy/example.env lists.
	cfgFile := ""
	for _, a := range am.Command {
		if v, ok := strings.CutPrefix(a, "--config.file="); ok {
			cfgFile = v
		}
	}
	amDir := hostPath(am, filepath.Dir(cfgFile))
	if amDir != filepath.Join(top, "deploy", "alertmanager") || filepath.Base(cfgFile) != "alertmanager.yml" {
		t.Errorf("alertmanager: --config.file %q is not deploy/alertmanager/alertmanager.yml mounted (%q)", cfgFile, amDir)
	}
	example, err := os.ReadFile("example.env")
	if err != nil {
		t.Fatal(err)
	}
	given := map[string]bool{}
	for _, sec := range am.Secrets {
		target := cmp.Or(sec.Target, sec.Source)
		if !strings.HasPrefix(target, "/") {
			target = "/run/secrets/" + target
		}
		given[target] = true
		def, ok := p.Secrets[sec.Source]
		if !ok || def.Environment == "" {
			t.Errorf("alertmanager: secret %s is not read from the environment: %+v", sec.Source, def)
			continue
		}
		if !regexp.MustCompile(`(?m)^` + def.Environment + `=`).Match(example) {
			t.Errorf("deploy/example.env does not list %s (alertmanager's secret %s)", def.Environment, sec.Source)
		}
	}
	for _, f := range alertmanagerURLFiles(t) {
		if !given[f] {
			t.Errorf("alertmanager.yml reads %s, which compose does not give alertmanager (%v)", f, slices.Sorted(maps.Keys(given)))
		}
	}

	// Grafana: provisioning and dashboards mounted where the files say.
	g := p.Services["grafana"]
	if d := hostPath(g, "/etc/grafana/provisioning"); d != filepath.Join(top, "deploy", "grafana", "provisioning") {
		t.Errorf("grafana: deploy/grafana/provisioning is not mounted at /etc/grafana/provisioning (%q)", d)
	}
	if !published(g, 3000) {
		t.Error("grafana: port 3000 is not published")
	}
	_, _, dsURL := provisionedDataSource(t)
	u, err := url.Parse(dsURL)
	if err != nil || u.Hostname() != "prometheus" || u.Port() != "9090" || !published(prom, 9090) {
		t.Errorf("grafana's data source %q is not the prometheus service on 9090", dsURL)
	}
	var providers struct {
		Providers []struct {
			Type    string `yaml:"type"`
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	readYAML(t, providerFile, &providers)
	if len(providers.Providers) != 1 || providers.Providers[0].Type != "file" {
		t.Fatalf("%s: want one file provider: %+v", providerFile, providers)
	}
	dir := providers.Providers[0].Options.Path
	if d := hostPath(g, dir); d != filepath.Join(top, "deploy", filepath.Dir(dashboardFile)) {
		t.Errorf("grafana: the provider reads %s, where %s is not mounted (%q)", dir, filepath.Dir(dashboardFile), d)
	}
	home := envOf(g)["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
	if home != dir+"/"+filepath.Base(dashboardFile) {
		t.Errorf("grafana: home dashboard %q is not %s in %s", home, filepath.Base(dashboardFile), dir)
	}
}

// checkNATSURL checks that a service's URL list names every cluster node, on the client
// port of nats.conf, as the service's own user with its password.
func checkNATSURL(t *testing.T, service, list, user, password string, port int) {
	t.Helper()
	var hosts []string
	for _, raw := range strings.Split(list, ",") {
		u, err := url.Parse(raw)
		if err != nil {
			t.Errorf("%s: TOOLBUS_NATS_URL %q: %v", service, raw, err)
			continue
		}
		hosts = append(hosts, u.Hostname())
		pass, _ := u.User.Password()
		if u.Scheme != "nats" || u.Port() != strconv.Itoa(port) || u.User.Username() != user || pass != password {
			t.Errorf("%s: TOOLBUS_NATS_URL %s://%s@%s: want nats://%s:<its password>@<node>:%d", service, u.Scheme, u.User.Username(), u.Host, user, port)
		}
	}
	if !slices.Equal(hosts, natsNodes) {
		t.Errorf("%s: TOOLBUS_NATS_URL names %v, want every node %v", service, hosts, natsNodes)
	}
}

// checkOTEL checks that s exports to the Jaeger service, on an OTLP port it listens on
// for the protocol chosen, under its own name.
func checkOTEL(t *testing.T, s, jaeger types.ServiceConfig) {
	t.Helper()
	e := envOf(s)
	u, err := url.Parse(e["OTEL_EXPORTER_OTLP_ENDPOINT"])
	if err != nil || u.Hostname() != jaeger.Name {
		t.Errorf("%s: OTEL_EXPORTER_OTLP_ENDPOINT=%q is not the %s service", s.Name, e["OTEL_EXPORTER_OTLP_ENDPOINT"], jaeger.Name)
		return
	}
	wantPort := map[string]string{"http/protobuf": "4318", "http/json": "4318", "grpc": "4317"}[e["OTEL_EXPORTER_OTLP_PROTOCOL"]]
	if wantPort == "" || u.Port() != wantPort {
		t.Errorf("%s: OTLP protocol %q on port %q", s.Name, e["OTEL_EXPORTER_OTLP_PROTOCOL"], u.Port())
	}
	listens := strings.Join(jaeger.Command, " ")
	if !strings.Contains(listens, "0.0.0.0:"+wantPort) {
		t.Errorf("jaeger: OTLP is not received on 0.0.0.0:%s (%s)", wantPort, listens)
	}
	// internal/cli.Service names a service's tracer "toolbus-<service>".
	if e["OTEL_SERVICE_NAME"] != "toolbus-"+s.Name {
		t.Errorf("%s: OTEL_SERVICE_NAME=%q, want toolbus-%s", s.Name, e["OTEL_SERVICE_NAME"], s.Name)
	}
}

// confVariables are the environment variables nats.conf and its cluster variant read.
func confVariables(t *testing.T, files ...string) map[string]bool {
	t.Helper()
	vars := map[string]bool{}
	if len(files) == 0 {
		files = []string{baseConf, clusterConf, "cluster.conf"}
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n") {
			line, _, _ = strings.Cut(line, "#")
			for _, m := range regexp.MustCompile(`\$([A-Z][A-Z0-9_]*)\b`).FindAllStringSubmatch(line, -1) {
				vars[m[1]] = true
			}
		}
	}
	// Subjects like "$JS.API...", "$KV..." and "$O..." are quoted names, not variables.
	for _, notVar := range []string{"JS", "KV", "SRV", "O"} {
		delete(vars, notVar)
	}
	if len(vars) == 0 {
		t.Fatal("nats.conf reads no environment variable")
	}
	return vars
}

// goModVersion returns the version go.mod requires of module, without the v.
func goModVersion(t *testing.T, module string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root(t), "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*(?:require\s+)?` + regexp.QuoteMeta(module) + `\s+v(\S+)`).FindSubmatch(data)
	if m == nil {
		t.Fatalf("go.mod does not require %s", module)
	}
	return string(m[1])
}

// dockerStages returns the named stages of the Dockerfile, in order.
func dockerStages(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root(t), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var stages []string
	for _, m := range regexp.MustCompile(`(?im)^FROM\s+\S+(?:\s+\S+)*?\s+AS\s+(\S+)\s*$`).FindAllSubmatch(data, -1) {
		stages = append(stages, string(m[1]))
	}
	return stages
}

// TestDockerfile checks the Dockerfile statically: it builds every command with the Go of
// go.mod, the default target is the toolbus image, and the build context keeps secrets out.
// TestComposeTenants checks the two-tenant overlay (compose.tenants.yaml) with
// compose.yaml: the nodes run the tenants' cluster configuration with every password it
// reads, and every toolbus process reads the configuration that names the same tenants
// as that NATS configuration.
func TestComposeTenants(t *testing.T) {
	pw := setPasswords(t)
	env := composeEnv(pw)
	if _, err := loadCompose(t, env, "compose.tenants.yaml"); err == nil || !strings.Contains(err.Error(), "TOOLBUS_ACME_PASSWORD") {
		t.Errorf("compose.tenants.yaml loads without the tenants' passwords: %v", err)
	}
	for _, u := range twoTenants {
		env[deploy.PasswordVar(u)] = pw[u]
	}
	p, err := loadCompose(t, env, "compose.tenants.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const clusterTenants = "nats-cluster-tenants.conf"
	vars := confVariables(t, tenantsConf, clusterTenants, "cluster.conf")
	for _, u := range twoTenants {
		if !vars[deploy.PasswordVar(u)] {
			t.Errorf("%s reads no $%s", tenantsConf, deploy.PasswordVar(u))
		}
	}
	for _, name := range natsNodes {
		s := p.Services[name]
		if !slices.Equal(s.Command, []string{"-c", "/etc/nats/" + clusterTenants}) {
			t.Errorf("%s: command %v does not run %s", name, s.Command, clusterTenants)
		}
		e := envOf(s)
		for v := range vars {
			if v != "NATS_SERVER_NAME" && e[v] == "" {
				t.Errorf("%s: $%s, which %s reads, is not set", name, v, tenantsConf)
			}
		}
	}
	t.Setenv("NATS_SERVER_NAME", "nats-1")
	if users := permissionsOf(t, loadConf(t, clusterTenants)); users["acme"] == nil || users["globex"] == nil {
		t.Errorf("%s has no users acme and globex", clusterTenants)
	}
	for _, name := range append(toolbus.AllServices(), "provision", "toolbus") {
		host := hostPath(p.Services[name], "/etc/toolbus/toolbus.json")
		cfg, err := config.Load(host)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var tenants []string
		for _, tenant := range cfg.Topology().Tenants {
			tenants = append(tenants, tenant.Name)
		}
		if !slices.Equal(tenants, twoTenants) {
			t.Errorf("%s reads %s, whose tenants are %v; want %v, nats-tenants.conf's", name, host, tenants, twoTenants)
		}
	}
}

func TestDockerfile(t *testing.T) {
	top := root(t)
	data, err := os.ReadFile(filepath.Join(top, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	df := string(data)
	stages := dockerStages(t)
	if len(stages) == 0 || stages[len(stages)-1] != "toolbus" {
		t.Errorf("stages %v: the last (default) one must be toolbus", stages)
	}
	if !slices.Contains(stages, "build") || !slices.Contains(stages, "ticket-service") {
		t.Errorf("stages %v: want build and ticket-service", stages)
	}

	goMod, err := os.ReadFile(filepath.Join(top, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\S+)`).FindSubmatch(goMod)
	if goVersion == nil || !strings.Contains(df, "ARG GO_VERSION="+string(goVersion[1])+"\n") {
		t.Errorf("the Dockerfile does not build with the Go of go.mod (%s)", goVersion[1])
	}

	// `go build ./cmd/...` builds every main package under cmd/.
	if !strings.Contains(df, "-o /out/ ./cmd/...") || !strings.Contains(df, "COPY --from=build /out/ /usr/local/bin/") {
		t.Error("the toolbus stage does not get every binary of cmd/")
	}
	cmds, err := os.ReadDir(filepath.Join(top, "cmd"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cmds {
		if c.Name() == "internal" {
			continue // what the mains share (cmd/internal/reapfirst), built into them
		}
		main, err := os.ReadFile(filepath.Join(top, "cmd", c.Name(), "main.go"))
		if err != nil || !bytes.Contains(main, []byte("package main")) {
			t.Errorf("cmd/%s has no main package for ./cmd/... to build", c.Name())
		}
	}
	if !strings.Contains(df, "./examples/ticket-service") {
		t.Error("the ticket service is not built")
	}

	ignore, err := os.ReadFile(filepath.Join(top, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{".git", ".env", "*.env"} {
		if !slices.Contains(strings.Split(string(ignore), "\n"), want) {
			t.Errorf(".dockerignore does not keep out %s", want)
		}
	}
}
