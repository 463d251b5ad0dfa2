package toolbus_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolbus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// slowServerDir, when set, makes the test binary a stdio MCP server (TestMain) keeping
// its pid and its first call's start in that folder.
const slowServerDir = "TOOLBUS_TEST_SLOW_SERVER_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(slowServerDir); dir != "" {
		_ = os.WriteFile(filepath.Join(dir, "pid"), []byte(strconv.Itoa(os.Getpid())), 0o644)
		started := filepath.Join(dir, "started")
		srv := slowServer(func() bool {
			f, err := os.OpenFile(started, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
			if err != nil {
				return false
			}
			f.Close()
			return true
		})
		_ = srv.Run(context.Background(), &mcp.StdioTransport{})
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// slowServer has a read-only tool, "slow_status": its first call (first reports
// whether this is it) takes 30 s, long enough to be cut off by a restart; every later
// one answers at once.
func slowServer(first func() bool) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "slow"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "slow_status", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, map[string]string, error) {
			if first() {
				select {
				case <-ctx.Done():
					return nil, nil, ctx.Err()
				case <-time.After(30 * time.Second):
				}
			}
			return nil, map[string]string{"status": "ok"}, nil
		})
	return srv
}

// A server restarted 2 s into a call with a 30 s budget serves the call: the call's
// attempts back off within its budget, across deliveries, until the server is back —
// and the attempts are counted alike in the result, the attempt spans and the retries
// metric (attempts less one). Over streamable HTTP (the server stops and starts again on
// its address) and stdio (its process is killed; the executor starts a new one).
func TestServerRestartedMidCall(t *testing.T) {
	for _, transport := range []string{"http", "stdio"} {
		t.Run(transport, func(t *testing.T) {
			dir := t.TempDir()
			var entry string
			var cutOff func()
			switch transport {
			case "http":
				var first atomic.Bool
				l, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				addr := l.Addr().String()
				serve := func(l net.Listener) *http.Server {
					srv := slowServer(func() bool {
						if first.CompareAndSwap(false, true) {
							_ = os.WriteFile(filepath.Join(dir, "started"), nil, 0o644)
							return true
						}
						return false
					})
					hs := &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)}
					go hs.Serve(l)
					return hs
				}
				hs := serve(l)
				t.Cleanup(func() { hs.Close() })
				cutOff = func() {
					hs.Close() // its listener and every connection: the call's too
					time.Sleep(time.Second)
					l, err := net.Listen("tcp", addr)
					if err != nil {
						t.Errorf("listening again on %s: %v", addr, err)
						return
					}
					hs = serve(l) // a new server: the old session is unknown to it
				}
				entry = fmt.Sprintf(`{"type": "http", "url": "http://%s", "timeout": "30s"}`, addr)
			case "stdio":
				exe, err := os.Executable()
				if err != nil {
					t.Fatal(err)
				}
				cutOff = func() {
					b, _ := os.ReadFile(filepath.Join(dir, "pid"))
					pid, _ := strconv.Atoi(string(b))
					if pid <= 0 || syscall.Kill(pid, syscall.SIGKILL) != nil {
						t.Errorf("killing the server (pid file %q)", b)
					}
				}
				entry = fmt.Sprintf(`{"command": %q, "env": {%q: %q}, "timeout": "30s"}`, exe, slowServerDir, dir)
			}
			cfg, err := config.Parse([]byte(fmt.Sprintf(`{"engineering": {"enabled": false}, "mcpServers": {"slow": %s}}`, entry)),
				"test.json", func(string) (string, bool) { return "", false })
			if err != nil {
				t.Fatal(err)
			}
			rec := tracetest.NewSpanRecorder()
			reader := sdkmetric.NewManualReader()
			connect := startBus(t)
			startEach(t, connect, toolbus.Options{Config: cfg, TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)),
				MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))}, toolbus.Parser, toolbus.Executor, toolbus.Formatter)
			c, err := client.New(connect("orchestrator"))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a bound on a hang
			defer cancel()
			answered := make(chan *messages.Output, 1)
			go func() {
				out, err := c.Ask(ctx, "restart", `<tool_call>{"name": "slow_status", "arguments": {}}</tool_call>`, nil)
				if err != nil {
					t.Error(err)
				}
				answered <- out
			}()
			for {
				if _, err := os.Stat(filepath.Join(dir, "started")); err == nil {
					break
				} else if !errors.Is(err, os.ErrNotExist) || ctx.Err() != nil {
					t.Fatalf("the call never started: %v", err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			time.Sleep(2 * time.Second)
			cutOff()
			out := <-answered
			if out == nil || len(out.Results) != 1 || !out.Results[0].Success {
				t.Fatalf("the call across the restart: %+v", out)
			}
			r := out.Results[0]
			attempts := 0
			for _, s := range rec.Ended() {
				if strings.HasPrefix(s.Name(), "attempt ") {
					attempts++
				}
			}
			retries := retriesCounted(t, reader)
			if r.Attempts < 2 || attempts != r.Attempts || retries != int64(r.Attempts-1) {
				t.Errorf("the result says %d attempts, %d attempt spans, the retries metric %d; want them equal (retries one less), at least 2",
					r.Attempts, attempts, retries)
			}
			t.Logf("answered after %d attempts (%d spans, %d retries counted)", r.Attempts, attempts, retries)
		})
	}
}

// retriesCounted sums the toolbus.retries counter.
func retriesCounted(t *testing.T, reader *sdkmetric.ManualReader) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if s, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "toolbus.retries" {
				for _, dp := range s.DataPoints {
					n += dp.Value
				}
			}
		}
	}
	return n
}
