package toolbus_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/toolbus/toolbus/internal/testbin"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolbus"
)

// long reports whether the long soak and chaos variants run (TOOLBUS_LONG=1).
func long() bool { return os.Getenv("TOOLBUS_LONG") != "" }

// faultRig is an embedded server, the parser and formatter in process, executors as
// real processes of cmd/executor, and a tools folder with the counter tool.
type faultRig struct {
	t         *testing.T
	url       string
	executor  string
	cfgPath   string
	countFile string
	cfg       *config.Config
}

func newFaultRig(t *testing.T) *faultRig {
	t.Helper()
	dir := t.TempDir()
	tools := filepath.Join(dir, "tools")
	os.MkdirAll(tools, 0o755)
	r := &faultRig{t: t, countFile: filepath.Join(dir, "count.log"), cfgPath: filepath.Join(dir, "toolbus.json")}
	r.executor = testbin.Path(t, "./cmd/executor")
	testbin.Copy(t, "./pkg/toolbus/testdata/counter", filepath.Join(tools, "count_effect"))
	manifest := `{"name": "count_effect", "description": "records one effect per run",
		"inputSchema": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}, "timeout": "10s"}`
	os.WriteFile(filepath.Join(tools, "count_effect.mcp.json"), []byte(manifest), 0o644)
	cfg := fmt.Sprintf(`{"engineering": {"enabled": false},
		"local": {"tools": {"folder": "tools", "env": ["COUNT_FILE=%s"]}},
		"executor": {"concurrency": 16},
		"nats": {"ack_wait": "2s", "max_deliver": 10}}`, r.countFile)
	os.WriteFile(r.cfgPath, []byte(cfg), 0o644)
	var err error
	if r.cfg, err = config.Load(r.cfgPath); err != nil {
		t.Fatal(err)
	}
	srv, stop, err := bus.StartEmbedded(bus.EmbeddedOptions{StoreDir: filepath.Join(dir, "js")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	r.url = srv.ClientURL()
	return r
}

// startExecutor starts one cmd/executor process.
func (r *faultRig) startExecutor(name string) *exec.Cmd {
	r.t.Helper()
	cmd := exec.Command(r.executor, "--nats", r.url, "--config", r.cfgPath, "--ops-addr", "127.0.0.1:0")
	cmd.Stderr = &prefixWriter{t: r.t, prefix: name, ready: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	return cmd
}

type prefixWriter struct {
	t      *testing.T
	prefix string
	mu     sync.Mutex
	// ready, when set, is closed when the process logs that its services are ready.
	ready chan struct{}
}

func (w *prefixWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ready != nil && bytes.Contains(p, []byte(`"msg":"ready"`)) {
		close(w.ready)
		w.ready = nil
	}
	if testing.Verbose() {
		for _, l := range strings.Split(strings.TrimSpace(string(p)), "\n") {
			w.t.Logf("%s: %s", w.prefix, l)
		}
	}
	return len(p), nil
}

// effects are the recorded runs: how often each call id ran, and the line of its first
// run (the tool appends one line per run, so lines are in the order the runs ended).
type effects struct {
	runs  map[string]int
	first map[string]int
}

func (r *faultRig) effects() effects {
	e := effects{runs: map[string]int{}, first: map[string]int{}}
	f, err := os.Open(r.countFile)
	if err != nil {
		if os.IsNotExist(err) {
			return e
		}
		r.t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for line := 0; sc.Scan(); line++ {
		if e.runs[sc.Text()]++; e.runs[sc.Text()] == 1 {
			e.first[sc.Text()] = line
		}
	}
	return e
}

// pipeline runs the parser and formatter in process.
func (r *faultRig) pipeline(ctx context.Context) *client.Client {
	r.t.Helper()
	connect := func(name string) *nats.Conn {
		nc, err := nats.Connect(r.url, nats.Name(name), nats.MaxReconnects(-1))
		if err != nil {
			r.t.Fatal(err)
		}
		r.t.Cleanup(nc.Close)
		return nc
	}
	n, err := toolbus.Start(ctx, toolbus.Options{Provision: true, Conn: connect("pipeline"), Config: r.cfg, Services: []string{toolbus.Parser, toolbus.Formatter}})
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { n.Wait() })
	c, err := client.New(connect("orchestrator"))
	if err != nil {
		r.t.Fatal(err)
	}
	return c
}

// askAll sends n responses of two counter calls each, with ids "<prefix>-<i>-<k>", and
// returns every call's result by id.
func askAll(ctx context.Context, t *testing.T, c *client.Client, prefix string, n int) map[string]messages.OutputResult {
	results := map[string]messages.OutputResult{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			ids := []string{fmt.Sprintf("%s-%d-0", prefix, i), fmt.Sprintf("%s-%d-1", prefix, i)}
			text := fmt.Sprintf(`<tool_call>{"name": "count_effect", "arguments": {"id": %q}}</tool_call>
<tool_call>{"name": "count_effect", "arguments": {"id": %q}}</tool_call>`, ids[0], ids[1])
			out, err := c.Ask(ctx, "crash", text, &client.SubmitOptions{ResponseID: fmt.Sprintf("%s-%d", prefix, i)})
			if err != nil {
				t.Errorf("response %d: %v", i, err)
				return
			}
			if len(out.Results) != 2 {
				t.Errorf("response %d: %d results", i, len(out.Results))
				return
			}
			mu.Lock()
			for k, r := range out.Results {
				results[ids[k]] = r
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return results
}

// checkEffects: every call answered; a success ran exactly once; outcome_unknown ran at
// most once; nothing ran twice; and the two calls of a response (the counter tool is not
// read-only) ran in the order written: the second only after the first was answered.
func checkEffects(t *testing.T, want int, results map[string]messages.OutputResult, e effects) (unknown int) {
	t.Helper()
	if len(results) != want {
		t.Errorf("%d calls answered, want %d", len(results), want)
	}
	for id, r := range results {
		switch {
		case r.Success && e.runs[id] != 1:
			t.Errorf("call %s succeeded but ran %d times", id, e.runs[id])
		case !r.Success && r.Error.Code == messages.CodeOutcomeUnknown:
			unknown++
			if e.runs[id] > 1 {
				t.Errorf("call %s ran %d times", id, e.runs[id])
			}
		case !r.Success:
			t.Errorf("call %s failed: %+v", id, r.Error)
		}
		if second, ok := strings.CutSuffix(id, "-0"); ok && r.Success {
			second += "-1"
			if r2 := results[second]; r2.Success && e.first[second] < e.first[id] {
				t.Errorf("call %s ran before %s, which the model wrote first", second, id)
			}
		}
	}
	for id, n := range e.runs {
		if n > 1 {
			t.Errorf("call %s ran %d times", id, n)
		}
	}
	return unknown
}

// Three executor processes, one of them killed with SIGKILL over and over while 300
// calls (4,000 with TOOLBUS_LONG) run: every call is answered, no effect happens twice.
// An executor is killed every 400 ms, so the short run still sees dozens of kills (40 to
// 70 here), each with calls in flight.
func TestCrashExecutorsRepeatedly(t *testing.T) {
	t.Parallel() // waits mostly (processes starting, acks timing out): beside another test
	r := newFaultRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := r.pipeline(ctx)

	k := startKilling(t, 3, 400*time.Millisecond, func(i int) *exec.Cmd { return r.startExecutor(fmt.Sprintf("executor-%d", i)) })

	responses := 150
	if long() {
		responses = 2000
	}
	results := askAll(ctx, t, c, "crash", responses)
	kills := k.stop()
	// Orphaned tool processes of killed executors may still be finishing their write.
	time.Sleep(200 * time.Millisecond)
	unknown := checkEffects(t, 2*responses, results, r.effects())
	t.Logf("%d calls, %d executor kills, %d answered outcome_unknown", 2*responses, kills, unknown)
	if kills == 0 {
		t.Error("no executor was killed; the test proved nothing")
	}
}

// killer runs n processes and kills one of them with SIGKILL, in turn, every interval,
// starting another in its place, until stop. The interval counts from the moment the
// replacement said it is ready (a process whose stderr is a *prefixWriter with ready
// set), so that on a busy machine, where a process takes long to start, the processes
// still work between kills.
type killer struct {
	mu    sync.Mutex
	procs []*exec.Cmd
	kills int
	quit  chan struct{}
	done  chan struct{}
}

// startKilling starts n processes with start (given each one's number) and the killing;
// the processes are killed for good when the test ends.
func startKilling(t *testing.T, n int, interval time.Duration, start func(i int) *exec.Cmd) *killer {
	k := &killer{quit: make(chan struct{}), done: make(chan struct{})}
	for i := range n {
		k.procs = append(k.procs, start(i))
	}
	t.Cleanup(func() {
		k.stop()
		k.mu.Lock()
		defer k.mu.Unlock()
		for _, p := range k.procs {
			p.Process.Kill()
			p.Wait()
		}
	})
	go func() {
		defer close(k.done)
		for i := 0; ; i++ {
			select {
			case <-k.quit:
				return
			case <-time.After(interval):
			}
			k.mu.Lock()
			p := i % n
			k.procs[p].Process.Signal(syscall.SIGKILL)
			k.procs[p].Wait()
			k.kills++
			k.procs[p] = start(p)
			var ready chan struct{}
			if w, ok := k.procs[p].Stderr.(*prefixWriter); ok {
				w.mu.Lock()
				ready = w.ready
				w.mu.Unlock()
			}
			k.mu.Unlock()
			if ready != nil {
				select {
				case <-ready:
				case <-k.quit:
					return
				case <-time.After(time.Minute):
				}
			}
		}
	}()
	return k
}

// stop ends the killing (the processes run on) and returns how many were killed.
func (k *killer) stop() int {
	select {
	case <-k.quit:
	default:
		close(k.quit)
	}
	<-k.done
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.kills
}

// SIGTERM stops an executor gracefully in the middle of a run of 100 responses (300 with
// TOOLBUS_LONG): its in-flight calls finish or are handed back; none is lost and none
// runs twice.
func TestExecutorSIGTERM(t *testing.T) {
	t.Parallel() // waits mostly (processes starting, acks timing out): beside another test
	responses := 100
	if long() {
		responses = 300
	}
	r := newFaultRig(t)
	// A bound on a hang, not a speed: 300 responses through two executor processes
	// under the race detector, beside the suite's other packages, once took over two
	// minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := r.pipeline(ctx)
	a, b := r.startExecutor("executor-a"), r.startExecutor("executor-b")
	defer func() { b.Process.Kill(); b.Wait() }()
	exited := make(chan error, 1)
	w := a.Stderr.(*prefixWriter)
	w.mu.Lock()
	ready := w.ready
	w.mu.Unlock()
	go func() {
		// Stopped while it works: after it said it is ready (a busy machine may take
		// longer than the 300 ms to start it, and a process killed before it handles
		// SIGTERM dies of it), with calls under way.
		if ready != nil {
			select {
			case <-ready:
			case <-ctx.Done():
			}
		}
		time.Sleep(300 * time.Millisecond)
		a.Process.Signal(syscall.SIGTERM)
		exited <- a.Wait()
	}()
	results := askAll(ctx, t, c, "term", responses)
	if exit := <-exited; exit != nil {
		t.Errorf("executor exited with %v after SIGTERM, want 0", exit)
	}
	if unknown := checkEffects(t, 2*responses, results, r.effects()); unknown != 0 {
		t.Errorf("%d calls outcome_unknown after a graceful stop; a drained executor abandons none", unknown)
	}
}
