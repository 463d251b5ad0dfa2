package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolbus/toolbus/internal/testbin"
)

// binary is the engineering command's program.
func binary(t testing.TB) string {
	t.Helper()
	return testbin.Path(t, "./cmd/engineering")
}

func TestStdio(t *testing.T) {
	cmd := exec.Command(binary(t), "--stdio")
	cmd.Env = append(os.Environ(), "SERVER_NAME=TestCalc")
	cs := connectClient(t, &mcp.CommandTransport{Command: cmd})
	if got := cs.InitializeResult().ServerInfo.Name; got != "TestCalc" {
		t.Errorf("server name %q, want SERVER_NAME", got)
	}
	workflow(t, cs, nil)
}

func TestHTTP(t *testing.T) {
	addr := startHTTP(t)
	resp, err := http.Get("http://" + addr + "/health")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var health struct {
		Status string `json:"status"`
		Name   string `json:"name"`
		Tools  int    `json:"tools"`
	}
	if err := json.Unmarshal(body, &health); err != nil || resp.StatusCode != 200 || health.Status != "ok" || health.Tools != 3 || health.Name != "EngineersCalc" {
		t.Fatalf("GET /health: %d %s", resp.StatusCode, body)
	}
	workflow(t, connectClient(t, &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp"}), nil)
}

func TestHTTPStateless(t *testing.T) {
	addr := startHTTP(t, "--stateless")
	// Activation is kept per conversation id across separate clients.
	meta := mcp.Meta{"toolbus/conversation": "conv-1"}
	workflow(t, connectClient(t, &mcp.StreamableClientTransport{Endpoint: "http://" + addr}), meta)
	cs := connectClient(t, &mcp.StreamableClientTransport{Endpoint: "http://" + addr})
	text, isErr := call(t, cs, "execute_tool", map[string]any{"tool_name": "pressure.solve_kesselformel", "parameters": map[string]any{"p": 10, "d": 100, "sigma": 160}}, meta)
	if isErr || !strings.Contains(text, `"value":0.3125`) {
		t.Fatalf("second client of conv-1: %s", text)
	}
}

func TestFlagErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "stateless over stdio", args: []string{"--stdio", "--stateless"}, want: "--stateless needs HTTP"},
		{name: "stdio and http", args: []string{"--stdio", "--http", ":0"}, want: "--stdio and --http exclude each other"},
		{name: "bad expose", args: []string{"--expose", "wide"}, want: `want \"hierarchical\" or \"flat\"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := exec.Command(binary(t), tc.args...).CombinedOutput()
			if err == nil || !strings.Contains(string(out), tc.want) {
				t.Fatalf("err %v, output %s; want failure with %q", err, out, tc.want)
			}
		})
	}
}

// startHTTP runs the binary on a free port and returns its address once it listens.
func startHTTP(t *testing.T, args ...string) string {
	t.Helper()
	return startServer(t, nil, append([]string{"--http", "127.0.0.1:0"}, args...)...)
}

// HTTP is the default, on $PORT.
func TestHTTPOnPortByDefault(t *testing.T) {
	_, port, err := net.SplitHostPort(startServer(t, []string{"PORT=0"}))
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + port
	workflow(t, connectClient(t, &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp"}), nil)
}

func startServer(t *testing.T, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("server exited with %v after interrupt", err)
			}
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			t.Error("server did not stop on interrupt")
		}
	})
	addrRE := regexp.MustCompile(`addr=(\S+)`)
	lines := bufio.NewScanner(stderr)
	found := make(chan string, 1)
	go func() {
		for lines.Scan() {
			if m := addrRE.FindStringSubmatch(lines.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	select {
	case addr := <-found:
		return addr
	case <-time.After(10 * time.Second):
		t.Fatal("server did not report its address")
		return ""
	}
}

func connectClient(t *testing.T, transport mcp.Transport) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, transport, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args any, meta mcp.Meta) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args, Meta: meta})
	if err != nil {
		t.Fatalf("CallTool %s: %v", name, err)
	}
	return res.Content[0].(*mcp.TextContent).Text, res.IsError
}

// workflow checks that exactly three tools are listed and runs info → list → activate
// → execute_tool.
func workflow(t *testing.T, cs *mcp.ClientSession, meta mcp.Meta) {
	t.Helper()
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	if !slices.Equal(names, []string{"clock", "dispatch_engineering", "execute_tool"}) {
		t.Fatalf("tools/list = %v", names)
	}
	kessel := map[string]any{"tool_name": "pressure.solve_kesselformel", "parameters": map[string]any{"p": "10 bar", "d": "0.1 m", "sigma": 160}}
	steps := []struct {
		tool    string
		args    map[string]any
		want    string
		wantErr bool
	}{
		{tool: "clock", args: map[string]any{}, want: `"utc":"`},
		{tool: "dispatch_engineering", args: map[string]any{"action": "info"}, want: `{"name":"pressure"`},
		{tool: "execute_tool", args: kessel, want: "domain_not_active", wantErr: true},
		{tool: "dispatch_engineering", args: map[string]any{"domain": "pressure", "action": "list"}, want: `"name":"pressure.solve_kesselformel"`},
		{tool: "dispatch_engineering", args: map[string]any{"domain": "pressure", "action": "activate"}, want: `"activated":true`},
		{tool: "execute_tool", args: kessel, want: `"answer":"s = 0.3125 mm"`},
	}
	for i, st := range steps {
		text, isErr := call(t, cs, st.tool, st.args, meta)
		if isErr != st.wantErr || !strings.Contains(text, st.want) {
			t.Fatalf("step %d %s: isError %v, %s\nwant %q", i, st.tool, isErr, text, st.want)
		}
	}
}
