package toolbus_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolbus/toolbus/internal/testbin"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/engineering"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolbus"
)

// statefulServer is an MCP server over streamable HTTP that keeps a working directory
// in each MCP session, as git-mcp-server does, and records which sessions each
// conversation's calls (by their _meta) reached.
type statefulServer struct {
	url string
	mu  sync.Mutex
	dir map[string]string          // session id → working directory
	saw map[string]map[string]bool // conversation → session ids
}

func newStatefulServer(t testing.TB) *statefulServer {
	s := &statefulServer{dir: map[string]string{}, saw: map[string]map[string]bool{}}
	srv := mcp.NewServer(&mcp.Implementation{Name: "stateful"}, nil)
	record := func(req *mcp.CallToolRequest) string {
		id := req.Session.ID()
		conv, _ := req.Params.Meta[messages.MetaConversation].(string)
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.saw[conv] == nil {
			s.saw[conv] = map[string]bool{}
		}
		s.saw[conv][id] = true
		return id
	}
	type dirIn struct {
		Dir string `json:"dir"`
	}
	type dirOut struct {
		Dir string `json:"dir"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "set_dir", Description: "Sets the session's working directory."},
		func(_ context.Context, req *mcp.CallToolRequest, in dirIn) (*mcp.CallToolResult, dirOut, error) {
			id := record(req)
			s.mu.Lock()
			s.dir[id] = in.Dir
			s.mu.Unlock()
			return nil, dirOut{Dir: in.Dir}, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "get_dir", Description: "The session's working directory.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, dirOut, error) {
			id := record(req)
			s.mu.Lock()
			defer s.mu.Unlock()
			return nil, dirOut{Dir: s.dir[id]}, nil
		})
	h := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(h.Close)
	s.url = h.URL
	return s
}

// sessionsOf is how many MCP sessions the calls of conv reached.
func (s *statefulServer) sessionsOf(conv string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.saw[conv])
}

// dirOf reads the working directory out of a get_dir or set_dir result.
func dirOf(t *testing.T, r messages.OutputResult) string {
	t.Helper()
	if !r.Success {
		t.Fatalf("call failed: %+v", r.Error)
	}
	var out struct{ Dir string }
	if err := json.Unmarshal(r.Result, &out); err != nil {
		t.Fatalf("result %s: %v", r.Result, err)
	}
	return out.Dir
}

// waitPulling waits until n executors pull calls.
func waitPulling(t *testing.T, nc *nats.Conn, n int) {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		c, err := js.Consumer(context.Background(), messages.StreamCalls, messages.ConsumerExecutor)
		if err == nil {
			if info, err := c.Info(context.Background()); err == nil && info.NumWaiting >= n {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d executors are not pulling calls within a minute", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Two executor processes and a server that keeps state per session: one conversation's
// state is never seen by another; twenty calls of one conversation, pulled by both
// executors, all reach one session; and when the executor holding it is killed, the
// next call runs in a new session and its result says the state was reset.
func TestConversationSessionsAcrossExecutors(t *testing.T) {
	t.Parallel() // waits mostly (processes starting, acks timing out): beside another test
	srv := newStatefulServer(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "toolbus.json")
	// One call at a time per executor, none buffered: both executors pull the calls.
	cfgText := fmt.Sprintf(`{"engineering": {"enabled": false}, "executor": {"concurrency": 1, "prefetch": -1},
		"nats": {"ack_wait": "2s"}, "mcpServers": {"git": {"type": "http", "url": %q}}}`, srv.url)
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	url := bustest.Server(t)
	exe := testbin.Path(t, "./cmd/executor")
	start := func(name string) *exec.Cmd {
		cmd := exec.Command(exe, "--nats", url, "--config", cfgPath, "--ops-addr", "127.0.0.1:0")
		cmd.Stderr = &prefixWriter{t: t, prefix: name}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	nc, _ := bustest.Connect(t, url, nats.Name("pipeline"))
	tb, err := toolbus.Start(ctx, toolbus.Options{Provision: true, Conn: nc, Config: cfg, Services: []string{toolbus.Parser, toolbus.Formatter}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); tb.Wait() })
	executors := []*exec.Cmd{start("executor-0"), start("executor-1")}
	waitPulling(t, nc, 2)
	c, err := client.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ask := func(conv, tool, args string) messages.OutputResult {
		t.Helper()
		out, err := c.Ask(ctx, conv, fmt.Sprintf(`<tool_call>{"name": %q, "arguments": %s}</tool_call>`, tool, args), nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Results) != 1 {
			t.Fatalf("%d results", len(out.Results))
		}
		return out.Results[0]
	}

	if got := dirOf(t, ask("conv-a", "set_dir", `{"dir": "/repo/a"}`)); got != "/repo/a" {
		t.Fatalf("set_dir answered %q", got)
	}
	if got := dirOf(t, ask("conv-b", "get_dir", `{}`)); got != "" {
		t.Errorf("conversation b sees conversation a's working directory %q", got)
	}

	// Every forwarded call is seen on toolbus.exec.>: some of the twenty were pulled
	// by the executor that does not hold the session.
	var forwarded sync.WaitGroup
	forwards := 0
	var fmu sync.Mutex
	sub, err := nc.Subscribe(messages.ExecSubject(">"), func(m *nats.Msg) {
		if m.Header.Get("Toolbus-Ping") == "" {
			fmu.Lock()
			forwards++
			fmu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		forwarded.Add(1)
		go func() {
			defer forwarded.Done()
			r := ask("conv-a", "get_dir", `{}`)
			if !r.Success {
				t.Errorf("call %d: %+v", i, r.Error)
				return
			}
			var out struct{ Dir string }
			if json.Unmarshal(r.Result, &out); out.Dir != "/repo/a" || r.Notice != "" {
				t.Errorf("call %d in conversation a: dir %q, notice %q; want /repo/a and none", i, out.Dir, r.Notice)
			}
		}()
	}
	forwarded.Wait()
	sub.Unsubscribe() // a subscriber of the subjects would answer for a dead executor
	fmu.Lock()
	if forwards == 0 {
		t.Error("no call was forwarded: the twenty calls were all pulled by the executor holding the session")
	}
	t.Logf("%d of 20 calls forwarded to the holder of the session", forwards)
	fmu.Unlock()
	if n := srv.sessionsOf("conv-a"); n != 1 {
		t.Errorf("conversation a's calls reached %d sessions, want 1", n)
	}

	// Kill the executor holding conversation a's session: try each in turn, since which
	// one holds it is the executors' business; killing the other changes nothing.
	reset := false
	for i := range executors {
		executors[i].Process.Kill()
		executors[i].Wait()
		r := ask("conv-a", "get_dir", `{}`)
		if r.Notice == "" {
			if got := dirOf(t, r); got != "/repo/a" {
				t.Fatalf("after killing the executor that does not hold the session: dir %q, no notice", got)
			}
			executors[i] = start(fmt.Sprintf("executor-%d-again", i))
			waitPulling(t, nc, 2)
			continue
		}
		reset = true
		if got := dirOf(t, r); got != "" {
			t.Errorf("the new session has a working directory %q", got)
		}
		if !strings.Contains(r.Notice, "new session") || !strings.Contains(r.Notice, "stopped") {
			t.Errorf("notice %q does not say the session is new and why", r.Notice)
		}
		// The reset is said once: the next call runs in the new session.
		if r := ask("conv-a", "get_dir", `{}`); r.Notice != "" {
			t.Errorf("the call after the reset has a notice too: %q", r.Notice)
		}
		break
	}
	if !reset {
		t.Error("no kill lost conversation a's session")
	}
}

// The engineering server behind toolbus over HTTP, in both of its modes, behind two
// executors: a conversation that activated a domain has all of its calls run, on either
// executor; a conversation that did not is refused.
func TestEngineeringServerBehindTwoExecutors(t *testing.T) {
	t.Parallel() // waits mostly (processes starting, acks timing out): beside another test
	for _, stateless := range []bool{false, true} {
		t.Run(fmt.Sprintf("stateless=%v", stateless), func(t *testing.T) {
			suite := engineering.New(nil)
			h := httptest.NewServer(suite.HTTPHandler(&engineering.MCPOptions{Stateless: stateless}))
			t.Cleanup(h.Close)
			cfg := mcpConfig(t, fmt.Sprintf(`{"engineering": {"enabled": false}, "executor": {"concurrency": 1, "prefetch": -1},
				"mcpServers": {"eng": {"type": "http", "url": %q}}}`, h.URL))
			connect := startBus(t)
			startEach(t, connect, toolbus.Options{Config: cfg}, toolbus.Parser, toolbus.Formatter, toolbus.Executor, toolbus.Executor)
			nc := connect("orchestrator")
			waitPulling(t, nc, 2)
			c, err := client.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			ask := func(conv, text string) messages.OutputResult {
				t.Helper()
				out, err := c.Ask(ctx, conv, text, nil)
				if err != nil || len(out.Results) != 1 {
					t.Fatalf("%v, %+v", err, out)
				}
				return out.Results[0]
			}
			if r := ask("activated", `<tool_call>{"name": "dispatch_engineering", "arguments": {"domain": "pressure", "action": "activate"}}</tool_call>`); !r.Success {
				t.Fatalf("activate: %+v", r.Error)
			}
			calc := `<tool_call>{"name": "execute_tool", "arguments": {"tool_name": "pressure.solve_kesselformel", "parameters": {"p": 10, "d": 100, "sigma": 160}}}</tool_call>`
			var wg sync.WaitGroup
			for i := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if r := ask("activated", calc); !r.Success {
						t.Errorf("call %d in the activated conversation: %+v", i, r.Error)
					}
				}()
			}
			wg.Wait()
			if r := ask("fresh", calc); r.Success || !strings.Contains(r.Error.Message, "activate") {
				t.Errorf("a conversation that never activated: %+v, want refused", r)
			}
		})
	}
}

// The cost of a session per conversation: calls/s of a read-only tool of an http server
// that keeps state per session, scoped per conversation (32 conversations, each session
// opened before the timing) and shared, in one process with the whole pipeline.
//
//	go test -run '^$' -bench ConversationSessions -count 6 ./pkg/toolbus/
func BenchmarkConversationSessions(b *testing.B) {
	srv := newStatefulServer(b)
	for _, scope := range []string{"shared", "conversation"} {
		b.Run(scope, func(b *testing.B) {
			cfg, err := config.Parse([]byte(fmt.Sprintf(`{"engineering": {"enabled": false},
				"mcpServers": {"git": {"type": "http", "url": %q, "sessions": %q, "maxSessions": 64}}}`, srv.url, scope)),
				"bench.json", func(string) (string, bool) { return "", false })
			if err != nil {
				b.Fatal(err)
			}
			url := bustest.Server(b)
			nc, _ := bustest.Connect(b, url, nats.Name("node"))
			ctx, cancel := context.WithCancel(context.Background())
			tb, err := toolbus.Start(ctx, toolbus.Options{Provision: true, Conn: nc, Config: cfg,
				Services: []string{toolbus.Parser, toolbus.Executor, toolbus.Formatter}})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { cancel(); tb.Wait() }()
			oc, _ := bustest.Connect(b, url, nats.Name("orchestrator"))
			c, err := client.New(oc)
			if err != nil {
				b.Fatal(err)
			}
			text := `<tool_call>{"name": "get_dir", "arguments": {}}</tool_call>`
			const convs = 32
			for i := range convs {
				if out, err := c.Ask(ctx, fmt.Sprintf("bench-%d", i), text, nil); err != nil || !out.Results[0].Success {
					b.Fatalf("warm-up: %v %+v", err, out)
				}
			}
			var next atomic.Int64
			b.SetParallelism(8)
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				conv := fmt.Sprintf("bench-%d", next.Add(1)%convs)
				for pb.Next() {
					out, err := c.Ask(ctx, conv, text, nil)
					if err != nil || !out.Results[0].Success {
						b.Errorf("%v %+v", err, out)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
		})
	}
}
