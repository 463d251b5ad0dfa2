package bench

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/engineering"
)

// echoServer serves a go-sdk MCP server over streamable HTTP, in process, with one tool,
// echo, which says its text back (nothing without one): the remote MCP server of
// [RunRemote] and [RunFrontDoor]. Its config is the toolbus configuration that names it
// "echo" (its tool is echo__echo), without the engineering calculators.
func echoServer() (srv *httptest.Server, cfg *config.Config, err error) {
	echo := mcp.NewServer(&mcp.Implementation{Name: "echo"}, nil)
	mcp.AddTool(echo, &mcp.Tool{Name: "echo", Description: "says its text back"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		Text string `json:"text,omitempty"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Text}}}, nil, nil
	})
	srv = httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return echo }, nil))
	cfg, err = config.Parse([]byte(fmt.Sprintf(`{"engineering": {"enabled": false}, "mcpServers": {"echo": {"type": "http", "url": %q}}}`, srv.URL)),
		"bench.json", func(string) (string, bool) { return "", false })
	if err != nil {
		srv.Close()
		return nil, nil, err
	}
	return srv, cfg, nil
}

// RemoteOptions configures a run of [RunRemote]. Zero values take the defaults.
type RemoteOptions struct {
	// Serial is the number of calls made one at a time, default 1000; Wide the number
	// made 256 at a time, default 20000.
	Serial, Wide int
	// Rounds: each point's runs (direct, toolbus, ceiling, relay) this many times,
	// alternately; default 1.
	Rounds    int
	Executors int // executor replicas, default 2
	InProcess bool
	Logger    *slog.Logger
}

// RemotePoint is what RunRemote measured at one concurrency: one-call responses of Tool
// through toolbus, the plain JetStream relay of the same hops and sizes (the bus's own
// floor) and, of the remote server's tool, a go-sdk client calling it directly; medians
// of the rounds, latencies over all of them.
type RemotePoint struct {
	Concurrency int    `json:"concurrency"`
	Calls       int    `json:"calls"`
	Tool        string `json:"tool"`
	// The direct go-sdk call's figures: of the remote server's tool only.
	DirectCallsPerSec  float64 `json:"direct_calls_per_sec,omitempty"`
	DirectP50ms        float64 `json:"direct_p50_ms,omitempty"`
	ToolbusCallsPerSec float64 `json:"toolbus_calls_per_sec"`
	ToolbusP50ms       float64 `json:"toolbus_p50_ms"`
	ToolbusP99ms       float64 `json:"toolbus_p99_ms"`
	RelayCallsPerSec   float64 `json:"relay_calls_per_sec"`
	RelayP50ms         float64 `json:"relay_p50_ms"`
	// AddedP50ms is what toolbus adds to the direct call's p50; AddedVsRelay its ratio
	// to the relay's p50 (issue 56's bound: ≤ 1.2 at one in flight).
	AddedP50ms   float64 `json:"added_p50_ms,omitempty"`
	AddedVsRelay float64 `json:"added_vs_relay,omitempty"`
	// ToolbusVsRelay is toolbus's calls/s over the relay's (the bound: ≥ 0.8 at 256).
	ToolbusVsRelay float64 `json:"toolbus_vs_relay"`
}

// RemoteReport is the outcome of a RunRemote: one point at one in flight, one at 256.
type RemoteReport struct {
	Rounds   int           `json:"rounds"`
	Points   []RemotePoint `json:"points"`
	NumCPU   int           `json:"nproc"`
	CPUModel string        `json:"cpu_model,omitempty"`
}

// RunRemote measures one remote MCP call (a go-sdk server over streamable HTTP, in
// process) made directly with the go-sdk's client, and the same call through toolbus
// (one response of one call: parser, executor, formatter on an embedded NATS), beside
// the plain relay of the same hops, one call in flight: what toolbus adds to a call
// against what the bus's durability costs; and, in the same run, toolbus's rate at 256
// in flight against the relay's. There the tool is the engineering calculator in
// process: the remote server's own rate (a few hundred to a thousand calls a second
// here) would bound toolbus's.
func RunRemote(ctx context.Context, o RemoteOptions) (*RemoteReport, error) {
	if o.Serial <= 0 {
		o.Serial = 1000
	}
	if o.Wide <= 0 {
		o.Wide = 20000
	}
	o.Rounds = max(o.Rounds, 1)
	srv, cfg, err := echoServer()
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	r := &RemoteReport{Rounds: o.Rounds, NumCPU: runtime.NumCPU(), CPUModel: cpuModel()}
	for _, pt := range []struct {
		concurrency, calls int
		tool               string
	}{{1, o.Serial, "echo__echo"}, {256, o.Wide, engineering.ToolExecute}} {
		remote := pt.tool == "echo__echo"
		var directRate, tbRate, relayRate, tbLat, relayLat, tbP99 []float64
		var directLat []time.Duration
		for range o.Rounds {
			bo := Options{Responses: pt.calls, Concurrency: pt.concurrency, Executors: o.Executors, Tool: pt.tool,
				NoPaced: true, InProcess: o.InProcess, Logger: o.Logger}
			if remote {
				lat, secs, err := directCalls(ctx, srv.URL, pt.calls, pt.concurrency)
				if err != nil {
					return nil, err
				}
				directRate, directLat = append(directRate, float64(pt.calls)/secs), append(directLat, lat...)
				bo.Config = cfg
			}
			rep, err := Run(ctx, bo)
			if err != nil {
				return nil, err
			}
			tbRate, relayRate = append(tbRate, rep.CallsPerSec), append(relayRate, rep.RelayCallsPerSec)
			tbLat, relayLat, tbP99 = append(tbLat, rep.P50ms), append(relayLat, rep.RelayP50ms), append(tbP99, rep.P99ms)
		}
		p := RemotePoint{
			Concurrency: pt.concurrency, Calls: pt.calls, Tool: pt.tool,
			ToolbusCallsPerSec: median(tbRate), ToolbusP50ms: median(tbLat), ToolbusP99ms: median(tbP99),
			RelayCallsPerSec: median(relayRate), RelayP50ms: median(relayLat),
		}
		if remote {
			p.DirectCallsPerSec, p.DirectP50ms = median(directRate), pct(directLat, 50)
			p.AddedP50ms = p.ToolbusP50ms - p.DirectP50ms
			if p.RelayP50ms > 0 {
				p.AddedVsRelay = p.AddedP50ms / p.RelayP50ms
			}
		}
		if p.RelayCallsPerSec > 0 {
			p.ToolbusVsRelay = p.ToolbusCallsPerSec / p.RelayCallsPerSec
		}
		r.Points = append(r.Points, p)
	}
	return r, nil
}

// directCalls makes n calls of the echo server's tool with the go-sdk's client, c at a
// time over min(c, 16) sessions (a session carries concurrent calls).
func directCalls(ctx context.Context, url string, n, c int) ([]time.Duration, float64, error) {
	pool := make(chan *mcp.ClientSession, min(c, 16))
	for range cap(pool) {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
		if err != nil {
			return nil, 0, err
		}
		defer cs.Close()
		pool <- cs
	}
	call := func(ctx context.Context) error {
		cs := <-pool
		pool <- cs // sessions are shared: the next caller may use this one at once
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}})
		if err != nil {
			return err
		}
		if res.IsError || len(res.Content) == 0 {
			return fmt.Errorf("bench: echo answered %+v", res)
		}
		return nil
	}
	for range 20 { // warm up, as the pipeline run does
		if err := call(ctx); err != nil {
			return nil, 0, err
		}
	}
	return drive(ctx, n, c, call)
}
