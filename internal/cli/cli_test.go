package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/toolbus/toolbus/internal/mcptest"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolbus"
)

func runMain(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code = Main(ctx, args, Env{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" }})
	return out.String(), errOut.String(), code
}

// The README's first command: activate the pressure domain, then solve the Kesselformel.
func TestRunKesselformelExample(t *testing.T) {
	stdout, stderr, code := runMain(t, "", "run", "--json",
		"../../examples/kesselformel/1-activate.txt", "../../examples/kesselformel/2-solve.txt")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 outputs, got %d:\n%s", len(lines), stdout)
	}
	var outs [2]messages.Output
	for i, l := range lines {
		if err := json.Unmarshal([]byte(l), &outs[i]); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		if outs[i].Kind != messages.KindToolResults || len(outs[i].Results) != 1 || !outs[i].Results[0].Success {
			t.Fatalf("output %d: %+v", i, outs[i])
		}
		if outs[i].Conversation != "cli" || outs[i].ResponseID == "" || !strings.Contains(outs[i].Text, "<tool_result>") {
			t.Errorf("output %d fields: %+v", i, outs[i])
		}
	}
	var solved struct {
		SolvedFor string  `json:"solved_for"`
		Value     float64 `json:"value"`
		Unit      string  `json:"unit"`
	}
	if err := json.Unmarshal(outs[1].Results[0].Result, &solved); err != nil {
		t.Fatal(err)
	}
	// s = p·d/(20·σ) = 10·100/(20·160) = 1000/3200 = 0.3125 mm.
	if solved.SolvedFor != "s" || solved.Value != 0.3125 || solved.Unit != "mm" {
		t.Errorf("solved %+v, want s = 0.3125 mm", solved)
	}
	if !strings.Contains(outs[1].Text, "1 bar = 0.1 N/mm²") {
		t.Errorf("the result does not state the bar conversion:\n%s", outs[1].Text)
	}
}

func TestRunTextAndNoCall(t *testing.T) {
	stdout, stderr, code := runMain(t, "Nothing to call here.", "run")
	if code != 0 || stdout != "" || !strings.Contains(stderr, "no tool call") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	stdout, stderr, code = runMain(t, `<tool_call>{"tool": "clock", "parameters": {}}</tool_call>`, "run")
	if code != 0 || !strings.HasPrefix(stdout, "<tool_result>\n{\n  \"tool\": \"clock\",\n  \"success\": true,") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"no command", nil, 2, "usage"},
		{"unknown command", []string{"fly"}, 2, `unknown command "fly"`},
		{"bad flag", []string{"run", "--nope"}, 2, "flag provided but not defined"},
		{"bad conversation", []string{"run", "--conversation", "a.b.c"}, 2, "conversation id"},
		{"a tenant the configuration does not name", []string{"run", "--conversation", "acme.c1"}, 2, `no tenant "acme"`},
		{"missing file", []string{"run", "does-not-exist.txt"}, 1, "no such file"},
		{"bad config", []string{"run", "--config", "../../go.mod"}, 1, "not valid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, code := runMain(t, "", tt.args...)
			if code != tt.wantCode || !strings.Contains(stderr, tt.wantErr) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, tt.wantCode, tt.wantErr)
			}
		})
	}
}

// toolNames runs toolbus tools --json with args and returns the names it lists, joined
// with commas.
func toolNames(t *testing.T, args ...string) string {
	t.Helper()
	stdout, stderr, code := runMain(t, "", append([]string{"tools", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var tools []messages.ToolInfo
	if err := json.Unmarshal([]byte(stdout), &tools); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Name)
	}
	return strings.Join(names, ",")
}

func TestToolsListsTheVisibleTools(t *testing.T) {
	if got := toolNames(t); got != "clock,dispatch_engineering,execute_tool" {
		t.Errorf("tools %s; the calculators must stay hidden", got)
	}
}

// A tool the policy denies outright for a tenant is not offered to its models; one
// denied only for some arguments, or for another tenant, is.
func TestToolsLeavesOutWhatThePolicyDenies(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.json")
	if err := os.WriteFile(path, []byte(`{"policy": {"rules": [
		{"name": "acme-no-engineering", "tools": ["dispatch_engineering", "execute_tool"], "when": "tenant == 'acme'", "effect": "deny"},
		{"name": "no-early-clock", "tools": ["clock"], "when": "now.getHours() < 1", "effect": "deny"}
	]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ tenant, want string }{
		{"", "clock,dispatch_engineering,execute_tool"},
		{"globex", "clock,dispatch_engineering,execute_tool"},
		{"acme", "clock"},
	} {
		args := []string{"--config", path}
		if tc.tenant != "" {
			args = append(args, "--tenant", tc.tenant)
		}
		if got := toolNames(t, args...); got != tc.want {
			t.Errorf("tenant %q: tools %s, want %s", tc.tenant, got, tc.want)
		}
	}
	if _, stderr, code := runMain(t, "", "tools", "--tenant", "a.b"); code != 2 || !strings.Contains(stderr, "--tenant") {
		t.Errorf("an invalid tenant: exit %d, %s", code, stderr)
	}
}

func TestParseCommand(t *testing.T) {
	stdout, stderr, code := runMain(t, "Let me check.\n<tool_call>{'name': 'clock', 'arguments': {},}</tool_call>\n<tool_call>not json</tool_call>", "parse")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var p struct {
		Calls []struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
			Format    string          `json:"format"`
			Repairs   []string        `json:"repairs"`
		} `json:"calls"`
		Content string                           `json:"content"`
		Errors  []struct{ Code, Message string } `json:"errors"`
	}
	if err := json.Unmarshal([]byte(stdout), &p); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	if len(p.Calls) != 1 || p.Calls[0].Name != "clock" || string(p.Calls[0].Arguments) != "{}" || p.Calls[0].Format != "tool_call" || len(p.Calls[0].Repairs) == 0 {
		t.Errorf("calls %+v", p.Calls)
	}
	if len(p.Errors) != 1 || p.Errors[0].Code != "parse_error" || !strings.Contains(p.Content, "Let me check.") {
		t.Errorf("errors %+v content %q", p.Errors, p.Content)
	}

	stdout, _, code = runMain(t, `"<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>"`+"\n"+`"no call"`+"\n", "parse", "--jsonl")
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if code != 0 || len(lines) != 2 || !strings.Contains(lines[0], `"name":"a"`) || !strings.Contains(lines[1], `"calls":[]`) {
		t.Errorf("jsonl: exit %d\n%s", code, stdout)
	}
}

func TestRepairCommand(t *testing.T) {
	stdout, stderr, code := runMain(t, "{p=10, d: 100, 'sigma': 160,}", "repair")
	if code != 0 || strings.TrimSpace(stdout) != `{"p":10,"d":100,"sigma":160}` || !strings.Contains(stderr, "repairs:") {
		t.Errorf("exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	_, stderr, code = runMain(t, "}}}", "repair")
	if code != 1 || stderr == "" {
		t.Errorf("hopeless input: exit %d stderr %q", code, stderr)
	}
	stdout, _, code = runMain(t, `"{'a': 1}"`+"\n"+`"}}}"`+"\n", "repair", "--jsonl")
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if code != 0 || len(lines) != 2 || lines[0] != `{"json":{"a":1},"ok":true}` || !strings.HasPrefix(lines[1], `{"error":`) {
		t.Errorf("jsonl: exit %d\n%s", code, stdout)
	}
}

func TestRedactURLs(t *testing.T) {
	got := redactURLs("nats://executor:s3cret@nats-1:4222,nats://nats-2:4222")
	if strings.Contains(got, "s3cret") || !strings.Contains(got, "nats-1:4222") || !strings.Contains(got, "nats://nats-2:4222") {
		t.Errorf("redactURLs = %q", got)
	}
	_, stderr, _ := runMain(t, "", "send", "--nats", "nats://u:s3cret@127.0.0.1:1", "--timeout", "1s")
	if strings.Contains(stderr, "s3cret") {
		t.Errorf("password in the error: %s", stderr)
	}
}

// run --full-results prints the whole of a result too large to travel inline; without it
// the model's preview.
func TestRunFullResults(t *testing.T) {
	dir := t.TempDir()
	tools := filepath.Join(dir, "tools")
	os.MkdirAll(tools, 0o755)
	os.WriteFile(filepath.Join(tools, "big"), []byte("#!/bin/sh\nhead -c 200000 /dev/zero | tr '\\0' y | sed 's/^/\"/; s/$/\"/'\n"), 0o755)
	os.WriteFile(filepath.Join(tools, "big.mcp.json"), []byte(`{"name": "big", "inputSchema": {"type": "object"}}`), 0o644)
	cfg := filepath.Join(dir, "toolbus.json")
	os.WriteFile(cfg, []byte(`{"local": {"tools": {"folder": "tools"}}}`), 0o644)
	call := `<tool_call>{"name": "big", "arguments": {}}</tool_call>`
	want := strings.Repeat("y", 200000)
	stdout, stderr, code := runMain(t, call, "run", "--config", cfg)
	if code != 0 || strings.Contains(stdout, want) || !strings.Contains(stdout, `"truncated": true`) {
		t.Fatalf("without --full-results: exit %d, %d bytes of stdout, stderr %q; want the preview", code, len(stdout), stderr)
	}
	stdout, stderr, code = runMain(t, call, "run", "--json", "--full-results", "--config", cfg)
	var out struct {
		Text    string `json:"text"`
		Results []struct {
			Result string `json:"result"`
		} `json:"results"`
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &out) != nil || len(out.Results) != 1 || out.Results[0].Result != want || !strings.Contains(out.Text, want) {
		t.Fatalf("with --full-results: exit %d, stderr %q, %d bytes of stdout; want the whole result", code, stderr, len(stdout))
	}
}

// A password on the command line is warned about, and never echoed back, even in a URL
// that does not parse.
func TestNATSPasswordOnTheCommandLine(t *testing.T) {
	_, stderr, code := runMain(t, "", "health", "--nats", "nats://svc:pw-on-cmdline@127.0.0.1:1")
	if code == 0 || !strings.Contains(stderr, "warning: --nats holds a password") || strings.Contains(stderr, "pw-on-cmdline") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	_, stderr, _ = runMain(t, "", "health", "--nats", "nats://svc:pw-on-cmdline@[broken")
	if strings.Contains(stderr, "pw-on-cmdline") {
		t.Errorf("stderr %q holds the password", stderr)
	}
}

// toolbus version (and --version) prints the program, its version and the Go version it
// was built with.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		stdout, stderr, code := runMain(t, "", args...)
		if code != 0 || !strings.HasPrefix(stdout, "toolbus ") || !strings.Contains(stdout, runtime.Version()) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
	var out bytes.Buffer
	if code := Service(context.Background(), "parser", []string{"--version"}, Env{Stdout: &out, Stderr: &out}); code != 0 || !strings.HasPrefix(out.String(), "parser ") {
		t.Errorf("parser --version: exit %d, %q", code, out.String())
	}
}

// A service says what it does: NATS unreachable at once and at every retry, "ready" once
// it runs, and nothing at ERROR when it is stopped, before or after it is ready.
func TestServiceSaysWhatHappens(t *testing.T) {
	var metrics string // the last run's /metrics, read once it was ready
	run := func(url, until string) (string, int) {
		t.Helper()
		var out bustest.LogBuffer
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan int)
		go func() {
			done <- Service(ctx, "parser", []string{"--nats", url, "--ops-addr", "127.0.0.1:0"}, Env{Stdout: &out, Stderr: &out})
		}()
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(out.String(), until) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if m := regexp.MustCompile(`"msg":"ops: /metrics, /healthz and /readyz","service":"parser","addr":"([^"]+)"`).FindStringSubmatch(out.String()); m != nil {
			if resp, err := http.Get("http://" + m[1] + "/metrics"); err == nil {
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				metrics = string(body)
			}
		}
		cancel()
		return out.String(), <-done
	}
	log, code := run("nats://127.0.0.1:1", "NATS not reachable; trying again")
	if code != 0 || strings.Count(log, "NATS not reachable") < 1 || strings.Contains(log, `"level":"ERROR"`) || strings.Contains(log, "context canceled") {
		t.Errorf("unreachable NATS, stopped: exit %d\n%s", code, log)
	}
	// Before provisioning, a service says what is missing and how to provision; then it
	// is ready.
	url := bustest.Server(t)
	log, code = run(url, "waiting for the streams and buckets to be provisioned")
	if code != 0 || !strings.Contains(log, "stream TOOLBUS_CALLS is missing") || !strings.Contains(log, "toolbus provision") {
		t.Errorf("a service before provisioning: exit %d\n%s", code, log)
	}
	if _, stderr, code := runMain(t, "", "provision", "--nats", url); code != 0 {
		t.Fatalf("toolbus provision: exit %d, %s", code, stderr)
	}
	log, code = run(url, `"msg":"ready"`)
	if code != 0 || !strings.Contains(log, `"msg":"ready","service":"parser"`) || !strings.Contains(log, "connected to NATS") || strings.Contains(log, `"level":"ERROR"`) {
		t.Errorf("a service stopped after it was ready: exit %d\n%s", code, log)
	}
	// Its /metrics says who it is (service.name, version, instance), that it is ready,
	// and carries the Go runtime's and the process's metrics.
	for _, want := range []string{`service_name="toolbus-parser"`, `service_version="`, `service_instance_id="`,
		"\ntoolbus_ready{", "\ngo_goroutines ", "\nprocess_cpu_seconds_total "} {
		if !strings.Contains(metrics, want) {
			t.Errorf("the parser's /metrics lacks %s:\n%s", want, metrics)
		}
	}
	if !regexp.MustCompile(`\ntoolbus_ready\{[^}]*\} 1\n`).MatchString(metrics) {
		t.Errorf("toolbus_ready is not 1 once ready:\n%s", metrics)
	}
}

// serve on a port another program holds says so, at once.
func TestServeOnATakenPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	_, stderr, code := runMain(t, "", "serve", "--port", port)
	if code == 0 || !strings.Contains(stderr, "cannot listen on port "+port) {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

// memoryConfig writes a configuration of the npm memory server (its file in a temporary
// folder) and one more section, and returns its path.
func memoryConfig(t *testing.T, section string, value any) string {
	t.Helper()
	memory := mcptest.NPMPackage(t, "@modelcontextprotocol/server-memory")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "toolbus.json")
	body, _ := json.Marshal(map[string]any{
		"mcpServers": map[string]any{"memory": map[string]any{
			"command": "node", "args": []string{filepath.Join(memory, "dist", "index.js")},
			"env": map[string]string{"MEMORY_FILE_PATH": filepath.Join(dir, "memory.jsonl")}}},
		section: value,
	})
	if err := os.WriteFile(cfg, body, 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestParseWithConfig: `toolbus parse --config` reads a response with the catalog the
// configuration's parser would have — a real MCP server's tools (the npm memory
// server), the engineering suite's — so that bare JSON naming those tools is a call,
// their schemas coerce and check the arguments, and without the configuration the same
// text is content.
func TestParseWithConfig(t *testing.T) {
	cfg := memoryConfig(t, "local", map[string]any{"clock": true})
	response := "Searching.\n```json\n{\"name\": \"memory__search_nodes\", \"arguments\": {\"query\": 42}}\n```\n" +
		`{"name": "dispatch_engineering", "arguments": {"action": "nope"}}`
	type out struct {
		Calls []struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
			Repairs   []string        `json:"repairs"`
		} `json:"calls"`
		Content string                           `json:"content"`
		Errors  []struct{ Code, Message string } `json:"errors"`
	}
	stdout, stderr, code := runMain(t, response, "parse", "--config", cfg)
	var p out
	if err := json.Unmarshal([]byte(stdout), &p); code != 0 || err != nil {
		t.Fatalf("exit %d %v: %s %s", code, err, stdout, stderr)
	}
	var args bytes.Buffer
	if len(p.Calls) == 1 {
		_ = json.Compact(&args, p.Calls[0].Arguments)
	}
	if len(p.Calls) != 1 || p.Calls[0].Name != "memory__search_nodes" || args.String() != `{"query":"42"}` ||
		!slices.Contains(p.Calls[0].Repairs, "schema_coercion") {
		t.Errorf("calls %+v: want memory__search_nodes with the query coerced to a string", p.Calls)
	}
	if len(p.Errors) != 1 || p.Errors[0].Code != "invalid_arguments" || !strings.Contains(p.Errors[0].Message, "action") {
		t.Errorf("errors %+v: want dispatch_engineering's bad action refused by its schema", p.Errors)
	}
	// Without the configuration no tool is known: bare JSON is content.
	stdout, _, _ = runMain(t, response, "parse")
	p = out{}
	if err := json.Unmarshal([]byte(stdout), &p); err != nil || len(p.Calls) != 0 || !strings.Contains(p.Content, "memory__search_nodes") {
		t.Errorf("without --config: %s", stdout)
	}
	if _, _, code := runMain(t, response, "parse", "--config", cfg, "--known-tools", "a"); code == 0 {
		t.Error("--known-tools with --config: want a usage error")
	}
}

// TestRunKnowsTheServersTools: `toolbus run` starts the configuration's MCP servers
// with the executor and sends the first response once they have listed their tools, so
// that a call written without a marker (a pythonic list after a sentence) of a server's
// tool is recognised — before, the servers started at the first call and such a
// response was "no tool call".
func TestRunKnowsTheServersTools(t *testing.T) {
	cfg := memoryConfig(t, "engineering", map[string]any{"enabled": false})
	stdout, stderr, code := runMain(t, "Let me look.\n[memory__read_graph()]", "run", "--config", cfg, "--json")
	if code != 0 || !strings.Contains(stdout, `"tool":"memory__read_graph"`) || !strings.Contains(stdout, `"success":true`) {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
}

// `toolbus send --stream` replays a response token by token: the output is the whole
// response's, and each call's result is reported on stderr as it is answered.
func TestSendStream(t *testing.T) {
	url, _ := startPipeline(t)
	file := filepath.Join(t.TempDir(), "response.txt")
	text := "Checking.\n<tool_call>{\"name\": \"clock\", \"arguments\": {}}</tool_call>\n" +
		`<tool_call>{"name": "dispatch_engineering", "arguments": {"domain": "geometry", "action": "info"}}</tool_call>` + "\nThat is all."
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runMain(t, "", "send", "--nats", url, "--stream", "--rate", "1000", "--reasoning", "tagged", "--json", file)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var out messages.Output
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	if len(out.Results) != 2 || !out.Results[0].Success || !out.Results[1].Success {
		t.Fatalf("output: %s", stdout)
	}
	for _, want := range []string{"call 0 (clock) ok", "call 1 (dispatch_engineering) ok"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if _, stderr, code := runMain(t, "", "send", "--nats", url, "--stream", "--rate", "0", file); code == 0 || !strings.Contains(stderr, "--rate") {
		t.Errorf("--rate 0: exit %d, %s", code, stderr)
	}
}

// `toolbus dead ls` lists the dead letters; `toolbus dead redrive SEQ` sends one's call
// again and prints its new output.
func TestDeadLettersRedrive(t *testing.T) {
	url, nc := startPipeline(t)
	call := messages.ToolCall{ID: "d1/r1/0", ResponseID: "r1", Conversation: "d1", Count: 1, Tool: "clock", Arguments: json.RawMessage(`{}`)}
	body, _ := json.Marshal(messages.DeadCall{Call: call, Result: messages.ResultFor(call).Fail(messages.Errorf(messages.CodeServerUnavailable, "down"))})
	if err := nc.Publish(messages.DeadSubject("d1"), body); err != nil {
		t.Fatal(err)
	}
	var list []map[string]any
	for range 50 {
		stdout, stderr, code := runMain(t, "", "dead", "ls", "--nats", url, "--json")
		if code != 0 {
			t.Fatalf("dead ls: exit %d: %s", code, stderr)
		}
		if json.Unmarshal([]byte(stdout), &list); len(list) > 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(list) != 1 || list[0]["tool"] != "clock" || list[0]["redrivable"] != true {
		t.Fatalf("dead ls: %v", list)
	}
	seq := strconv.Itoa(int(list[0]["sequence"].(float64)))
	stdout, stderr, code := runMain(t, "", "dead", "redrive", seq, "--nats", url, "--json")
	var out messages.Output
	if code != 0 || json.Unmarshal([]byte(stdout), &out) != nil || len(out.Results) != 1 || !out.Results[0].Success {
		t.Fatalf("dead redrive %s: exit %d: %s %s", seq, code, stdout, stderr)
	}
	stdout, _, _ = runMain(t, "", "dead", "ls", "--nats", url)
	if !strings.Contains(stdout, "redrive") || !strings.Contains(stdout, "server_unavailable: down") {
		t.Errorf("dead ls after the redrive:\n%s", stdout)
	}
	if _, stderr, code := runMain(t, "", "dead", "redrive", "x", "--nats", url); code == 0 || !strings.Contains(stderr, "sequence number") {
		t.Errorf("redrive x: exit %d, %s", code, stderr)
	}
}

// startPipeline runs the parser, executor and formatter on a fresh embedded NATS and
// returns its URL and a connection to it.
func startPipeline(t *testing.T) (string, *nats.Conn) {
	t.Helper()
	url := bustest.Server(t)
	nc, _ := bustest.Connect(t, url)
	ctx, cancel := context.WithCancel(context.Background())
	n, err := toolbus.Start(ctx, toolbus.Options{Provision: true, Conn: nc, Config: &config.Config{}, Services: []string{toolbus.Parser, toolbus.Executor, toolbus.Formatter}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); n.Wait() })
	return url, nc
}

// syncBuffer is a bytes.Buffer safe to write from one goroutine while another reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// toolbus serve --json-logs writes nothing but JSON lines, its own startup words (the
// embedded server's URL, the console's, "serving") included.
func TestServeJSONLogsOnly(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"serve", "--json-logs", "--port", "-1", "--ops-addr", "127.0.0.1:0", "--console-addr", "127.0.0.1:0"},
			Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" }})
	}()
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(errOut.String(), "serving") {
		if time.Now().After(deadline) {
			t.Fatalf("not serving:\n%s", errOut.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	<-done
	lines := strings.Split(strings.TrimSpace(errOut.String()+out.String()), "\n")
	if len(lines) < 3 {
		t.Fatalf("%d lines", len(lines))
	}
	for _, l := range lines {
		if !json.Valid([]byte(l)) {
			t.Errorf("not a JSON line: %q", l)
		}
	}
	if !strings.Contains(errOut.String(), `"msg":"console"`) || !strings.Contains(errOut.String(), `"msg":"embedded NATS with JetStream"`) {
		t.Errorf("the startup lines are not logged:\n%s", errOut.String())
	}
	// Without --store-dir, the store that makes a call run once across a restart is
	// temporary: said as it starts.
	if !strings.Contains(errOut.String(), `"msg":"temporary JetStream store: --store-dir keeps`) {
		t.Errorf("the temporary store is not said:\n%s", errOut.String())
	}
}
