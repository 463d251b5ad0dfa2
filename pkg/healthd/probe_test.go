package healthd_test

import (
	"cmp"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/healthd"
	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/mcpwire"
	"github.com/toolbus/toolbus/pkg/messages"
)

func TestNext(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	t1 := t0.Add(15 * time.Second)
	ok := healthd.Result{Latency: 3 * time.Millisecond, Protocol: "2025-11-25", Tools: 4}
	fail := healthd.Result{Err: errors.New("connect: connection refused")}
	up := messages.HealthStatus{State: messages.HealthUp, Tools: 4, Protocol: "2025-11-25", CheckedAt: t0, ChangedAt: t0}
	tests := []struct {
		name         string
		prev         messages.HealthStatus
		r            healthd.Result
		wantState    messages.HealthState
		wantFailures int
		wantChanged  bool
		wantErr      string
	}{
		{name: "first success", r: ok, wantState: messages.HealthUp, wantChanged: true},
		{name: "first failure stays unknown", r: fail, wantState: messages.HealthUnknown, wantFailures: 1, wantErr: "refused"},
		{name: "up, one failure: still up", prev: up, r: fail, wantState: messages.HealthUp, wantFailures: 1, wantErr: "refused"},
		{name: "up, third failure: down", prev: with(up, 2), r: fail, wantState: messages.HealthDown, wantFailures: 3, wantChanged: true, wantErr: "refused"},
		{name: "down, more failures: still down", prev: down(up, 7), r: fail, wantState: messages.HealthDown, wantFailures: 8, wantErr: "refused"},
		{name: "down, one success: still down, its reason kept", prev: withError(down(up, 7), "refused"), r: ok, wantState: messages.HealthDown, wantErr: "refused"},
		{name: "down, a second success in a row: up", prev: rising(down(up, 7)), r: ok, wantState: messages.HealthUp, wantChanged: true},
		{name: "down, a success then a failure: still down", prev: rising(down(up, 7)), r: fail, wantState: messages.HealthDown, wantFailures: 1, wantErr: "refused"},
		{name: "success with a note", prev: up, r: healthd.Result{Note: "tools skipped: x"}, wantState: messages.HealthUp, wantErr: "tools skipped"},
		// The executor is still starting the server: no verdict, nothing counted.
		{name: "starting: stays unknown", r: healthd.Result{Pending: true, Note: "the executor is starting the server"}, wantState: messages.HealthUnknown, wantErr: "starting"},
		{name: "starting after failures: state, failures and reason kept", prev: withError(with(up, 2), "refused"), r: healthd.Result{Pending: true, Note: "starting"}, wantState: messages.HealthUp, wantFailures: 2, wantErr: "refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := healthd.Next(tt.prev, tt.r, 3, t1)
			if got.State != tt.wantState || got.Failures != tt.wantFailures {
				t.Errorf("state %s, failures %d; want %s, %d", got.State, got.Failures, tt.wantState, tt.wantFailures)
			}
			if changed := got.ChangedAt.Equal(t1); changed != tt.wantChanged {
				t.Errorf("changed_at %v, want changed=%v", got.ChangedAt, tt.wantChanged)
			}
			if !got.CheckedAt.Equal(t1) {
				t.Errorf("checked_at %v", got.CheckedAt)
			}
			if (tt.wantErr == "") != (got.Error == "") || !strings.Contains(got.Error, tt.wantErr) {
				t.Errorf("error %q, want %q", got.Error, tt.wantErr)
			}
			if tt.r.Err != nil && tt.prev.Tools != got.Tools {
				t.Errorf("a failure forgot the last known tool count: %d", got.Tools)
			}
			wantHistory := len(tt.prev.History)
			if tt.wantChanged {
				wantHistory++
			}
			if len(got.History) != wantHistory {
				t.Fatalf("history %+v, want %d changes", got.History, wantHistory)
			}
			if last := got.History; tt.wantChanged && (last[len(last)-1].To != got.State || !last[len(last)-1].At.Equal(t1)) {
				t.Errorf("the last change %+v, want to %s at %v", last[len(last)-1], got.State, t1)
			}
		})
	}
	// The history keeps the last changes only.
	st := messages.HealthStatus{}
	for i := range 3 * messages.MaxHealthHistory {
		r := ok
		if i%2 == 1 {
			r = fail
		}
		st = healthd.Next(st, r, 1, t0.Add(time.Duration(i)*time.Second))
	}
	if len(st.History) != messages.MaxHealthHistory || !st.History[len(st.History)-1].At.Equal(t0.Add(time.Duration(3*messages.MaxHealthHistory-1)*time.Second)) {
		t.Errorf("%d changes kept, the last at %v", len(st.History), st.History[len(st.History)-1].At)
	}
}

// An entry's "health": false leaves it out of the targets; its probeTimeout is its
// target's time limit, and a stdio server's is at least the server's own timeout.
func TestTargetsPerServer(t *testing.T) {
	cfg, err := config.Parse([]byte(`{"mcpServers": {
		"quiet": {"type": "http", "url": "http://127.0.0.1:1/mcp", "health": false},
		"quick": {"type": "http", "url": "http://127.0.0.1:1/mcp", "probeTimeout": "750ms"},
		"plain": {"type": "http", "url": "http://127.0.0.1:1/mcp"},
		"slow": {"command": "node", "probeTimeout": "2s", "timeout": "90s"}}}`), "test.json", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]time.Duration{}
	for _, tg := range healthd.Targets(cfg, nil) {
		got[tg.Name] = tg.Timeout
	}
	if _, ok := got["quiet"]; ok {
		t.Error(`a server with "health": false is a target`)
	}
	want := map[string]time.Duration{"quick": 750 * time.Millisecond, "plain": 0, "slow": 90 * time.Second}
	for name, d := range want {
		if g, ok := got[name]; !ok || g != d {
			t.Errorf("%s: timeout %v (target %v), want %v", name, g, ok, d)
		}
	}
}

func withError(st messages.HealthStatus, err string) messages.HealthStatus {
	st.Error = err
	return st
}

func with(st messages.HealthStatus, failures int) messages.HealthStatus {
	st.Failures = failures
	return st
}

func down(st messages.HealthStatus, failures int) messages.HealthStatus {
	st.State, st.Failures = messages.HealthDown, failures
	return st
}

func TestProbe(t *testing.T) {
	stateful := startMCPHTTP(t, nil)
	stateless := startMCPHTTP(t, &mcp.StreamableHTTPOptions{Stateless: true})
	old := mcp.NewServer(&mcp.Implementation{Name: "old"}, &mcp.ServerOptions{SupportedProtocolVersions: []string{"2025-06-18"}})
	old.AddTool(&mcp.Tool{Name: "x", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
	oldTS := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return old }, nil))
	t.Cleanup(oldTS.Close)
	sseTS := httptest.NewServer(mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return newMCPServer(nil, nil) }, nil))
	t.Cleanup(sseTS.Close)
	rpcTS := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		if strings.Contains(string(body), "tools/list") {
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"t1"},{"name":"t2"},{"name":"t3"}]}}`))
		}
	}))
	t.Cleanup(rpcTS.Close)
	noListTS := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"method not found"}}`))
	}))
	t.Cleanup(noListTS.Close)
	hanging := startMCPHTTP(t, nil)
	hanging.hang.Store(true)
	refused := closedPort(t)

	tests := []struct {
		name         string
		server       mcpwire.ServerConfig
		wantErr      string
		wantProtocol string
		wantTools    int
		// wantTransport is the status's, when not the configured one.
		wantTransport string
		// timeout is the probe's (default: a minute, so that a busy machine does not turn
		// a slow answer into a failure).
		timeout time.Duration
	}{
		{name: "http", server: mcpwire.ServerConfig{Type: "http", URL: stateful.URL()}, wantProtocol: "2025-11-25", wantTools: 2},
		{name: "http stateless, 2026-07-28", server: mcpwire.ServerConfig{Type: "http", URL: stateless.URL()}, wantProtocol: "2026-07-28", wantTools: 2},
		{name: "http, only 2025-06-18", server: mcpwire.ServerConfig{Type: "http", URL: oldTS.URL}, wantProtocol: "2025-06-18", wantTools: 1},
		{name: "sse", server: mcpwire.ServerConfig{Type: "sse", URL: sseTS.URL}, wantProtocol: "2025-11-25", wantTools: 2},
		// Cursor's entry of an SSE server: a url and no type, reached over SSE after the
		// streamable POST is refused; the status says so rather than "http".
		{name: "sse without a type", server: mcpwire.ServerConfig{URL: sseTS.URL}, wantProtocol: "2025-11-25", wantTools: 2, wantTransport: "sse"},
		{name: "stdio, 2026-07-28", server: mcpwire.ServerConfig{Command: os.Args[0], Env: map[string]string{stdioServerEnv: "1"}}, wantProtocol: "2026-07-28", wantTools: 2},
		{name: "jsonrpc with headers", server: mcpwire.ServerConfig{Type: "jsonrpc", URL: rpcTS.URL, Headers: map[string]string{"Authorization": "Bearer s3cret"}}, wantTools: 3},
		{name: "jsonrpc without tools/list", server: mcpwire.ServerConfig{Type: "jsonrpc", URL: noListTS.URL}},
		{name: "jsonrpc refused", server: mcpwire.ServerConfig{Type: "jsonrpc", URL: refused}, wantErr: "refused"},
		{name: "http refused", server: mcpwire.ServerConfig{Type: "http", URL: refused}, wantErr: "refused"},
		// The server never answers while the test runs: the probe ends by its own deadline
		// ("in time"), not by the backstop that gives up on a probe ignoring it ("within").
		{name: "http hanging", server: mcpwire.ServerConfig{Type: "http", URL: hanging.URL()}, timeout: 500 * time.Millisecond, wantErr: "no answer in time"},
		{name: "stdio, no such command", server: mcpwire.ServerConfig{Command: filepath.Join(t.TempDir(), "missing")}, wantErr: "connect"},
		// A stdio server that takes longer to start than the prober's limit (as `npx -y`
		// does cold) is up: its probe has the server's own timeout.
		{name: "stdio, slow to start", server: mcpwire.ServerConfig{Command: "/bin/sh", Args: []string{"-c", "sleep 1; exec " + os.Args[0]},
			Env: map[string]string{stdioServerEnv: "1"}}, timeout: 200 * time.Millisecond, wantProtocol: "2026-07-28", wantTools: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := &config.Config{Engineering: config.Engineering{Enabled: new(false)}, MCPServers: map[string]mcpwire.ServerConfig{"s": tt.server}}
			cfg.Local.Clock = new(false)
			targets := healthd.Targets(cfg, nil)
			if len(targets) != 2 || targets[1].Name != "s" {
				t.Fatalf("targets %v", targets)
			}
			timeout := cmp.Or(tt.timeout, time.Minute)
			start := time.Now()
			st := healthd.ProbeAll(context.Background(), targets[1:], timeout)[0]
			t.Logf("probed in %v (timeout %v)", time.Since(start), timeout)
			if tt.wantErr != "" {
				if st.State != messages.HealthDown || !strings.Contains(st.Error, tt.wantErr) {
					t.Fatalf("state %s, error %q; want down with %q", st.State, st.Error, tt.wantErr)
				}
				return
			}
			if st.State != messages.HealthUp || st.Error != "" {
				t.Fatalf("state %s, error %q; want up", st.State, st.Error)
			}
			if st.Protocol != tt.wantProtocol || st.Tools != tt.wantTools {
				t.Errorf("protocol %q, tools %d; want %q, %d", st.Protocol, st.Tools, tt.wantProtocol, tt.wantTools)
			}
			if st.Transport != cmp.Or(tt.wantTransport, string(tt.server.Transport())) || st.LatencyMS <= 0 {
				t.Errorf("transport %q, latency %v", st.Transport, st.LatencyMS)
			}
		})
	}
}

func TestProbeLocal(t *testing.T) {
	folder := t.TempDir()
	writeTool := func(name string, mode os.FileMode) {
		manifest := `{"name": "` + name + `", "description": "d", "inputSchema": {"type": "object"}}`
		if err := os.WriteFile(filepath.Join(folder, name+localtools.ManifestSuffix), []byte(manifest), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(folder, name), []byte("#!/bin/sh\necho '{}'\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	writeTool("good", 0o755)
	writeTool("lazy", 0o644)
	tests := []struct {
		name      string
		local     localtools.Config
		wantErr   string
		wantNote  string
		wantTools int
	}{
		{name: "clock only", wantTools: 1},
		{name: "tools folder", local: localtools.Config{Tools: localtools.ToolsConfig{Folder: folder}}, wantTools: 2, wantNote: "not executable"},
		{name: "tools folder missing", local: localtools.Config{Tools: localtools.ToolsConfig{Folder: filepath.Join(folder, "nope")}}, wantErr: "tools.folder"},
		{name: "knowledge base missing", local: localtools.Config{KnowledgeBase: localtools.KnowledgeBaseConfig{Folder: "/nonexistent/kb"}}, wantErr: "knowledge_base"},
		{name: "file_writer root", local: localtools.Config{FileWriter: localtools.FileWriterConfig{Root: folder}}, wantTools: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &config.Config{Local: tt.local}
			st := healthd.ProbeAll(context.Background(), healthd.Targets(cfg, nil)[:1], time.Second)[0]
			if st.Server != "local" || st.Transport != "in-process" {
				t.Fatalf("target %s/%s", st.Server, st.Transport)
			}
			if tt.wantErr != "" {
				if st.State != messages.HealthDown || !strings.Contains(st.Error, tt.wantErr) {
					t.Fatalf("state %s, error %q; want down with %q", st.State, st.Error, tt.wantErr)
				}
				return
			}
			if st.State != messages.HealthUp || st.Tools != tt.wantTools || !strings.Contains(st.Error, tt.wantNote) {
				t.Errorf("state %s, tools %d, note %q; want up, %d, %q", st.State, st.Tools, st.Error, tt.wantTools, tt.wantNote)
			}
		})
	}
}

// closedPort returns the URL of a port nobody listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// rising is st, down, after one good probe: its failures reset, one success counted.
func rising(st messages.HealthStatus) messages.HealthStatus {
	st.Failures, st.Successes = 0, 1
	return st
}
