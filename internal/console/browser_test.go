package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/internal/bench"
	"github.com/toolbus/toolbus/internal/console"
	"github.com/toolbus/toolbus/internal/mcptest"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/executor"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolbus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// chromium returns Debian's chromium (TOOLBUS_CHROMIUM overrides the path); without
// it the test is skipped, unless TOOLBUS_REQUIRE_TOOLS says the tools are installed.
func chromium(t *testing.T) string {
	path := os.Getenv("TOOLBUS_CHROMIUM")
	if path == "" {
		path = "/usr/bin/chromium"
	}
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("TOOLBUS_REQUIRE_TOOLS") != "" {
			t.Fatalf("%s: %v (TOOLBUS_REQUIRE_TOOLS is set; scripts/test installs Debian's chromium)", path, err)
		}
		t.Skipf("no chromium at %s; scripts/test installs it", path)
	}
	return path
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// everything runs the npm server-everything over streamable HTTP on port, and can stop
// and start it again on the same port.
type everything struct {
	t    *testing.T
	port int
	mu   sync.Mutex
	cmd  *exec.Cmd
}

func (e *everything) start() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	index := filepath.Join(mcptest.NPMPackage(e.t, "@modelcontextprotocol/server-everything"), "dist", "index.js")
	cmd := exec.Command("node", index, "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(e.port))
	if err := cmd.Start(); err != nil {
		return err
	}
	e.cmd = cmd
	for range 200 {
		if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(e.port), time.Second); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("server-everything does not listen on %d", e.port)
}

func (e *everything) stop() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cmd != nil {
		e.cmd.Process.Kill()
		e.cmd.Wait()
		e.cmd = nil
	}
}

// The console in Debian's chromium, driven by playwright-core (testdata/browser.mjs),
// against a running pipeline with a real MCP server: the page goes live, shows the
// server going down and coming back (its process killed and started again; calls to it
// meanwhile fail and open the executor's breaker), shows the
// backlog rise and fall under `toolbus bench` (bench.Run, watched through its console),
// finds a failed call and its reason by conversation under 1,100 newer outputs and
// follows its trace link, shows each tool's statistics and how many outputs they come
// from, redrives a dead letter and shows its new output and, on the letter, when it
// was redriven and what its output said (a second redrive only after a confirmation
// that says what it does), lists two calls waiting for approval and approves one (it
// runs) and denies the other with a reason (the model reads it), answers a pasted
// response, and lists
// the tools with their declarations. The page is opened with its token in the URL, as
// toolbus prints it, and keeps it out of the address bar; opened without it, it asks
// for it. It runs under the console's Content-Security-Policy without a violation (an
// inline script the test injects is refused: the policy is in force). The main views
// are saved as screenshots (in TOOLBUS_CONSOLE_SHOTS when set: docs/console holds the
// README's).
func TestConsoleInABrowser(t *testing.T) {
	browser := chromium(t)
	playwright := filepath.Join(mcptest.NPMPackage(t, "playwright-core"), "index.mjs")
	server := &everything{t: t, port: freePort(t)}
	if err := server.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(server.stop)

	cfg, err := config.Parse([]byte(fmt.Sprintf(`{
		"mcpServers": {"everything": {"type": "http", "url": "http://127.0.0.1:%d/mcp"}},
		"policy": {"rules": [{"name": "echo-asks", "tools": ["everything__echo"], "when": "args.message.startsWith('may I')", "effect": "approve"}]},
		"health": {"interval": "1s"}}`, server.port)), "console-test.json", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	url := bustest.Server(t)
	nc, _ := bustest.Connect(t, url)
	ctx, cancel := context.WithCancel(context.Background())
	n, err := toolbus.Start(ctx, toolbus.Options{Provision: true, Conn: nc, Config: cfg, TracerProvider: sdktrace.NewTracerProvider(), Ops: &toolbus.OpsOptions{}} /* status replies: replicas ready, breakers */)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); n.Wait() })
	js, _ := jetstream.New(nc)
	c, _ := client.New(nc)
	// A bound on a hang, not a speed: each step has its own wait, and the steps' worst
	// cases add up to more than 3 minutes on a machine running two suites at once (the
	// browser was killed there in the bench step, every step on its way).
	actx, acancel := context.WithTimeout(ctx, 8*time.Minute)
	defer acancel()
	if _, err := c.Ask(actx, "broken-1", `<tool_call>{"name": "clock", "arguments": {}}</tool_call><tool_call>{"name": "no_such_tool", "arguments": {}}</tool_call>`, nil); err != nil {
		t.Fatal(err)
	}
	// 1,100 newer outputs of other conversations, stored as the formatter stores them:
	// broken-1's calls are still found.
	for i := range 1100 {
		if _, err := publishOutput(actx, js, fmt.Sprintf("busy-%d", i%37), fmt.Sprintf("busy-r%d", i), okResult("clock", float64(i%100+1))); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-actx.Done():
		t.Fatal(actx.Err())
	}

	ctl := http.NewServeMux()
	// A server that stops: healthd marks it down; the executor's breaker opens on the
	// calls that fail (it does not read healthd's opinion), so some are made.
	ctl.HandleFunc("POST /server/stop", func(w http.ResponseWriter, r *http.Request) {
		server.stop()
		// As many failed calls as open the breaker (executor.DefaultFailureThreshold):
		// it counts calls, not their attempts.
		for i := range executor.DefaultFailureThreshold {
			out, err := c.Ask(r.Context(), "down-1", `<tool_call>{"name": "everything__echo", "arguments": {"message": "hello?"}}</tool_call>`, nil)
			if err != nil || len(out.Results) != 1 || out.Results[0].Success {
				http.Error(w, fmt.Sprintf("call %d to the stopped server: %v %+v", i, err, out), 500)
				return
			}
		}
	})
	ctl.HandleFunc("POST /server/start", func(w http.ResponseWriter, r *http.Request) {
		if err := server.start(); err != nil {
			http.Error(w, err.Error(), 500)
		}
	})
	// `toolbus bench` with its console: the page watches the bench's own pipeline.
	benchDone := make(chan error, 1)
	ctl.HandleFunc("POST /bench", func(w http.ResponseWriter, r *http.Request) {
		ready := make(chan string, 1)
		go func() {
			_, err := bench.Run(actx, bench.Options{Responses: 2000, Concurrency: 128, Executors: 1, ToolLatency: 20 * time.Millisecond,
				NoPaced: true, Console: true, ConsoleReady: func(url string) { ready <- url }})
			benchDone <- err
		}()
		select {
		case url := <-ready:
			json.NewEncoder(w).Encode(map[string]string{"url": url})
		case err := <-benchDone:
			http.Error(w, fmt.Sprint("bench: ", err), 500)
		}
	})
	ctl.HandleFunc("POST /dead", func(w http.ResponseWriter, r *http.Request) {
		call := messages.ToolCall{ID: "dead-1/r1/0", ResponseID: "r1", Conversation: "dead-1", Count: 1, Tool: "clock", Arguments: json.RawMessage(`{}`)}
		body, _ := json.Marshal(messages.DeadCall{Call: call, Result: messages.ResultFor(call).Fail(messages.Errorf(messages.CodeServerUnavailable, "down for a while"))})
		if _, err := js.Publish(r.Context(), messages.DeadSubject("dead-1"), body); err != nil {
			http.Error(w, err.Error(), 500)
		}
	})
	// Two calls that wait for a person's approval, and what each was answered.
	approvals := map[string]chan string{"approve-1": make(chan string, 1), "deny-1": make(chan string, 1)}
	ctl.HandleFunc("POST /approvals", func(w http.ResponseWriter, r *http.Request) {
		for conv, answer := range approvals {
			go func() {
				out, err := c.Ask(actx, conv, `<tool_call>{"name": "everything__echo", "arguments": {"message": "may I, `+conv+`?"}}</tool_call>`, nil)
				if err != nil {
					answer <- err.Error()
					return
				}
				b, _ := json.Marshal(out.Results)
				answer <- string(b)
			}()
		}
	})
	ctl.HandleFunc("GET /approvals/{conversation}", func(w http.ResponseWriter, r *http.Request) {
		select {
		case a := <-approvals[r.PathValue("conversation")]:
			fmt.Fprint(w, a)
		case <-time.After(time.Minute):
			http.Error(w, "no answer", 504)
		}
	})
	ctl.HandleFunc("GET /jaeger/trace/{id}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "<html><body>trace %s</body></html>", r.PathValue("id"))
	})
	control := httptest.NewServer(ctl)
	defer control.Close()
	con := &console.Console{NC: nc, JS: js, Client: c, JaegerURL: control.URL + "/jaeger"}
	page := httptest.NewServer(con.Handler(token))
	defer page.Close()

	shots := os.Getenv("TOOLBUS_CONSOLE_SHOTS")
	if shots == "" {
		shots = t.TempDir()
	} else if !filepath.IsAbs(shots) {
		shots = filepath.Join(mcptest.RepoRoot(t), shots)
	}
	script := exec.CommandContext(actx, "node", "testdata/browser.mjs")
	script.Env = append(os.Environ(), "PLAYWRIGHT=file://"+playwright, "CHROMIUM="+browser, "CONSOLE_URL="+page.URL+"/?token="+token,
		"CONTROL_URL="+control.URL, "SHOTS_DIR="+shots)
	out, err := script.CombinedOutput()
	t.Logf("browser:\n%s", out)
	if err != nil {
		t.Fatalf("the browser test failed: %v", err)
	}
	if err := <-benchDone; err != nil {
		t.Errorf("toolbus bench: %v", err)
	}
	for _, name := range []string{"servers", "flow", "calls", "dead", "approvals", "try", "tools"} {
		if st, err := os.Stat(filepath.Join(shots, name+".png")); err != nil || st.Size() == 0 {
			t.Errorf("screenshot %s: %v", name, err)
		}
	}
}
