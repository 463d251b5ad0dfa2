package toolbus_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolbus/toolbus/internal/mcptest"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/executor"
	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/mcpwire"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolbus"
)

// double is a Go function of the embedding program.
func double(_ context.Context, in struct {
	N int `json:"n"`
}) (map[string]int, error) {
	return map[string]int{"doubled": 2 * in.N}, nil
}

func tools(t *testing.T) *localtools.Registry {
	t.Helper()
	reg := localtools.New()
	if err := localtools.AddFunc(reg, messages.ToolInfo{Name: "double", ReadOnly: true}, double); err != nil {
		t.Fatal(err)
	}
	return reg
}

func ask(t *testing.T, tb *toolbus.Toolbus) *messages.Output {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := tb.Client().Ask(ctx, "embed", `<tool_call>{"name": "double", "arguments": {"n": 21}}</tool_call>`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Results) != 1 || !out.Results[0].Success || !strings.Contains(out.Text, `"doubled": 42`) {
		t.Fatalf("output %+v", out)
	}
	return out
}

// The whole pipeline in process, with a Go function of the program as a tool.
func TestStartEmbedded(t *testing.T) {
	t.Parallel()
	tb, err := toolbus.Start(context.Background(), toolbus.Options{Tools: tools(t)})
	if err != nil {
		t.Fatal(err)
	}
	ask(t, tb)
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
}

// A program offering its tools to a cluster: an executor against a NATS URL, beside a
// parser and formatter running elsewhere (here another Start).
func TestStartAsExecutor(t *testing.T) {
	t.Parallel()
	url := bustest.Server(t)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := bus.Provision(ctx, js, bus.Topology{}); err != nil {
		t.Fatal(err)
	}
	exec, err := toolbus.Start(ctx, toolbus.Options{NATSURL: url, Services: []string{toolbus.Executor}, Tools: tools(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Close()
	rest, err := toolbus.Start(ctx, toolbus.Options{NATSURL: url, Services: []string{toolbus.Parser, toolbus.Formatter}})
	if err != nil {
		t.Fatal(err)
	}
	defer rest.Close()
	ask(t, rest)
}

// examples/embed builds as a program of another module would — toolbus required and
// replaced by this checkout, the module cache only — so it uses no internal package,
// and answers a call of its Go tool.
func TestEmbedExampleOutsideTheModule(t *testing.T) {
	t.Parallel()
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	// The embedder's go.mod carries toolbus's own requirements (its go line and require
	// blocks), as `go mod tidy` would write them: the module graph is then the one the
	// main module's build already loaded, and nothing else must be in the module cache.
	// Requiring toolbus alone would make the go command load older go.mod files of
	// unpruned dependencies (go-logr/stdr's logr v1.2.2) that a new machine never fetched.
	data, err := os.ReadFile(filepath.Join(repo, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	var own strings.Builder
	for _, line := range strings.SplitAfter(string(data), "\n") {
		if strings.HasPrefix(line, "module ") || strings.HasPrefix(line, "replace ") {
			continue
		}
		own.WriteString(line)
	}
	dir := t.TempDir()
	mod := "module example.com/embedder\n\n" + own.String() + "\n" +
		"require github.com/toolbus/toolbus v0.0.0-00010101000000-000000000000\n\n" +
		"replace github.com/toolbus/toolbus => " + repo + "\n"
	main, err := os.ReadFile(filepath.Join(repo, "examples", "embed", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(repo, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"go.mod": []byte(mod), "main.go": main, "go.sum": sum} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	build := exec.Command("go", "build", "-o", "embedder", ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod -buildvcs=false", "GOPROXY=off", "GOSUMDB=off", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building examples/embed in a module of its own: %v\n%s", err, out)
	}
	run := exec.Command(filepath.Join(dir, "embedder"))
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("embedder: %v\n%s", err, out)
	}
	i := strings.Index(string(out), "{")
	j := strings.LastIndex(string(out), "}")
	var res struct {
		Tool    string
		Success bool
		Result  map[string]float64
	}
	if i < 0 || j < i || json.Unmarshal(out[i:j+1], &res) != nil || !res.Success || res.Result["kelvin"] != 505.93 {
		t.Fatalf("embedder printed:\n%s", out)
	}
}

// WaitForTools: after it, a call of an MCP server's tool written without a marker (a
// pythonic list after a sentence) is recognised from the first response; a server that
// never lists its tools is named when the wait ends; a server whose command is not found
// is not waited for (it cannot list any until the configuration changes).
func TestWaitForTools(t *testing.T) {
	t.Parallel()
	memory := mcptest.NPMPackage(t, "@modelcontextprotocol/server-memory")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "toolbus.json")
	body, _ := json.Marshal(map[string]any{
		"mcpServers": map[string]any{
			"memory": map[string]any{"command": "node", "args": []string{filepath.Join(memory, "dist", "index.js")},
				"env": map[string]string{"MEMORY_FILE_PATH": filepath.Join(dir, "memory.jsonl")}},
			"gone":    map[string]any{"command": "sleep", "args": []string{"600"}}, // never answers
			"missing": map[string]any{"command": filepath.Join(dir, "no-such-server")},
		},
		"engineering": map[string]any{"enabled": false},
	})
	if err := os.WriteFile(cfg, body, 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := toolbus.Start(context.Background(), toolbus.Options{Config: c})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	// The gone server never lists its tools, so each wait ends at its deadline; node
	// may take longer than one wait to start the memory server on a busy machine, so
	// the waits go on (for up to a minute) until memory is not among the missing.
	for deadline := time.Now().Add(time.Minute); ; {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		err = tb.WaitForTools(ctx)
		cancel()
		if err == nil || !strings.Contains(err.Error(), "memory") || time.Now().After(deadline) {
			break
		}
	}
	if err == nil || !strings.Contains(err.Error(), "gone") || strings.Contains(err.Error(), "memory") || strings.Contains(err.Error(), "missing") {
		t.Fatalf("WaitForTools = %v, want the gone server named, and only it", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := tb.Client().Ask(ctx, "embed", "Let me look.\n[memory__read_graph()]", nil)
	if err != nil || len(out.Results) != 1 || !out.Results[0].Success {
		t.Fatalf("output %+v, %v", out, err)
	}
}

// shout is a backend of the embedding program's own, plugged in from outside the
// executor's package.
type shout struct{}

func (shout) Name() string { return "shout" }

func (shout) Tools(context.Context) []messages.ToolInfo {
	return []messages.ToolInfo{{Name: "shout", ReadOnly: true, InputSchema: json.RawMessage(`{"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}`)}}
}

func (b shout) Resolve(_ context.Context, name string) (executor.Route, bool, error) {
	if name != "shout" {
		return executor.Route{}, false, nil
	}
	return executor.Route{Server: "shout", Info: b.Tools(nil)[0], Run: func(_ context.Context, conversation string, args json.RawMessage) (json.RawMessage, error) {
		var in struct{ Text string }
		if err := json.Unmarshal(args, &in); err != nil {
			return nil, err
		}
		return json.Marshal(map[string]string{"shouted": strings.ToUpper(in.Text), "conversation": conversation})
	}}, true, nil
}

// A program's own backend runs its calls, and the parser checks them against the
// schema it lists (a call without the required argument is answered, not run).
func TestOwnBackend(t *testing.T) {
	t.Parallel()
	tb, err := toolbus.Start(context.Background(), toolbus.Options{Backends: []executor.Backend{shout{}}})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := tb.WaitForTools(ctx); err != nil {
		t.Fatal(err) // the parser never learnt the backend's tools
	}
	out, err := tb.Client().Ask(ctx, "own-backend", `<tool_call>{"name": "shout", "arguments": {"text": "hi"}}</tool_call><tool_call>{"name": "shout", "arguments": {}}</tool_call>`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Results) != 2 || !out.Results[0].Success || !strings.Contains(out.Text, `"shouted": "HI"`) || !strings.Contains(out.Text, `"conversation": "own-backend"`) {
		t.Fatalf("first call: %+v\n%s", out.Results, out.Text)
	}
	if r := out.Results[1]; r.Success || r.Error == nil || r.Error.Code != messages.CodeInvalidArguments {
		t.Fatalf("a call without the required argument: %+v, want invalid_arguments", r)
	}
}

// named is a backend with nothing but a name.
type named string

func (n named) Name() string                            { return string(n) }
func (named) Tools(context.Context) []messages.ToolInfo { return nil }
func (named) Resolve(context.Context, string) (executor.Route, bool, error) {
	return executor.Route{}, false, nil
}

// A backend's name is its key in the catalog: one that another backend or a configured
// server has would overwrite its tools there, so Start refuses it.
func TestBackendNamesAreUnique(t *testing.T) {
	t.Parallel()
	cfg := &config.Config{MCPServers: map[string]mcpwire.ServerConfig{"files": {Command: "x", Enabled: new(false)}}}
	for _, tt := range []struct {
		name     string
		backends []executor.Backend
		wantErr  bool
	}{
		{"a name of its own", []executor.Backend{named("mine")}, false},
		{"two of the same", []executor.Backend{named("mine"), named("mine")}, true},
		{"the local tools'", []executor.Backend{named("local")}, true},
		{"the calculators'", []executor.Backend{named("engineering")}, true},
		{"a configured server's", []executor.Backend{named("files")}, true},
		{"empty", []executor.Backend{named("")}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tb, err := toolbus.Start(context.Background(), toolbus.Options{Config: cfg, Backends: tt.backends, Services: []string{toolbus.Parser}})
			if err == nil {
				tb.Close()
			}
			if (err != nil) != tt.wantErr {
				t.Fatalf("Start: %v, want an error %v", err, tt.wantErr)
			}
		})
	}
}
