package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/toolbus/toolbus/internal/bench"
	"github.com/toolbus/toolbus/pkg/config"
)

func benchCmd(ctx context.Context, env Env, args []string) error {
	fs := newFlags("bench", env)
	var o bench.Options
	fs.IntVar(&o.Responses, "responses", 2000, "responses to drive through the pipeline")
	widths := fs.String("calls-per-response", "1", "tool calls in each response; a list (1,8,32,64) sweeps: each width in turn, every round, medians side by side")
	concurrencies := fs.String("concurrency", "16", "responses in flight; a list sweeps, paired with --calls-per-response (64 --concurrency 4 against 1 at 256: 1,64 with 256,4)")
	fs.IntVar(&o.Executors, "executors", 2, "executor replicas")
	fs.IntVar(&o.Rounds, "rounds", 1, "run toolbus, the ceiling and the plain relay this many times, alternately, and report each round and the medians")
	fs.StringVar(&o.Tool, "tool", "execute_tool", "tool every call runs: execute_tool (an engineering calculator), clock, or a configured tool")
	fs.DurationVar(&o.ToolLatency, "tool-latency", 0, "run a local tool that takes this long instead of --tool (e.g. 20ms, for scaling runs)")
	catalogs := fs.String("catalog", "0", "add this many in-process tools, a hundred per server, and call them instead of --tool: what a large catalog costs; a list (10,5000) sweeps")
	fs.Float64Var(&o.Rate, "rate", 0, "responses per second of the paced phase (default: half the measured throughput)")
	fs.BoolVar(&o.NoPaced, "no-paced", false, "skip the paced phase")
	fs.StringVar(&o.NATSConf, "nats-conf", "", "run the pipeline as a deployment: serve this NATS configuration (deploy/nats.conf) and run each service as its own user, the orchestrator as orchestrator")
	fs.BoolVar(&o.InProcess, "in-process", false, "connect to the embedded server in process, as toolbus run and serve do, instead of over TCP")
	fs.BoolVar(&o.Console, "console", false, "serve the web console beside the pipeline, nobody watching (as serve does), to measure what it costs")
	fs.StringVar(&o.ConsoleAddr, "console-addr", "", "serve the console of the toolbus run at this address, to watch it (implies --console; the URL is printed)")
	cfgPath := fs.String("config", envDefault(env, "config", ""), "configuration file")
	asJSON := fs.Bool("json", false, "end with one JSON object of the figures")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the toolbus run (not the ceiling) to this file")
	allocProfile := fs.String("allocprofile", "", "write the allocation profile after the toolbus run to this file (go tool pprof -sample_index=alloc_space)")
	stream := fs.Bool("stream", false, "measure streamed responses against whole ones: responses of three calls of a 300 ms tool written at 50 tokens/s (--responses, default 20 here; --concurrency, default 4; --tool-latency; --tokens-per-sec)")
	tokensPerSec := fs.Float64("tokens-per-sec", 50, "with --stream: how fast the model writes")
	frontDoor := fs.Bool("front-door", false, "measure MCP clients' tools/call of one MCP server's tool through toolbus's front door against the same calls straight to the server (go-sdk clients; --responses calls of each, default 500 here; --concurrency sessions, default 8; --rounds)")
	remote := fs.Bool("remote", false, "measure one remote MCP server's tool (go-sdk, streamable HTTP, in process) called directly and through toolbus beside the plain relay, one call in flight (1000 calls, or --responses), and toolbus against the relay at 256 in flight (20000 engineering calls); --rounds")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *remote {
		ro := bench.RemoteOptions{Rounds: o.Rounds, Executors: o.Executors, InProcess: o.InProcess}
		fs.Visit(func(f *flag.Flag) {
			if f.Name == "responses" {
				ro.Serial, ro.Wide = o.Responses, o.Responses
			}
		})
		r, err := bench.RunRemote(ctx, ro)
		if err != nil {
			return err
		}
		printRemote(env.Stdout, r)
		if *asJSON {
			return printJSONLine(env.Stdout, r)
		}
		return nil
	}
	points, err := sweepPoints(*widths, *concurrencies, *catalogs)
	if err != nil {
		return usageError{err}
	}
	o.CallsPerResponse, o.Concurrency, o.Catalog = points[0].CallsPerResponse, points[0].Concurrency, points[0].Catalog
	if *frontDoor {
		fo := bench.FrontDoorOptions{Rounds: o.Rounds}
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "responses":
				fo.Calls = o.Responses
			case "concurrency":
				fo.Concurrency = o.Concurrency
			}
		})
		r, err := bench.RunFrontDoor(ctx, fo)
		if err != nil {
			return err
		}
		w := env.Stdout
		fmt.Fprintf(w, "run: %d tools/call of an MCP server's tool (go-sdk, streamable HTTP, in process) each way, %d MCP sessions at once, %d round(s), medians; %d CPUs\n",
			r.Calls, r.Concurrency, r.Rounds, r.NumCPU)
		fmt.Fprintf(w, "through toolbus's front door (every stage, embedded NATS): %.0f calls/s, p50 %.2f ms, p99 %.2f ms\n", r.DoorCallsPerSec, r.DoorP50ms, r.DoorP99ms)
		fmt.Fprintf(w, "straight to the server:                                     %.0f calls/s, p50 %.2f ms, p99 %.2f ms\n", r.DirectCallsPerSec, r.DirectP50ms, r.DirectP99ms)
		if *asJSON {
			return printJSONLine(w, r)
		}
		return nil
	}
	if *stream {
		cfg, err := config.Load(*cfgPath)
		if err != nil {
			return err
		}
		so := bench.StreamOptions{Rate: *tokensPerSec, ToolLatency: o.ToolLatency, InProcess: o.InProcess, Config: cfg}
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "responses":
				so.Responses = o.Responses
			case "concurrency":
				so.Concurrency = o.Concurrency
			case "calls-per-response":
				so.Calls = o.CallsPerResponse
			}
		})
		r, err := bench.RunStream(ctx, so)
		if err != nil {
			return err
		}
		w := env.Stdout
		fmt.Fprintf(w, "run: %d responses streamed and %d sent whole, alternately, %d at a time; each %d tokens written at %.0f tokens/s (%.1f s) holding %d calls of a read-only tool taking %.0f ms; %d CPUs\n",
			r.Responses, r.Responses, r.Concurrency, r.Tokens, r.Rate, r.WriteSeconds, r.Calls, r.ToolLatencyMS, r.NumCPU)
		fmt.Fprintf(w, "from the end of the response to its output: streamed p50 %.1f ms (p90 %.1f, max %.1f); whole p50 %.1f ms (p90 %.1f, max %.1f)\n",
			r.StreamedP50ms, r.StreamedP90ms, r.StreamedMaxMs, r.WholeP50ms, r.WholeP90ms, r.WholeMaxMs)
		fmt.Fprintf(w, "the bus alone (the same response, calls that take no time, whole): p50 %.1f ms\n", r.BusP50ms)
		if *asJSON {
			return printJSONLine(w, r)
		}
		return nil
	}
	// Tracing as the services set it up: OTEL_* variables, off (no-op) without them.
	stopTelemetry, err := startTelemetry(ctx, "toolbus-bench", nil)
	if err != nil {
		return err
	}
	defer stopTelemetry()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		o.Profile = f
	}
	if *allocProfile != "" {
		f, err := os.Create(*allocProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		o.AllocProfile = f
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	o.Config = cfg
	if o.ConsoleAddr != "" {
		o.Console = true
		o.ConsoleReady = func(url string) { fmt.Fprintf(env.Stderr, "toolbus bench: console of the run on %s\n", url) }
	}
	if len(points) > 1 {
		return printSweep(ctx, env.Stdout, o, points, *asJSON)
	}
	r, err := bench.Run(ctx, o)
	if err != nil {
		return err
	}
	w := env.Stdout
	fmt.Fprintf(w, "machine: %d CPUs, %s\n", r.NumCPU, r.CPUModel)
	conn := "TCP loopback"
	if r.InProcess {
		conn = "in process"
	}
	if r.NATSConf != "" {
		conn = "as a deployment (" + r.NATSConf + "): each service on its own connection as its own user, the orchestrator as orchestrator, over TCP loopback"
	}
	tool := r.Tool
	if r.Catalog > 0 {
		tool = fmt.Sprintf("tools of a catalog of %d over %d servers", r.Catalog, (r.Catalog+99)/100)
	}
	fmt.Fprintf(w, "run: %d responses × %d calls of %s, %d in flight, %d executors, connected %s\n", r.Responses, r.CallsPerResponse, tool, r.Concurrency, r.Executors, conn)
	fmt.Fprintf(w, "toolbus: %.0f calls/s, %.0f responses/s; latency p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms; %.3f CPU s per 1000 calls\n",
		r.CallsPerSec, r.ResponsesPerSec, r.P50ms, r.P90ms, r.P99ms, r.MaxMs, r.CPUSecondsPer1000Calls)
	if r.PacedResponsesPerSec > 0 {
		fmt.Fprintf(w, "paced at %.0f responses/s: latency p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms\n",
			r.PacedResponsesPerSec, r.PacedP50ms, r.PacedP90ms, r.PacedP99ms, r.PacedMaxMs)
	}
	fmt.Fprintf(w, "ceiling (same hops and sizes, no toolbus logic): %.0f calls/s; p50 %.2f ms, p99 %.2f ms; %.3f CPU s per 1000 calls\n",
		r.CeilingCallsPerSec, r.CeilingP50ms, r.CeilingP99ms, r.CeilingCPUSecondsPer1000Calls)
	if r.PacedResponsesPerSec > 0 {
		fmt.Fprintf(w, "ceiling paced at %.0f responses/s: latency p50 %.2f ms, p99 %.2f ms\n", r.PacedResponsesPerSec, r.CeilingPacedP50ms, r.CeilingPacedP99ms)
	}
	fmt.Fprintf(w, "ratio toolbus / ceiling: %.2f\n", r.Ratio)
	fmt.Fprintf(w, "plain relay (nats.go Consume, async publish): %.0f calls/s, latency p50 %.2f ms, p99 %.2f ms\n", r.RelayCallsPerSec, r.RelayP50ms, r.RelayP99ms)
	fmt.Fprintf(w, "ratio ceiling / plain relay: %.2f; toolbus / plain relay: %.2f\n", r.CeilingVsRelay, r.RatioVsRelay)
	if len(r.Rounds) > 1 {
		fmt.Fprintf(w, "%d rounds, alternately (the figures above: medians; latencies: all rounds together):\n", len(r.Rounds))
		for i, x := range r.Rounds {
			fmt.Fprintf(w, "  round %d: toolbus %.0f calls/s (%.3f CPU s per 1000), ceiling %.0f, plain relay %.0f; ceiling / relay %.2f, toolbus / relay %.2f\n",
				i+1, x.CallsPerSec, x.CPUSecondsPer1000Calls, x.CeilingCallsPerSec, x.RelayCallsPerSec, x.CeilingVsRelay, x.RatioVsRelay)
		}
	}
	if *asJSON {
		return printJSONLine(w, r)
	}
	return nil
}

// printJSONLine ends a report with one JSON object of its figures.
func printJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// sweepPoints pairs the lists of --calls-per-response, --concurrency and --catalog into
// the points of a sweep: lists of one value apply to every point, longer lists are
// zipped and must be of one length.
func sweepPoints(widths, concurrencies, catalogs string) ([]bench.Point, error) {
	var lists [3][]int
	n := 1
	for i, text := range []string{widths, concurrencies, catalogs} {
		for _, f := range strings.Split(text, ",") {
			v, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || v < 0 {
				return nil, fmt.Errorf("bench: %q is not a list of counts", text)
			}
			lists[i] = append(lists[i], v)
		}
		if l := len(lists[i]); l > 1 {
			if n > 1 && l != n {
				return nil, fmt.Errorf("bench: the lists of a sweep are paired and must be of one length (%d and %d)", n, l)
			}
			n = l
		}
	}
	at := func(l []int, i int) int {
		if len(l) == 1 {
			return l[0]
		}
		return l[i]
	}
	points := make([]bench.Point, n)
	for i := range points {
		points[i] = bench.Point{CallsPerResponse: at(lists[0], i), Concurrency: at(lists[1], i), Catalog: at(lists[2], i)}
	}
	return points, nil
}

// printSweep runs a sweep and prints one line per point.
func printSweep(ctx context.Context, w io.Writer, o bench.Options, points []bench.Point, asJSON bool) error {
	reports, err := bench.Sweep(ctx, o, points)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "sweep: %d responses a point, %d round(s) alternately, %d executors; medians of the rounds\n", cmp.Or(o.Responses, 2000), max(o.Rounds, 1), cmp.Or(o.Executors, 2))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "calls/response\tin flight\tcatalog\tcalls/s\tvs first\tCPU s/1000 calls\tvs first\tp50 ms\tp99 ms\t")
	for _, r := range reports {
		catalog := "-"
		if r.Catalog > 0 {
			catalog = strconv.Itoa(r.Catalog)
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%.0f\t%.2f\t%.3f\t%.2f\t%.2f\t%.2f\t\n", r.CallsPerResponse, r.Concurrency, catalog,
			r.CallsPerSec, r.VsFirst, r.CPUSecondsPer1000Calls, r.CPUVsFirst, r.P50ms, r.P99ms)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if asJSON {
		return printJSONLine(w, reports)
	}
	return nil
}

// printRemote prints a RunRemote's points: the direct call, toolbus and the relay side by
// side, what toolbus adds to the call against the relay's latency, and toolbus's rate
// against the relay's.
func printRemote(w io.Writer, r *bench.RemoteReport) {
	fmt.Fprintf(w, "machine: %d CPUs, %s; %d round(s) alternately, medians\n", r.NumCPU, r.CPUModel, r.Rounds)
	fmt.Fprintln(w, "one-call responses through toolbus (parser, executor, formatter) beside the plain relay of the same hops; echo__echo: a remote MCP server's tool (go-sdk, streamable HTTP), also called directly with the go-sdk client")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "in flight\tcalls\ttool\tdirect p50 ms\ttoolbus p50 ms\tadded ms\trelay p50 ms\tadded / relay\ttoolbus calls/s\trelay calls/s\ttoolbus / relay\t")
	orDash := func(v float64) string {
		if v == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", v)
	}
	for _, p := range r.Points {
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%.2f\t%s\t%.2f\t%s\t%.0f\t%.0f\t%.2f\t\n", p.Concurrency, p.Calls, p.Tool, orDash(p.DirectP50ms), p.ToolbusP50ms,
			orDash(p.AddedP50ms), p.RelayP50ms, orDash(p.AddedVsRelay), p.ToolbusCallsPerSec, p.RelayCallsPerSec, p.ToolbusVsRelay)
	}
	tw.Flush()
}
