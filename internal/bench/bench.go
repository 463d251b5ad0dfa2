// Package bench measures toolbus end to end, and the bus beneath it in the same run:
// N responses are driven through the whole pipeline on an embedded, file-backed NATS
// with C in flight; then the same number of messages of the same sizes go through the
// same number of JetStream hops with no toolbus logic (the ceiling). The ratio of the
// two says what toolbus's own work costs.
package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/internal/console"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/engineering"
	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/parser"
	"github.com/toolbus/toolbus/pkg/toolbus"
)

// Options configures a run. Zero values take the defaults.
type Options struct {
	Responses        int // default 2000
	CallsPerResponse int // default 1
	Concurrency      int // responses in flight, default 16
	Executors        int // executor replicas, default 2
	// Rounds repeats the three runs (toolbus, ceiling, plain relay) this many times,
	// alternately (default 1): the report gives each round's figures and their medians,
	// which a busy or shared machine moves less than a single run.
	Rounds int
	// Tool is called by every call: "execute_tool" (an engineering calculator, the
	// default), "clock", or any tool of the configuration called with {}.
	Tool string
	// ToolLatency, when set, makes every call run the local tool "bench_work", which
	// takes this long (a stand-in for a real tool's work).
	ToolLatency time.Duration
	// Catalog, when set, adds this many in-process tools, a hundred per server
	// (cat00__tool_0, …; each with an input schema), and every call calls one of them,
	// spread over the catalog: what a large catalog costs against a small one (10).
	// ToolLatency, when set, is what each of them takes.
	Catalog int
	// Rate, when set, is the pace (responses per second) of the paced phase; by default
	// it is half the throughput the run just measured.
	Rate float64
	// NoPaced skips the paced phase.
	NoPaced bool
	// NATSConf, when set, runs the pipeline as a deployment does: an embedded server
	// serving this NATS configuration (deploy/nats.conf: users, permissions), each
	// service on a connection of its own as its own user with its private inbox, the
	// orchestrator as user orchestrator; streams provisioned by admin.
	NATSConf string
	// InProcess connects to the embedded server in process (as `toolbus run` does)
	// rather than over TCP loopback (as services on a deployed NATS do).
	InProcess bool
	// Console serves the web console beside the pipeline (nobody watching it), as
	// `toolbus serve` does by default; at ConsoleAddr when set (else a free port), where
	// a page can watch the run: it is told the URL (ConsoleReady) and kept three seconds
	// after the toolbus run, so that the queues are seen drained.
	Console      bool
	ConsoleAddr  string
	ConsoleReady func(url string)
	Config       *config.Config
	// Profile, when set, receives a CPU profile of the toolbus run.
	Profile io.Writer
	// AllocProfile, when set, receives the process's allocation profile after the
	// toolbus run (from the start of the process: setup and warm-up are a small part).
	AllocProfile io.Writer
	Logger       *slog.Logger
}

// Round is one round's figures: toolbus, the ceiling and the plain relay run one after
// the other.
type Round struct {
	Seconds                       float64 `json:"seconds"`
	CallsPerSec                   float64 `json:"calls_per_sec"`
	CPUSecondsPer1000Calls        float64 `json:"cpu_seconds_per_1000_calls"`
	CeilingCallsPerSec            float64 `json:"ceiling_calls_per_sec"`
	CeilingCPUSecondsPer1000Calls float64 `json:"ceiling_cpu_seconds_per_1000_calls"`
	RelayCallsPerSec              float64 `json:"relay_calls_per_sec"`
	Ratio                         float64 `json:"ratio"`
	CeilingVsRelay                float64 `json:"ceiling_vs_relay"`
	RatioVsRelay                  float64 `json:"ratio_vs_relay"`
}

// Report is the outcome of a run. With several rounds, the throughputs, CPU figures and
// ratios are the medians of the rounds' (each round's in Rounds), and the latency
// percentiles those of all the rounds' requests together; the paced phase runs once.
type Report struct {
	Responses        int     `json:"responses"`
	Calls            int     `json:"calls"`
	CallsPerResponse int     `json:"calls_per_response"`
	Concurrency      int     `json:"concurrency"`
	Executors        int     `json:"executors"`
	InProcess        bool    `json:"in_process,omitempty"`
	NATSConf         string  `json:"nats_conf,omitempty"`
	Tool             string  `json:"tool"`
	Catalog          int     `json:"catalog,omitempty"`
	Console          bool    `json:"console,omitempty"`
	Seconds          float64 `json:"seconds"`
	CallsPerSec      float64 `json:"calls_per_sec"`
	ResponsesPerSec  float64 `json:"responses_per_sec"`
	P50ms            float64 `json:"p50_ms"`
	P90ms            float64 `json:"p90_ms"`
	P99ms            float64 `json:"p99_ms"`
	MaxMs            float64 `json:"max_ms"`
	// CPUSecondsPer1000Calls counts the whole process: services and the embedded server.
	CPUSecondsPer1000Calls float64 `json:"cpu_seconds_per_1000_calls"`

	CeilingCallsPerSec float64 `json:"ceiling_calls_per_sec"`
	CeilingP50ms       float64 `json:"ceiling_p50_ms"`
	CeilingP99ms       float64 `json:"ceiling_p99_ms"`
	// CeilingCPUSecondsPer1000Calls is the bus's own CPU cost (server and client).
	CeilingCPUSecondsPer1000Calls float64 `json:"ceiling_cpu_seconds_per_1000_calls"`
	CeilingPacedP50ms             float64 `json:"ceiling_paced_p50_ms,omitempty"`
	CeilingPacedP99ms             float64 `json:"ceiling_paced_p99_ms,omitempty"`
	// Ratio is CallsPerSec / CeilingCallsPerSec.
	Ratio float64 `json:"ratio"`

	// The plain relay: the same hops and messages relayed with nats.go's Consume and
	// asynchronous publishes, each message acked once its outgoing messages are stored:
	// what the bus allows without toolbus's stage runner.
	RelayCallsPerSec float64 `json:"relay_calls_per_sec"`
	RelayP50ms       float64 `json:"relay_p50_ms"`
	RelayP99ms       float64 `json:"relay_p99_ms"`
	// CeilingVsRelay is CeilingCallsPerSec / RelayCallsPerSec: the stage runner's
	// plumbing against the plain relay.
	CeilingVsRelay float64 `json:"ceiling_vs_relay"`
	// RatioVsRelay is CallsPerSec / RelayCallsPerSec.
	RatioVsRelay float64 `json:"ratio_vs_relay"`

	// The paced phase: responses published at a steady rate (by default half the
	// measured maximum), open loop: the driver never waits for earlier responses.
	PacedResponsesPerSec float64 `json:"paced_responses_per_sec,omitempty"`
	PacedP50ms           float64 `json:"paced_p50_ms,omitempty"`
	PacedP90ms           float64 `json:"paced_p90_ms,omitempty"`
	PacedP99ms           float64 `json:"paced_p99_ms,omitempty"`
	PacedMaxMs           float64 `json:"paced_max_ms,omitempty"`

	Rounds []Round `json:"rounds"`

	NumCPU   int    `json:"nproc"`
	CPUModel string `json:"cpu_model,omitempty"`
}

func (o *Options) defaults() {
	if o.Responses <= 0 {
		o.Responses = 2000
	}
	if o.CallsPerResponse <= 0 {
		o.CallsPerResponse = 1
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 16
	}
	if o.Executors <= 0 {
		o.Executors = 2
	}
	if o.ToolLatency > 0 {
		o.Tool = benchWork
	}
	if o.Catalog > 0 {
		o.Tool = catalogTool
	}
	if o.Tool == "" {
		o.Tool = engineering.ToolExecute
	}
	if o.Config == nil {
		o.Config = &config.Config{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

const conversation = "bench"

const benchWork = "bench_work"

// catalogTool stands for the tools of Options.Catalog in Options.Tool.
const catalogTool = "catalog"

// catalogServers is how many in-process servers a catalog of n tools is spread over: a
// hundred tools each (5,000 tools over 50 servers).
func catalogServers(n int) int { return (n + 99) / 100 }

// catalogName is the shown name of the catalog's tool i.
func catalogName(n, i int) string {
	return fmt.Sprintf("cat%02d__tool_%d", i%catalogServers(n), i/catalogServers(n))
}

// tools returns the local tools a run needs: bench_work taking d, or a catalog of n
// tools each taking d; nil when the run calls a built-in tool.
func tools(o Options, d time.Duration) *localtools.Registry {
	if o.Catalog <= 0 {
		if o.ToolLatency <= 0 {
			return nil
		}
		return workTool(d)
	}
	reg := localtools.New()
	run := func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
		if d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return json.RawMessage(`{"done":true}`), nil
	}
	schema := json.RawMessage(`{"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}}, "required": ["query"]}`)
	for i := range o.Catalog {
		server, name, _ := strings.Cut(catalogName(o.Catalog, i), "__")
		_ = reg.Server(server).Add(localtools.Tool{Info: messages.ToolInfo{Name: name, Description: "tool " + name + " of " + server + ", one of a large catalog",
			InputSchema: schema, ReadOnly: true, Idempotent: true}, Run: run})
	}
	return reg
}

// workTool is a local tool that takes d.
func workTool(d time.Duration) *localtools.Registry {
	reg := localtools.New()
	reg.Add(localtools.Tool{
		Info: messages.ToolInfo{Name: benchWork, Description: "waits, as a tool doing work would", ReadOnly: true, Idempotent: true},
		Run: func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return json.RawMessage(`{"done":true}`), nil
		},
	})
	return reg
}

// responseText is one model response with k calls of tool (of catalog tools: spread
// over the catalog).
func responseText(tool string, k, catalog int) string {
	var b strings.Builder
	b.WriteString("I will use the tools now.\n")
	for i := range k {
		switch tool {
		case catalogTool:
			fmt.Fprintf(&b, `<tool_call>{"name": %q, "arguments": {"query": "q%d", "limit": 5}}</tool_call>`+"\n", catalogName(catalog, (i*7919+31)%catalog), i)
		case engineering.ToolExecute:
			fmt.Fprintf(&b, `<tool_call>{"name": "execute_tool", "arguments": {"tool_name": "geometry.solve_circle_area", "parameters": {"r": %d}}}</tool_call>`+"\n", i+1)
		default:
			fmt.Fprintf(&b, `<tool_call>{"name": %q, "arguments": {}}</tool_call>`+"\n", tool)
		}
	}
	return b.String()
}

// Run measures toolbus and then the ceiling, each on a fresh embedded server.
func Run(ctx context.Context, o Options) (*Report, error) {
	o.defaults()
	r := &Report{
		Responses: o.Responses, Calls: o.Responses * o.CallsPerResponse, CallsPerResponse: o.CallsPerResponse,
		Concurrency: o.Concurrency, Executors: o.Executors, InProcess: o.InProcess, NATSConf: o.NATSConf, Tool: o.Tool, Catalog: o.Catalog, Console: o.Console,
		NumCPU: runtime.NumCPU(), CPUModel: cpuModel(),
	}
	text := responseText(o.Tool, o.CallsPerResponse, o.Catalog)
	sizes, err := messageSizes(ctx, text, o.Config, tools(o, 0))
	if err != nil {
		return nil, err
	}

	var lat, clat, rlat, paced, cpaced []time.Duration
	for k := range max(o.Rounds, 1) {
		ro := o    // this round's options
		if k > 0 { // the paced phase, profiles and the console's URL once, with the first round
			ro.NoPaced, ro.Profile, ro.AllocProfile, ro.ConsoleReady = true, nil, nil, nil
		}
		l, p, secs, cpu, err := runPipeline(ctx, ro, text, r)
		if err != nil {
			return nil, err
		}
		rate := 0.0
		if k == 0 {
			rate = r.PacedResponsesPerSec
		}
		cl, cp, csecs, ccpu, err := runCeiling(ctx, ro, sizes, rate, false)
		if err != nil {
			return nil, err
		}
		rl, _, rsecs, _, err := runCeiling(ctx, ro, sizes, 0, true)
		if err != nil {
			return nil, err
		}
		if k == 0 {
			paced, cpaced = p, cp
		}
		lat, clat, rlat = append(lat, l...), append(clat, cl...), append(rlat, rl...)
		calls := float64(r.Calls)
		r.Rounds = append(r.Rounds, Round{
			Seconds: secs, CallsPerSec: calls / secs, CPUSecondsPer1000Calls: cpu / calls * 1000,
			CeilingCallsPerSec: calls / csecs, CeilingCPUSecondsPer1000Calls: ccpu / calls * 1000,
			RelayCallsPerSec: calls / rsecs,
			Ratio:            csecs / secs, CeilingVsRelay: rsecs / csecs, RatioVsRelay: rsecs / secs,
		})
	}
	med := func(f func(Round) float64) float64 {
		v := make([]float64, len(r.Rounds))
		for i, x := range r.Rounds {
			v[i] = f(x)
		}
		slices.Sort(v)
		if n := len(v); n%2 == 0 {
			return (v[n/2-1] + v[n/2]) / 2
		}
		return v[len(v)/2]
	}
	if paced != nil {
		r.PacedP50ms, r.PacedP90ms, r.PacedP99ms, r.PacedMaxMs = pct(paced, 50), pct(paced, 90), pct(paced, 99), pct(paced, 100)
	}
	if cpaced != nil {
		r.CeilingPacedP50ms, r.CeilingPacedP99ms = pct(cpaced, 50), pct(cpaced, 99)
	}
	r.Seconds = med(func(x Round) float64 { return x.Seconds })
	r.CallsPerSec = med(func(x Round) float64 { return x.CallsPerSec })
	r.ResponsesPerSec = r.CallsPerSec / float64(r.CallsPerResponse)
	r.CPUSecondsPer1000Calls = med(func(x Round) float64 { return x.CPUSecondsPer1000Calls })
	r.CeilingCallsPerSec = med(func(x Round) float64 { return x.CeilingCallsPerSec })
	r.CeilingCPUSecondsPer1000Calls = med(func(x Round) float64 { return x.CeilingCPUSecondsPer1000Calls })
	r.RelayCallsPerSec = med(func(x Round) float64 { return x.RelayCallsPerSec })
	r.Ratio = med(func(x Round) float64 { return x.Ratio })
	r.CeilingVsRelay = med(func(x Round) float64 { return x.CeilingVsRelay })
	r.RatioVsRelay = med(func(x Round) float64 { return x.RatioVsRelay })
	r.P50ms, r.P90ms, r.P99ms, r.MaxMs = pct(lat, 50), pct(lat, 90), pct(lat, 99), pct(lat, 100)
	r.CeilingP50ms, r.CeilingP99ms = pct(clat, 50), pct(clat, 99)
	r.RelayP50ms, r.RelayP99ms = pct(rlat, 50), pct(rlat, 99)
	return r, nil
}

func startServer(inProcess bool) (*nats.Conn, func(), error) {
	srv, stop, err := bus.StartEmbedded(bus.EmbeddedOptions{})
	if err != nil {
		return nil, nil, err
	}
	// The server is this process's: a connect that takes long is a busy machine, not a
	// server away (nats.go's 2 s default timed out beside a test suite).
	opts := []nats.Option{nats.Timeout(10 * time.Second)}
	if inProcess {
		opts = append(opts, nats.InProcessServer(srv))
	}
	nc, err := nats.Connect(srv.ClientURL(), opts...)
	if err != nil {
		stop()
		return nil, nil, err
	}
	return nc, func() { nc.Close(); stop() }, nil
}

// runPipeline drives the pipeline at full speed, then (unless o.NoPaced) at a steady
// pace, which it records in r.PacedResponsesPerSec.
func runPipeline(ctx context.Context, o Options, text string, r *Report) (lat, paced []time.Duration, secs, cpu float64, err error) {
	local := tools(o, o.ToolLatency)
	var nc *nats.Conn
	var c *client.Client
	if o.NATSConf != "" {
		d, err := startDeployment(ctx, o, local)
		if err != nil {
			return nil, nil, 0, 0, err
		}
		defer d.close()
		nc, c = d.nc, d.client
	} else {
		tb, err := toolbus.Start(ctx, toolbus.Options{
			Config: o.Config, Replicas: o.Executors, Logger: o.Logger, Tools: local, EmbeddedOverTCP: !o.InProcess, Harden: true,
			Services: []string{toolbus.Parser, toolbus.Executor, toolbus.Formatter},
		})
		if err != nil {
			return nil, nil, 0, 0, err
		}
		defer tb.Close()
		nc, c = tb.Conn(), tb.Client()
		// An MCP server's tools are called by name from the first response.
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		err = tb.WaitForTools(wctx)
		cancel()
		if err != nil {
			return nil, nil, 0, 0, err
		}
	}
	if o.Console {
		js, err := jetstream.New(nc)
		if err != nil {
			return nil, nil, 0, 0, err
		}
		ln, err := net.Listen("tcp", cmp.Or(o.ConsoleAddr, "127.0.0.1:0"))
		if err != nil {
			return nil, nil, 0, 0, err
		}
		token := console.NewToken() // the console is always behind a token, the bench's too
		srv := &http.Server{Handler: (&console.Console{NC: nc, JS: js, Client: c}).Handler(token)}
		go srv.Serve(ln)
		defer srv.Close()
		if o.ConsoleReady != nil {
			o.ConsoleReady("http://" + ln.Addr().String() + "/?token=" + token)
			defer time.Sleep(3 * time.Second)
		}
	}
	if o.Tool == engineering.ToolExecute {
		act := `<tool_call>{"name": "dispatch_engineering", "arguments": {"domain": "geometry", "action": "activate"}}</tool_call>`
		if _, err := c.Ask(ctx, conversation, act, nil); err != nil {
			return nil, nil, 0, 0, err
		}
	}
	// Warm up: connections, consumers, caches.
	for range 20 {
		if _, err := c.Ask(ctx, conversation, text, nil); err != nil {
			return nil, nil, 0, 0, err
		}
	}
	ask := func(ctx context.Context) error {
		out, err := c.Ask(ctx, conversation, text, nil)
		if err != nil {
			return err
		}
		for _, r := range out.Results {
			if !r.Success {
				return fmt.Errorf("call failed: %+v", r.Error)
			}
		}
		return nil
	}
	if o.Profile != nil {
		if err := pprof.StartCPUProfile(o.Profile); err != nil {
			return nil, nil, 0, 0, err
		}
	}
	cpu0 := cpuSeconds()
	lat, secs, err = drive(ctx, o.Responses, o.Concurrency, ask)
	cpu = cpuSeconds() - cpu0
	if o.Profile != nil {
		pprof.StopCPUProfile()
	}
	if o.AllocProfile != nil && err == nil {
		runtime.GC() // the profile counts allocations up to the last collection
		if err := pprof.Lookup("allocs").WriteTo(o.AllocProfile, 0); err != nil {
			return nil, nil, 0, 0, err
		}
	}
	if err != nil || o.NoPaced {
		return lat, nil, secs, cpu, err
	}
	rate := o.Rate
	if rate <= 0 {
		rate = float64(o.Responses) / secs / 2
	}
	r.PacedResponsesPerSec = rate
	paced, err = pace(ctx, o.Responses, rate, ask)
	return lat, paced, secs, cpu, err
}

// pace starts n requests at a steady rate (per second), open loop: a request is started
// when it is due whether or not the earlier ones have finished, so a slow response delays
// no later request and shows in the figures (no coordinated omission). A request's
// latency counts from when it actually started: the driver sleeps between requests, and
// a sleep here overruns by about half a millisecond (the timer's resolution), which is the
// driver's delay, not toolbus's.
func pace(ctx context.Context, n int, rate float64, do func(context.Context) error) ([]time.Duration, error) {
	lat := make([]time.Duration, n)
	interval := time.Duration(float64(time.Second) / rate)
	var wg sync.WaitGroup
	var firstErr atomic.Value
	start := time.Now()
	for i := range n {
		due := start.Add(time.Duration(i) * interval)
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		if firstErr.Load() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			t0 := time.Now()
			err := do(rctx)
			lat[i] = time.Since(t0)
			if err != nil {
				firstErr.CompareAndSwap(nil, err)
			}
		}()
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return nil, err
	}
	return lat, nil
}

// drive runs n requests with c in flight and returns their latencies and the wall time.
func drive(ctx context.Context, n, c int, do func(context.Context) error) ([]time.Duration, float64, error) {
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	start := time.Now()
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || firstErr.Load() != nil {
					return
				}
				rctx, cancel := context.WithTimeout(ctx, time.Minute)
				t0 := time.Now()
				err := do(rctx)
				lat[i] = time.Since(t0)
				cancel()
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	if err, _ := firstErr.Load().(error); err != nil {
		return nil, 0, err
	}
	return lat, secs, nil
}

// sizes are the body sizes of the pipeline's messages for one response.
type sizes struct{ response, call, result, output int }

// messageSizes builds one response's messages with the stages' own pure functions.
func messageSizes(ctx context.Context, text string, cfg *config.Config, local *localtools.Registry) (sizes, error) {
	exec, err := toolbus.NewExecutor(cfg, local, engineering.NewMemorySessions(), nil)
	if err != nil {
		return sizes{}, err
	}
	w := parser.Plan("0123456789abcdefghij", conversation, text, time.Time{}, nil)
	sz := sizes{response: len(text)}
	var results []messages.ToolResult
	for _, c := range w.Calls {
		b, _ := json.Marshal(c)
		sz.call = max(sz.call, len(b))
		r, _ := exec.Execute(ctx, c)
		results = append(results, r)
		b, _ = json.Marshal(r)
		sz.result = max(sz.result, len(b))
	}
	b, _ := json.Marshal(messages.RenderOutput("0123456789abcdefghij", conversation, results))
	sz.output = len(b)
	return sz, nil
}

// runCeiling relays messages of the pipeline's sizes through the same hops with the
// stage runner and handlers that only produce the next message, and nothing else (or,
// with plain, with [plainRelay]): at full speed, then paced at rate (when rate > 0).
func runCeiling(ctx context.Context, o Options, sz sizes, rate float64, plain bool) (lat, paced []time.Duration, secs, cpu float64, err error) {
	nc, stop, err := startServer(o.InProcess)
	if err != nil {
		return nil, nil, 0, 0, err
	}
	defer stop()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, nil, 0, 0, err
	}
	hops := []struct{ stream, subject string }{
		{"CEIL_RESPONSES", "ceil.responses"},
		{"CEIL_CALLS", "ceil.calls"},
		{"CEIL_RESULTS", "ceil.results"},
	}
	for _, h := range hops {
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
			Name: h.stream, Subjects: []string{h.subject + ".>"}, Retention: jetstream.WorkQueuePolicy,
			Storage: jetstream.FileStorage, Duplicates: 10 * time.Minute,
		}); err != nil {
			return nil, nil, 0, 0, err
		}
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: "CEIL_OUTPUT", Subjects: []string{"ceil.output.>"}, Storage: jetstream.FileStorage, Duplicates: 10 * time.Minute,
	}); err != nil {
		return nil, nil, 0, 0, err
	}
	payload := func(n int) []byte { return []byte(strings.Repeat("x", n)) }
	bodies := [][]byte{payload(sz.call), payload(sz.result), payload(sz.output)}
	next := []string{"ceil.calls", "ceil.results", "ceil.output"}

	// The last hop gathers the fan-out of calls back into one output, as the formatter does.
	var gatherMu sync.Mutex
	gathered := map[string]int{}
	sctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for i, h := range hops {
		cons, err := js.CreateOrUpdateConsumer(ctx, h.stream, jetstream.ConsumerConfig{
			Durable: "relay", AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 1024,
		})
		if err != nil {
			return nil, nil, 0, 0, err
		}
		for range replicas(i, o.Executors) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				relay := func(h nats.Header) []bus.Outgoing {
					id, idx := h.Get(messages.HeaderResponseID), h.Get(messages.HeaderCallIndex)
					fan := 1
					switch i {
					case 0: // a response becomes its calls
						fan = o.CallsPerResponse
					case 2: // the results of a response become one output
						if o.CallsPerResponse > 1 {
							gatherMu.Lock()
							gathered[id]++
							done := gathered[id] == o.CallsPerResponse
							gatherMu.Unlock()
							if !done {
								return nil
							}
						}
						idx = ""
					}
					out := make([]bus.Outgoing, 0, fan)
					for k := range fan {
						if i == 0 {
							idx = fmt.Sprint(k)
						}
						m := bus.Meta{ResponseID: id, MsgID: fmt.Sprintf("%s/%d/%s", id, i, idx)}
						if idx != "" {
							m.Index, _ = strconv.Atoi(idx)
							m.Count = o.CallsPerResponse
						}
						out = append(out, bus.Outgoing{Subject: next[i] + "." + conversation, Body: bodies[i], Meta: m})
					}
					return out
				}
				if plain {
					plainRelay(sctx, js, cons, relay)
					return
				}
				bus.Run(sctx, cons, js, func(ctx context.Context, d *bus.Delivery) ([]bus.Outgoing, error) {
					return relay(d.Header), nil
				}, bus.RunOptions{Concurrency: 16, Prefetch: 128})
			}()
		}
	}

	var waitMu sync.Mutex
	waiters := map[string]chan struct{}{}
	sub, err := nc.Subscribe("ceil.output."+conversation, func(m *nats.Msg) {
		waitMu.Lock()
		ch := waiters[m.Header.Get(messages.HeaderResponseID)]
		waitMu.Unlock()
		if ch != nil {
			close(ch)
		}
	})
	if err != nil {
		return nil, nil, 0, 0, err
	}
	sub.SetPendingLimits(-1, -1)
	defer sub.Unsubscribe()
	var seq atomic.Int64
	body := payload(sz.response)
	relay := func(ctx context.Context) error {
		id := fmt.Sprintf("r%d", seq.Add(1))
		ch := make(chan struct{})
		waitMu.Lock()
		waiters[id] = ch
		waitMu.Unlock()
		defer func() { waitMu.Lock(); delete(waiters, id); waitMu.Unlock() }()
		m := &nats.Msg{Subject: "ceil.responses." + conversation, Data: body, Header: bus.Meta{ResponseID: id, MsgID: id}.Header()}
		if _, err := js.PublishMsg(ctx, m); err != nil {
			return err
		}
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	cpu0 := cpuSeconds()
	lat, secs, err = drive(ctx, o.Responses, o.Concurrency, relay)
	cpu = cpuSeconds() - cpu0
	if err != nil || rate <= 0 {
		return lat, nil, secs, cpu, err
	}
	paced, err = pace(ctx, o.Responses, rate, relay)
	return lat, paced, secs, cpu, err
}

// plainRelay is the plain relay the runner is measured against: nats.go's Consume, each
// handled message's outgoing messages published asynchronously, and the message acked
// once they are stored.
func plainRelay(ctx context.Context, js jetstream.JetStream, cons jetstream.Consumer, relay func(nats.Header) []bus.Outgoing) {
	type pending struct {
		msg     jetstream.Msg
		futures []jetstream.PubAckFuture
	}
	acks := make(chan pending, 1024)
	go func() {
		for {
			var p pending
			select {
			case p = <-acks:
			case <-ctx.Done():
				return
			}
			ok := true
			for _, f := range p.futures {
				select {
				case <-f.Ok():
				case <-f.Err():
					ok = false
				}
			}
			if ok {
				p.msg.Ack()
			} else {
				p.msg.Nak()
			}
		}
	}()
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		out := relay(msg.Headers())
		p := pending{msg: msg}
		for _, o := range out {
			f, err := js.PublishMsgAsync(&nats.Msg{Subject: o.Subject, Header: o.Meta.Header(), Data: o.Body})
			if err == nil {
				p.futures = append(p.futures, f)
			}
		}
		select {
		case acks <- p:
		case <-ctx.Done():
		}
	})
	if err != nil {
		return
	}
	<-ctx.Done()
	cc.Stop()
}

// replicas of hop i: the executor hop runs as many as the pipeline's executors.
func replicas(i, executors int) int {
	if i == 1 {
		return executors
	}
	return 1
}

func pct(d []time.Duration, p float64) float64 {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(float64(len(s)-1) * p / 100)
	return float64(s[i].Microseconds()) / 1000
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
