package cli

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/messages"
)

// healthConfig writes a configuration with a server that answers and one that does not.
func healthConfig(t *testing.T) string {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "tickets"}, nil)
	srv.AddTool(&mcp.Tool{Name: "lookup", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := ln.Addr().String()
	ln.Close()
	cfg := `{"mcpServers": {
		"tickets": {"type": "http", "url": "` + ts.URL + `"},
		"gone": {"type": "http", "url": "http://` + gone + `"}
	}}`
	path := filepath.Join(t.TempDir(), "toolbus.json")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestHealthProbe(t *testing.T) {
	cfg := healthConfig(t)
	// "gone" is down: a probe exits 1 and says which, after printing every status.
	stdout, stderr, code := runMain(t, "", "health", "--probe", "--config", cfg, "--timeout", "2s", "--json")
	if code != 1 || !strings.Contains(stderr, "not up: gone") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var statuses []messages.HealthStatus
	if err := json.Unmarshal([]byte(stdout), &statuses); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	got := map[string]messages.HealthStatus{}
	var order []string
	for _, st := range statuses {
		got[st.Server] = st
		order = append(order, st.Server)
	}
	if strings.Join(order, ",") != "local,engineering,gone,tickets" {
		t.Errorf("servers %v", order)
	}
	if st := got["tickets"]; st.State != messages.HealthUp || st.Tools != 1 || st.Protocol == "" || st.Transport != "http" {
		t.Errorf("tickets: %+v", st)
	}
	if st := got["gone"]; st.State != messages.HealthDown || !strings.Contains(st.Error, "refused") {
		t.Errorf("gone: %+v", st)
	}

	stdout, _, code = runMain(t, "", "health", "--probe", "--config", cfg)
	if code != 1 || !strings.Contains(stdout, "SERVER") || !strings.Contains(stdout, "tickets") || !strings.Contains(stdout, "down (1 failed)") {
		t.Errorf("table (exit %d):\n%s", code, stdout)
	}
}

func TestHealthFromBucket(t *testing.T) {
	nc, js := bustest.Provisioned(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, _ := js.KeyValue(ctx, messages.BucketHealth)
	now := time.Now().UTC()
	for _, st := range []messages.HealthStatus{
		{Server: "tickets", Transport: "http", State: messages.HealthUp, Tools: 1, Protocol: "2025-11-25", LatencyMS: 3.2, CheckedAt: now, ChangedAt: now.Add(-time.Hour)},
		{Server: "local", Transport: "in-process", State: messages.HealthUp, Tools: 1, CheckedAt: now},
	} {
		b, _ := json.Marshal(st)
		if _, err := kv.Put(ctx, bus.Key(st.Server), b); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := kv.Put(ctx, messages.HealthLeaderKey, []byte(`{"holder": "h1"}`)); err != nil {
		t.Fatal(err)
	}

	stdout, stderr, code := runMain(t, "", "health", "--nats", nc.ConnectedUrl(), "--json")
	var statuses []messages.HealthStatus
	if code != 0 || json.Unmarshal([]byte(stdout), &statuses) != nil {
		t.Fatalf("exit %d: %s%s", code, stdout, stderr)
	}
	if len(statuses) != 2 || statuses[0].Server != "local" || statuses[1].Server != "tickets" {
		t.Errorf("statuses %+v", statuses)
	}

	// With a configuration: its servers only, "gone" never probed.
	stdout, stderr, code = runMain(t, "", "health", "--nats", nc.ConnectedUrl(), "--config", healthConfig(t))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	t.Logf("\n%s", stdout)
	for _, want := range []string{"tickets", "2025-11-25", "1h0m0s ago", "gone", "unknown", "no status yet", "engineering"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("no %q in\n%s", want, stdout)
		}
	}
}

// What the CLI prints of a server's errors holds none of its secrets: a token in its URL
// (`toolbus tools` quoting the server that is left out, `toolbus health --probe` quoting
// its error), in the table, the JSON and stderr.
func TestCLIPrintsNoSecret(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := ln.Addr().String()
	ln.Close()
	const token, key = "tok-5ecret-8f2a91", "ak-5ecret-77c3e0"
	cfg := `{"mcpServers": {"gone": {"type": "http", "url": "http://` + gone + `/mcp?token=` + token + `&api_key=` + key + `"}}}`
	path := filepath.Join(t.TempDir(), "toolbus.json")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"tools", "--config", path, "--wait", "2s"},
		{"health", "--probe", "--config", path, "--timeout", "2s"},
		{"health", "--probe", "--config", path, "--timeout", "2s", "--json"},
	} {
		stdout, stderr, _ := runMain(t, "", args...)
		if strings.Contains(stdout+stderr, token) || strings.Contains(stdout+stderr, key) {
			t.Errorf("toolbus %s printed a secret:\n%s\n%s", strings.Join(args, " "), stdout, stderr)
		}
		if !strings.Contains(stdout+stderr, gone) {
			t.Errorf("toolbus %s does not name the server's address (the test sees nothing):\n%s\n%s", strings.Join(args, " "), stdout, stderr)
		}
	}
}
