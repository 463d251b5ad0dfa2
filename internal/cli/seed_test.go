package cli

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// A ticket service as the seed's MCP handler reached it: JSON-RPC tools/call at
// http://host:port/endpoint, answering the result itself, and no tools/list. Configured
// the seed's way (host, port, endpoint) with its tools declared, it is listed in every
// vendor format, a bad call is answered invalid_arguments before any request reaches
// it, and a good one is answered with the service's result.
func TestSeedTicketServiceByHostPortEndpoint(t *testing.T) {
	var mu sync.Mutex
	var methods []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name      string         `json:"name"`
				Arguments map[string]any `json:"arguments"`
			} `json:"params"`
		}
		if r.URL.Path != "/mcp/v1" || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, "not here", http.StatusNotFound)
			return
		}
		mu.Lock()
		methods = append(methods, req.Method)
		mu.Unlock()
		result := `{"ticket_id": "TKT-12345", "status": "created"}`
		if req.Method != "tools/call" {
			w.Write([]byte(`{"jsonrpc": "2.0", "id": ` + string(req.ID) + `, "error": {"code": -32601, "message": "method not found"}}`))
			return
		}
		w.Write([]byte(`{"jsonrpc": "2.0", "id": ` + string(req.ID) + `, "result": ` + result + `}`))
	}))
	t.Cleanup(srv.Close)
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	p, _ := strconv.Atoi(port)
	cfg := filepath.Join(t.TempDir(), "toolbus.json")
	body := `{"mcpServers": {"ticket_service": {"host": "` + host + `", "port": ` + strconv.Itoa(p) + `, "endpoint": "/mcp/v1",
	  "tools": [{"name": "create_ticket", "description": "Opens a support ticket.",
	    "input_schema": {"type": "object", "properties": {"user_name": {"type": "string"}, "issue_summary": {"type": "string"}},
	      "required": ["user_name", "issue_summary"]}}]}}}`
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}

	stdout, stderr, code := runMain(t, "", "tools", "--config", cfg, "--format", "openai")
	if code != 0 || !strings.Contains(stdout, `"ticket_service__create_ticket"`) || !strings.Contains(stdout, "issue_summary") {
		t.Fatalf("toolbus tools --format openai: exit %d\n%s\n%s", code, stdout, stderr)
	}

	bad := `<tool_call>{"name": "create_ticket", "arguments": {"user_name": "Иван"}}</tool_call>`
	good := `<tool_call>{"name": "create_ticket", "arguments": {"user_name": "Иван", "issue_summary": "Проблема с входом"}}</tool_call>`
	dir := t.TempDir()
	for i, text := range []string{bad, good} {
		if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(i)+".txt"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stdout, stderr, code = runMain(t, "", "run", "--json", "--config", cfg, filepath.Join(dir, "0.txt"), filepath.Join(dir, "1.txt"))
	if code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "invalid_arguments") || !strings.Contains(lines[0], "issue_summary") ||
		!strings.Contains(lines[1], "TKT-12345") {
		t.Fatalf("outputs:\n%s\n%s", stdout, stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	// The bad call never left; the good one did (healthd's probe may have asked for
	// tools/list: it sees the service answer).
	if n := strings.Count(strings.Join(methods, ","), "tools/call"); n != 1 {
		t.Errorf("the service saw %v, want one tools/call (the good one)", methods)
	}
}

// lollms's local tools folder as its users have it — NAME.py with execute(params)
// beside NAME.mcp.json, and a tool in a folder of its own — answers through the whole
// pipeline.
func TestLollmsPythonToolsThroughThePipeline(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "tools"), os.DirFS("../../pkg/localtools/testdata/pytools")); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "toolbus.json")
	if err := os.WriteFile(cfg, []byte(`{"engineering": {"enabled": false}, "local": {"tools": {"folder": "tools", "env": ["LANG"]}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	response := filepath.Join(dir, "r.txt")
	if err := os.WriteFile(response, []byte(`<tool_call>{"name": "greet", "arguments": {"name": "lollms"}}</tool_call>
<tool_call>{"name": "word_stats", "arguments": {"text": "a b c d"}}</tool_call>`), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runMain(t, "", "run", "--json", "--config", cfg, response)
	if code != 0 || !strings.Contains(stdout, `Hello, lollms!`) || !strings.Contains(stdout, `\"words\": 4`) || strings.Contains(stdout, `"success":false`) {
		t.Fatalf("run: exit %d\n%s\n%s", code, stdout, stderr)
	}
}
