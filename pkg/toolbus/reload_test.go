package toolbus

import (
	"context"
	"fmt"
	"log/slog"
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
	"github.com/toolbus/toolbus/pkg/claims"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/engineering"
	"github.com/toolbus/toolbus/pkg/executor"
	"github.com/toolbus/toolbus/pkg/mcpwire"
	"github.com/toolbus/toolbus/pkg/messages"
)

// writeConfig replaces the file as an editor saving it would.
func writeConfig(t *testing.T, path, body string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: did not happen within 45s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestWatchConfig(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "toolbus.json")
	writeConfig(t, path, `{"executor": {"concurrency": 1}}`)
	applied := make(chan *config.Config, 16)
	apply := func(cfg *config.Config) error {
		if cfg.Executor.Concurrency == 99 {
			return fmt.Errorf("refused")
		}
		applied <- cfg
		return nil
	}
	var next func(want int)
	next = func(want int) {
		t.Helper()
		select {
		case cfg := <-applied:
			if cfg.Executor.Concurrency == 1 && want == 2 {
				// The file as it was when the watch started, applied once.
				next(want)
				return
			}
			if cfg.Executor.Concurrency != want || cfg.Source != path {
				t.Fatalf("applied concurrency %d from %q, want %d from %q", cfg.Executor.Concurrency, cfg.Source, want, path)
			}
		case <-time.After(45 * time.Second):
			t.Fatalf("concurrency %d not applied within 45s", want)
		}
	}
	var reload trigger // Toolbus.Reload's, which the binaries fire on SIGHUP
	logs := make(chan string, 64)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- WatchConfig(ctx, path, apply, reload.wait, slog.New(logTo(logs))) }()
	logged := func(want string) {
		t.Helper()
		timeout := time.After(45 * time.Second)
		for {
			select {
			case msg := <-logs:
				if strings.Contains(msg, want) {
					return
				}
			case <-timeout:
				t.Fatalf("no log saying %q within 45s", want)
			}
		}
	}

	writeConfig(t, path, `{"executor": {"concurrency": 2}}`)
	next(2)
	// A broken file, an invalid one and one that apply refuses are reported and
	// leave the configuration as it was; the next good one is applied.
	writeConfig(t, path, `{"executor": {"concurrency": `)
	logged("not valid JSON")
	writeConfig(t, path, `{"mcpServers": {"x": {"type": "carrier-pigeon"}}}`)
	logged(`mcpServers.x.type: unknown transport "carrier-pigeon"`)
	writeConfig(t, path, `{"executor": {"concurrency": 99}}`)
	logged("refused")
	if len(applied) != 0 {
		t.Fatalf("a bad configuration was applied: %+v", <-applied)
	}
	writeConfig(t, path, `{"executor": {"concurrency": 3}}`)
	next(3)
	// A reload applies the file even though it did not change.
	reload.fire()
	next(3)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// logTo sends every log record's message and attributes to ch.
func logTo(ch chan<- string) slog.Handler { return logHandler{ch} }

type logHandler struct{ ch chan<- string }

func (logHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h logHandler) WithAttrs([]slog.Attr) slog.Handler     { return h }
func (h logHandler) WithGroup(string) slog.Handler          { return h }
func (h logHandler) Handle(_ context.Context, r slog.Record) error {
	msg := r.Message
	r.Attrs(func(a slog.Attr) bool { msg += " " + a.String(); return true })
	select {
	case h.ch <- msg:
	default:
	}
	return nil
}

// reloadServer is an MCP server over streamable HTTP with one tool, and a "wait" tool
// that runs until released.
func reloadServer(t *testing.T, tool string, started chan<- struct{}, release <-chan struct{}) string {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: tool, Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: tool, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, map[string]string, error) {
			return nil, map[string]string{"answer": "from " + tool}, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "wait", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, map[string]string, error) {
			started <- struct{}{}
			select {
			case <-release:
				return nil, map[string]string{"answer": "waited"}, nil
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	return ts.URL
}

// startReloadingPipeline runs the parser and formatter with Start, and an executor as
// build assembles it, its MCP backends following the pool and the pool following the
// configuration file.
func startReloadingPipeline(t *testing.T, path string) *client.Client {
	t.Helper()
	nc, js := bustest.JetStream(t)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	ctx, cancel := context.WithCancel(context.Background())
	n, err := Start(ctx, Options{Provision: true, Conn: nc, Config: cfg, Services: []string{Parser, Formatter}})
	if err != nil {
		t.Fatal(err)
	}
	catalog, err := js.KeyValue(ctx, messages.BucketCatalog)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := NewPool(cfg, mcpwire.Options{OnCatalog: func(server string, tools []mcpwire.Tool) { mirrorCatalog(catalog, server, tools, log) }})
	if err != nil {
		t.Fatal(err)
	}
	exec, err := NewExecutor(cfg, nil, engineering.NewMemorySessions(), pool)
	if err != nil {
		t.Fatal(err)
	}
	mirrorInProcess(catalog, exec.Router, pool, log)
	calls, err := js.KeyValue(ctx, messages.BucketCalls)
	if err != nil {
		t.Fatal(err)
	}
	st := &executor.Stage{Exec: exec, Claims: claims.KV{KV: calls, Owner: "test"}}
	runs := []runFunc{runStage(js, messages.StreamCalls, messages.ConsumerExecutor, bus.Decoded(executor.Decode, st.Execute), true, bus.RunOptions{Concurrency: 16}), watchPool(cfg, pool, nil, func(*config.Config) { mirrorInProcess(catalog, exec.Router, pool, log) }, log), func(ctx context.Context) error {
		<-ctx.Done()
		return pool.Close()
	}}
	stopped := make(chan error, len(runs))
	for _, run := range runs {
		go func() { stopped <- run(ctx) }()
	}
	t.Cleanup(func() {
		cancel()
		for range runs {
			if err := <-stopped; err != nil {
				t.Errorf("executor: %v", err)
			}
		}
		if err := n.Wait(); err != nil {
			t.Errorf("services: %v", err)
		}
	})
	c, err := client.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The executor follows its configuration file: a server added while running has its
// tools callable, a removed one's calls get unknown_tool, and a call under way to a
// server that stays is not dropped.
func TestReloadThroughPipeline(t *testing.T) {
	t.Parallel()
	started, release := make(chan struct{}, 1), make(chan struct{})
	alpha := reloadServer(t, "alpha", started, release)
	beta := reloadServer(t, "beta", make(chan struct{}, 1), nil)
	path := filepath.Join(t.TempDir(), "toolbus.json")
	server := func(name, url string) string { return fmt.Sprintf("%q: {\"type\": \"http\", \"url\": %q}", name, url) }
	writeConfig(t, path, `{"mcpServers": {`+server("a", alpha)+`}}`)
	c := startReloadingPipeline(t, path)
	ask := func(calls ...string) []messages.OutputResult {
		t.Helper()
		var text strings.Builder
		for _, name := range calls {
			fmt.Fprintf(&text, `<tool_call>{"name": %q, "arguments": {}}</tool_call>`+"\n", name)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		out, err := c.Ask(ctx, "reload", text.String(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Results) != len(calls) {
			t.Fatalf("%d results for %d calls: %s", len(out.Results), len(calls), out.Text)
		}
		return out.Results
	}
	code := func(r messages.OutputResult) string {
		if r.Success {
			return "ok " + string(r.Result)
		}
		return string(r.Error.Code)
	}

	if r := ask("alpha", "beta"); code(r[0]) != `ok {"answer":"from alpha"}` || code(r[1]) != "unknown_tool" {
		t.Fatalf("before: alpha %s, beta %s", code(r[0]), code(r[1]))
	}
	// A call to the server that stays is under way while the file changes.
	inFlight := make(chan []messages.OutputResult, 1)
	go func() { inFlight <- ask("a__wait") }()
	<-started

	writeConfig(t, path, `{"mcpServers": {`+server("a", alpha)+`, `+server("b", beta)+`}}`)
	waitFor(t, "beta callable", func() bool { return code(ask("beta")[0]) == `ok {"answer":"from beta"}` })
	close(release)
	if r := <-inFlight; code(r[0]) != `ok {"answer":"waited"}` {
		t.Errorf("the call under way to the server that stayed: %s %+v", code(r[0]), r[0].Error)
	}

	writeConfig(t, path, `{"mcpServers": {`+server("b", beta)+`}}`)
	waitFor(t, "alpha gone", func() bool { return code(ask("alpha")[0]) == "unknown_tool" })
	if r := ask("a__alpha", "b__beta"); code(r[0]) != "unknown_tool" || code(r[1]) != `ok {"answer":"from beta"}` {
		t.Errorf("after the removal: a__alpha %s, b__beta %s", code(r[0]), code(r[1]))
	}
}

// A reload asked for while the configuration is being applied is not lost: it applies
// the file once more when the apply under way is done.
func TestReloadDuringApply(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "toolbus.json")
	writeConfig(t, path, `{"executor": {"concurrency": 2}}`)
	started, release := make(chan struct{}), make(chan struct{})
	applies := make(chan int, 8)
	n := 0
	apply := func(*config.Config) error {
		n++
		if n == 1 {
			close(started)
			<-release
		}
		applies <- n
		return nil
	}
	var reload trigger
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go WatchConfig(ctx, path, apply, reload.wait, nil)
	<-started
	reload.fire() // while the first apply runs
	close(release)
	for want := 1; want <= 2; want++ {
		select {
		case got := <-applies:
			if got != want {
				t.Fatalf("apply %d, want %d", got, want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("apply %d never came: the reload asked for during the first was lost", want)
		}
	}
}
