package healthd_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/messages"
)

// stdioServerEnv makes the test binary an MCP server on stdio (see TestMain).
const stdioServerEnv = "TOOLBUS_HEALTHD_TEST_STDIO_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(stdioServerEnv) == "1" {
		_ = newMCPServer(nil, nil).Run(context.Background(), &mcp.StdioTransport{})
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// newMCPServer is a server with two tools; lists counts its tools/list requests.
func newMCPServer(lists *atomic.Int64, opts *mcp.ServerOptions) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "probed", Version: "1.0.0"}, opts)
	obj := map[string]any{"type": "object"}
	for _, name := range []string{"a", "b"} {
		s.AddTool(&mcp.Tool{Name: name, InputSchema: obj}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{StructuredContent: map[string]bool{"ok": true}}, nil
		})
	}
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/list" && lists != nil {
				lists.Add(1)
			}
			return next(ctx, method, req)
		}
	})
	return s
}

// mcpHTTP is a streamable HTTP MCP server that can be stopped, restarted on the same
// address, and made to hang.
type mcpHTTP struct {
	t       *testing.T
	addr    string
	handler http.Handler
	lists   atomic.Int64
	hang    atomic.Bool
	hanging atomic.Int64  // requests hanging now
	release chan struct{} // closed when the test ends: hanging requests return

	mu sync.Mutex
	ts *httptest.Server
}

func startMCPHTTP(t *testing.T, opts *mcp.StreamableHTTPOptions) *mcpHTTP {
	t.Helper()
	m := &mcpHTTP{t: t, release: make(chan struct{})}
	srv := newMCPServer(&m.lists, nil)
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, opts)
	m.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m.hang.Load() {
			m.hanging.Add(1)
			defer m.hanging.Add(-1)
			select {
			case <-r.Context().Done():
			case <-m.release:
			}
			return
		}
		mcpHandler.ServeHTTP(w, r)
	})
	m.start()
	t.Cleanup(func() {
		close(m.release)
		m.stop()
	})
	return m
}

func (m *mcpHTTP) URL() string { return "http://" + m.addr }

func (m *mcpHTTP) start() {
	m.t.Helper()
	addr := m.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	var ln net.Listener
	var err error
	for range 50 { // the old socket may take a moment to let go of the port
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		m.t.Fatal(err)
	}
	m.addr = ln.Addr().String()
	ts := httptest.NewUnstartedServer(m.handler)
	ts.Listener.Close()
	ts.Listener = ln
	ts.Start()
	m.mu.Lock()
	m.ts = ts
	m.mu.Unlock()
}

func (m *mcpHTTP) stop() {
	m.mu.Lock()
	ts := m.ts
	m.ts = nil
	m.mu.Unlock()
	if ts != nil {
		ts.CloseClientConnections()
		ts.Close()
	}
}

// natsJS starts an embedded NATS server with JetStream, provisions toolbus's streams
// and buckets in memory, and returns a connection.
func natsJS(t *testing.T) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	return bustest.Provisioned(t)
}

func healthKV(t *testing.T, js jetstream.JetStream) jetstream.KeyValue {
	t.Helper()
	kv, err := js.KeyValue(context.Background(), messages.BucketHealth)
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// status reads a server's stored status; ok is false when there is none.
func status(t *testing.T, kv jetstream.KeyValue, server string) (messages.HealthStatus, bool) {
	t.Helper()
	st, rev, err := bus.GetJSON[messages.HealthStatus](context.Background(), kv, bus.Key(server))
	if err != nil {
		t.Fatal(err)
	}
	return st, rev != 0
}

// waitFor polls cond until it holds or limit passes, and returns how long it took.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

// subscribeHealth collects the statuses published on toolbus.health.<server>.
func subscribeHealth(t *testing.T, nc *nats.Conn, server string) func() []messages.HealthStatus {
	t.Helper()
	var mu sync.Mutex
	var got []messages.HealthStatus
	sub, err := nc.Subscribe(messages.HealthSubject(server), func(m *nats.Msg) {
		var st messages.HealthStatus
		if json.Unmarshal(m.Data, &st) == nil {
			mu.Lock()
			got = append(got, st)
			mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return func() []messages.HealthStatus {
		mu.Lock()
		defer mu.Unlock()
		return append([]messages.HealthStatus(nil), got...)
	}
}

func decode(t *testing.T, b []byte) messages.HealthStatus {
	t.Helper()
	var st messages.HealthStatus
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	return st
}
