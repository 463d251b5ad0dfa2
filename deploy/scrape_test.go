package deploy_test

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/mcpwire"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolbus"
)

// exportedMetrics runs every toolbus service in this process on an embedded NATS server,
// with its ops server, an MCP server and a local tool; answers calls that succeed, fail,
// are retried and name no tool, so that every series exists; and returns the metric
// names its /metrics page shows (a histogram's _bucket, _sum and _count each).
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()

	srv := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		Text string `json:"text"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "fail"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "disk full"}}}, nil, nil
	})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	defer hs.Close()

	// A tool whose first attempt finds its server unavailable: one retry.
	var tries atomic.Int32
	local := localtools.New()
	if err := localtools.AddFunc(local, messages.ToolInfo{Name: "lookup_order", Idempotent: true},
		func(context.Context, struct{}) (string, error) {
			if tries.Add(1) == 1 {
				return "", &messages.ToolError{Code: messages.CodeServerUnavailable, Message: "503"}
			}
			return "shipped", nil
		}); err != nil {
		t.Fatal(err)
	}

	addr := &opsAddr{}
	tb, err := toolbus.Start(ctx, toolbus.Options{
		Ops:    &toolbus.OpsOptions{Addr: "127.0.0.1:0"},
		Logger: slog.New(addr),
		Tools:  local,
		Config: &config.Config{MCPServers: map[string]mcpwire.ServerConfig{"echo": {URL: hs.URL}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	if err := tb.WaitForTools(ctx); err != nil {
		t.Fatal(err)
	}
	out, err := tb.Client().Ask(ctx, "dashboard", `<tool_call>{"name": "echo__echo", "arguments": {"text": "hi"}}</tool_call>`+
		`<tool_call>{"name": "echo__fail", "arguments": {}}</tool_call>`+
		`<tool_call>{"name": "lookup_order", "arguments": {}}</tool_call>`+
		`<tool_call>{"name": "nope", "arguments": {}}</tool_call>`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Results) != 4 || !out.Results[0].Success || out.Results[1].Success || !out.Results[2].Success || out.Results[3].Success {
		t.Fatalf("output %+v", out)
	}

	// The leading healthd reports the servers, queues and dead letters once it has
	// probed: wait for its series.
	base := "http://" + addr.get(t) + "/metrics"
	var names map[string]bool
	for {
		names = scrapeNames(t, base)
		if names["toolbus_server_up"] && names["toolbus_dead_letters"] && names["toolbus_consumer_pending"] {
			return names
		}
		select {
		case <-ctx.Done():
			t.Fatalf("/metrics never showed the healthd's series: %v", names)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// scrapeNames reads a Prometheus text page and returns the names of its samples.
func scrapeNames(t *testing.T, url string) map[string]bool {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s\n%s", url, resp.Status, body)
	}
	names := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			names[line[:i]] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}

// opsAddr is a slog handler that keeps the address the ops server logs it listens on.
type opsAddr struct {
	mu   sync.Mutex
	addr string
}

func (h *opsAddr) Enabled(context.Context, slog.Level) bool { return true }
func (h *opsAddr) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *opsAddr) WithGroup(string) slog.Handler            { return h }

func (h *opsAddr) Handle(_ context.Context, r slog.Record) error {
	if !strings.HasPrefix(r.Message, "ops:") {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "addr" {
			h.mu.Lock()
			h.addr = a.Value.String()
			h.mu.Unlock()
		}
		return true
	})
	return nil
}

func (h *opsAddr) get(t *testing.T) string {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.addr == "" {
		t.Fatal("the ops server logged no address")
	}
	return h.addr
}
