package toolbus_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolbus"
)

// A server's tools stay known across an executor's restart while the server is down:
// the executor reads the tools the server listed last from the catalog bucket, so a
// call of one by its bare name is server_unavailable naming the server — the model is
// never told the tool does not exist (issue 52). Before, the restarted executor knew
// none of them, and wrote the server's tools in the bucket as none.
func TestLastListedToolsKnownAfterARestart(t *testing.T) {
	t.Parallel()
	srv := mcp.NewServer(&mcp.Implementation{Name: "weather"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "get_weather"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "sunny"}}}, nil, nil
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	defer ts.Close()
	cfg := mcpConfig(t, fmt.Sprintf(`{"engineering": {"enabled": false},
		"mcpServers": {"weather": {"type": "http", "url": %q, "retry": {"maxAttempts": 1}}}}`, ts.URL))
	connect := startBus(t)
	c, err := client.New(connect("orchestrator"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a bound on a hang
	defer cancel()
	ask := func() messages.OutputResult {
		t.Helper()
		out, err := c.Ask(ctx, "weather", `<tool_call>{"name": "get_weather", "arguments": {}}</tool_call>`, nil)
		if err != nil || len(out.Results) != 1 {
			t.Fatalf("%v %+v", err, out)
		}
		return out.Results[0]
	}
	run := func() (stop func()) {
		rctx, rcancel := context.WithCancel(ctx)
		var nodes []*toolbus.Toolbus
		for _, svc := range toolbus.AllServices() {
			n, err := toolbus.Start(rctx, toolbus.Options{Config: cfg, Services: []string{svc}, Conn: connect(svc), Provision: true})
			if err != nil {
				t.Fatal(err)
			}
			nodes = append(nodes, n)
		}
		return func() {
			rcancel()
			for _, n := range nodes {
				n.Wait()
			}
		}
	}
	stop := run()
	if r := ask(); !r.Success {
		t.Fatalf("with the server up: %+v", r.Error)
	}
	stop()

	ts.CloseClientConnections()
	ts.Close() // the server is down for good
	stop = run()
	defer stop()
	r := ask()
	if r.Success || r.Error == nil || r.Error.Code != messages.CodeServerUnavailable || !strings.Contains(r.Error.Message, "weather") {
		t.Fatalf("with the server down after a restart: %+v; want server_unavailable naming the server", r.Error)
	}
	t.Logf("answered: %s", r.Error.Message)
}
