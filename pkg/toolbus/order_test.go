package toolbus_test

import (
	"context"

	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/mcpwire"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolbus"
)

const mcpFilesystemPkg = "@modelcontextprotocol/server-filesystem"

// stamps records when each run of the stamp tools started and ended, as the tools see it.
type stamps struct {
	mu   sync.Mutex
	runs map[string][2]time.Time // the "n" argument → start, end
}

func (s *stamps) record(n string, start time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runs == nil {
		s.runs = map[string][2]time.Time{}
	}
	s.runs[n] = [2]time.Time{start, time.Now()}
}

func (s *stamps) get(n string) [2]time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runs[n]
}

// stampTools are stamp_read (read-only) and stamp_write: each takes 150 ms and records
// its run; and fail_write, which always fails.
func stampTools(t *testing.T, s *stamps) *localtools.Registry {
	reg := localtools.New()
	type in struct {
		N string `json:"n"`
	}
	run := func(_ context.Context, a in) (map[string]string, error) {
		start := time.Now()
		time.Sleep(150 * time.Millisecond)
		s.record(a.N, start)
		return map[string]string{"n": a.N}, nil
	}
	for _, err := range []error{
		localtools.AddFunc(reg, messages.ToolInfo{Name: "stamp_read", Description: "reads", ReadOnly: true}, run),
		localtools.AddFunc(reg, messages.ToolInfo{Name: "stamp_write", Description: "writes"}, run),
		localtools.AddFunc(reg, messages.ToolInfo{Name: "fail_write", Description: "fails"}, func(context.Context, in) (map[string]string, error) {
			return nil, messages.Errorf(messages.CodeToolError, "disk full")
		}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return reg
}

// A response's calls run in the order written, with the npm reference servers: writes
// to server-memory all land before read_graph, a file written, read, written and read
// reads v1 then v2, and read-only calls still run together.
func TestOrderWithReferenceServers(t *testing.T) {
	t.Parallel()
	memory := mcpNPMScript(t, mcpMemoryPkg)
	filesystem := mcpNPMScript(t, mcpFilesystemPkg)
	root := t.TempDir()
	cfg := &config.Config{MCPServers: map[string]mcpwire.ServerConfig{
		"memory":     {Command: "node", Args: []string{memory}, Env: map[string]string{"MEMORY_FILE_PATH": filepath.Join(t.TempDir(), "memory.jsonl")}},
		"filesystem": {Command: "node", Args: []string{filesystem, root}},
	}}
	var st stamps
	p := startMCPPipeline(t, cfg, stampTools(t, &st))

	t.Run("memory: three writes, then read_graph sees them all", func(t *testing.T) {
		for run := range 5 {
			alice, bob := fmt.Sprintf("Alice-%d", run), fmt.Sprintf("Bob-%d", run)
			r := p.ask(
				mcpCall{"create_entities", map[string]any{"entities": []map[string]any{{"name": alice, "entityType": "person", "observations": []string{}}}}},
				mcpCall{"create_entities", map[string]any{"entities": []map[string]any{{"name": bob, "entityType": "person", "observations": []string{}}}}},
				mcpCall{"add_observations", map[string]any{"observations": []map[string]any{{"entityName": alice, "contents": []string{"drinks tea " + alice}}}}},
				mcpCall{"read_graph", map[string]any{}},
			)
			for _, res := range r[:3] {
				mcpOK(t, res)
			}
			mcpOK(t, r[3], alice, bob, "drinks tea "+alice)
		}
	})

	t.Run("filesystem: write, read, write, read", func(t *testing.T) {
		path := filepath.Join(root, "notes.txt")
		for run := range 5 {
			v1, v2 := fmt.Sprintf("version one, run %d", run), fmt.Sprintf("version two, run %d", run)
			r := p.ask(
				mcpCall{"write_file", map[string]any{"path": path, "content": v1}},
				mcpCall{"read_text_file", map[string]any{"path": path}},
				mcpCall{"write_file", map[string]any{"path": path, "content": v2}},
				mcpCall{"read_text_file", map[string]any{"path": path}},
			)
			mcpOK(t, r[0])
			mcpOK(t, r[1], v1)
			mcpOK(t, r[2])
			mcpOK(t, r[3], v2)
		}
		if b, _ := os.ReadFile(path); !strings.Contains(string(b), "version two, run 4") {
			t.Errorf("the file holds %q", b)
		}
	})

	t.Run("read-only calls overlap, writes do not", func(t *testing.T) {
		r := p.ask(
			mcpCall{"stamp_read", map[string]any{"n": "r0"}}, mcpCall{"stamp_read", map[string]any{"n": "r1"}},
			mcpCall{"stamp_read", map[string]any{"n": "r2"}}, mcpCall{"stamp_read", map[string]any{"n": "r3"}},
			mcpCall{"stamp_write", map[string]any{"n": "w0"}}, mcpCall{"stamp_write", map[string]any{"n": "w1"}},
			mcpCall{"stamp_write", map[string]any{"n": "w2"}},
		)
		for _, res := range r {
			mcpOK(t, res)
		}
		overlaps := 0
		for i := range 4 {
			for j := i + 1; j < 4; j++ {
				a, b := st.get(fmt.Sprint("r", i)), st.get(fmt.Sprint("r", j))
				if a[0].Before(b[1]) && b[0].Before(a[1]) {
					overlaps++
				}
			}
		}
		if overlaps == 0 {
			t.Error("no two read-only calls of the response ran at the same time")
		}
		lastRead := time.Time{}
		for i := range 4 {
			if end := st.get(fmt.Sprint("r", i))[1]; end.After(lastRead) {
				lastRead = end
			}
		}
		prevEnd := lastRead
		for i := range 3 {
			w := st.get(fmt.Sprint("w", i))
			if w[0].Before(prevEnd) {
				t.Errorf("write w%d started at %s, before the call before it ended (%s)", i, w[0].Format(time.StampMicro), prevEnd.Format(time.StampMicro))
			}
			prevEnd = w[1]
		}
	})
}

// Activating a domain, then 50 calculator calls in the same response: every call sees the
// domain active, on every one of 20 runs, with two executor processes' worth of replicas
// (each with its own session cache) taking the calls.
func TestOrderActivateThenFiftyCalls(t *testing.T) {
	t.Parallel() // waits mostly (processes starting, acks timing out): beside another test
	url := bustest.Server(t)
	ctx, cancel := context.WithCancel(context.Background())
	var nodes []*toolbus.Toolbus
	t.Cleanup(func() {
		cancel()
		for _, n := range nodes {
			n.Wait()
		}
	})
	for i, services := range [][]string{{toolbus.Parser, toolbus.Executor, toolbus.Formatter}, {toolbus.Executor}} {
		nc, _ := bustest.Connect(t, url, nats.Name(fmt.Sprint("node-", i)))
		n, err := toolbus.Start(ctx, toolbus.Options{Provision: true, Conn: nc, Config: &config.Config{}, Services: services, Replicas: 2})
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	nc, _ := bustest.Connect(t, url)
	c, err := client.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	text.WriteString(`<tool_call>{"name": "dispatch_engineering", "arguments": {"domain": "geometry", "action": "activate"}}</tool_call>` + "\n")
	for i := range 50 {
		fmt.Fprintf(&text, `<tool_call>{"name": "execute_tool", "arguments": {"tool_name": "geometry.solve_circle_area", "parameters": {"r": %d}}}</tool_call>`+"\n", i+1)
	}
	var failed atomic.Int32
	var wg sync.WaitGroup
	for run := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			actx, acancel := context.WithTimeout(ctx, 2*time.Minute)
			defer acancel()
			out, err := c.Ask(actx, fmt.Sprintf("activate-%d", run), text.String(), nil)
			if err != nil {
				t.Errorf("run %d: %v", run, err)
				return
			}
			ok := 0
			for i, r := range out.Results {
				if r.Success {
					ok++
				} else if failed.Add(1) <= 3 {
					t.Errorf("run %d: call %d failed: %+v", run, i, r.Error)
				}
			}
			if ok != 51 {
				t.Errorf("run %d: %d of 51 calls succeeded", run, ok)
			}
		}()
	}
	wg.Wait()
}

// Under executor.on_error "skip", the calls after a failure are answered skipped and never
// run.
func TestOrderSkipAfterFailure(t *testing.T) {
	t.Parallel()
	cfg := mcpConfig(t, `{"executor": {"on_error": "skip"}}`)
	var st stamps
	p := startMCPPipeline(t, cfg, stampTools(t, &st))
	r := p.ask(
		mcpCall{"stamp_write", map[string]any{"n": "before"}},
		mcpCall{"fail_write", map[string]any{"n": "x"}},
		mcpCall{"stamp_write", map[string]any{"n": "after"}},
		mcpCall{"stamp_read", map[string]any{"n": "after-read"}},
	)
	mcpOK(t, r[0], `"before"`)
	mcpFailed(t, r[1], messages.CodeToolError)
	for _, res := range r[2:] {
		mcpFailed(t, res, messages.CodeSkipped)
		if res.Error != nil && !strings.Contains(res.Error.Message, "call 1 (fail_write)") {
			t.Errorf("skipped %s: %q does not name the call that failed", res.Tool, res.Error.Message)
		}
	}
	if st.get("after")[0] != (time.Time{}) || st.get("after-read")[0] != (time.Time{}) {
		t.Error("a skipped call ran")
	}
	if _, err := config.Parse([]byte(`{"executor": {"parallel": "sometimes"}}`), "x.json", nil); err == nil || !strings.Contains(err.Error(), "executor.parallel") {
		t.Errorf("a bad parallel setting: %v", err)
	}
	if _, err := config.Parse([]byte(`{"mcpServers": {"s": {"command": "x", "parallel": "no"}}}`), "x.json", nil); err == nil || !strings.Contains(err.Error(), "mcpServers.s.parallel") {
		t.Errorf("a bad server parallel setting: %v", err)
	}

}

// The allow-lists hold on the first response, before server-everything has listed its
// tools, under every spelling of a forbidden tool; per server and top level.
func TestAllowListsOnFirstResponse(t *testing.T) {
	t.Parallel()
	everything := mcpNPMScript(t, mcpEverythingPkg)
	for _, tc := range []struct{ name, cfg string }{
		{"per server", `{"mcpServers": {"everything": {"command": "node", "args": ["` + everything + `", "stdio"], "allowedTools": ["echo"]}}}`},
		{"top level", `{"mcpServers": {"everything": {"command": "node", "args": ["` + everything + `", "stdio"]}}, "allowedTools": ["everything__echo"]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startMCPPipeline(t, mcpConfig(t, tc.cfg), nil)
			r := p.ask(
				mcpCall{"everything__get-sum", map[string]any{"a": 1, "b": 2}},
				mcpCall{"mcp__everything__get-sum", map[string]any{"a": 1, "b": 2}},
				mcpCall{"everything::get-sum", map[string]any{"a": 1, "b": 2}},
				mcpCall{"everything__get-env", map[string]any{}},
				mcpCall{"everything__echo", map[string]any{"message": "allowed"}},
			)
			for _, res := range r[:4] {
				mcpFailed(t, res, messages.CodeNotAllowed)
			}
			mcpOK(t, r[4], "allowed")
		})
	}
}
