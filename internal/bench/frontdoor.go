package bench

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"runtime"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/frontdoor"
	"github.com/toolbus/toolbus/pkg/toolbus"
)

// FrontDoorOptions configures a run of [RunFrontDoor]. Zero values take the defaults.
type FrontDoorOptions struct {
	Calls       int // of each kind, default 500
	Concurrency int // MCP sessions calling at once, default 8
	Rounds      int // door and direct alternately, this many times each; default 1
	Logger      *slog.Logger
}

// FrontDoorReport is the outcome of a RunFrontDoor: tools/call of one MCP server's tool
// through toolbus's front door (the whole pipeline behind it) and straight to the server
// with the go-sdk's client, in the same run; medians over the rounds.
type FrontDoorReport struct {
	Calls             int     `json:"calls"`
	Concurrency       int     `json:"concurrency"`
	Rounds            int     `json:"rounds"`
	DoorCallsPerSec   float64 `json:"door_calls_per_sec"`
	DoorP50ms         float64 `json:"door_p50_ms"`
	DoorP99ms         float64 `json:"door_p99_ms"`
	DirectCallsPerSec float64 `json:"direct_calls_per_sec"`
	DirectP50ms       float64 `json:"direct_p50_ms"`
	DirectP99ms       float64 `json:"direct_p99_ms"`
	NumCPU            int     `json:"nproc"`
}

// RunFrontDoor measures MCP clients calling a tool of a go-sdk server (streamable HTTP,
// in process) through toolbus's front door — every stage on an embedded NATS in process
// — against the same clients calling the server directly.
func RunFrontDoor(ctx context.Context, o FrontDoorOptions) (*FrontDoorReport, error) {
	if o.Calls <= 0 {
		o.Calls = 500
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 8
	}
	if o.Rounds <= 0 {
		o.Rounds = 1
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	server, cfg, err := echoServer()
	if err != nil {
		return nil, err
	}
	defer server.Close()
	tb, err := toolbus.Start(ctx, toolbus.Options{Config: cfg, Logger: o.Logger, Embedded: &bus.EmbeddedOptions{}})
	if err != nil {
		return nil, err
	}
	defer tb.Close()
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := tb.WaitForTools(wctx); err != nil {
		return nil, err
	}
	door, err := frontdoor.New(tb.Conn(), &frontdoor.Options{Logger: o.Logger})
	if err != nil {
		return nil, err
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go door.Run(runCtx)
	doorSrv := httptest.NewServer(door.Handler(nil))
	defer doorSrv.Close()

	sessions := func(url string) (chan *mcp.ClientSession, func(), error) {
		pool := make(chan *mcp.ClientSession, o.Concurrency)
		var all []*mcp.ClientSession
		closeAll := func() {
			for _, cs := range all {
				cs.Close()
			}
		}
		for range o.Concurrency {
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
			if err != nil {
				closeAll()
				return nil, nil, err
			}
			all = append(all, cs)
			pool <- cs
		}
		return pool, closeAll, nil
	}
	doorPool, closeDoor, err := sessions(doorSrv.URL)
	if err != nil {
		return nil, err
	}
	defer closeDoor()
	directPool, closeDirect, err := sessions(server.URL)
	if err != nil {
		return nil, err
	}
	defer closeDirect()
	// The door lists echo__echo once the catalog is in.
	for {
		cs := <-doorPool
		res, err := cs.ListTools(wctx, nil)
		doorPool <- cs
		if err != nil {
			return nil, err
		}
		if len(res.Tools) > 0 {
			break
		}
		select {
		case <-wctx.Done():
			return nil, fmt.Errorf("bench: the front door lists no tool: %w", wctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	call := func(pool chan *mcp.ClientSession, name string) func(context.Context) error {
		return func(ctx context.Context) error {
			cs := <-pool
			defer func() { pool <- cs }()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"text": "hello"}})
			if err != nil {
				return err
			}
			if res.IsError || len(res.Content) == 0 {
				return fmt.Errorf("bench: %s answered %+v", name, res)
			}
			return nil
		}
	}
	r := &FrontDoorReport{Calls: o.Calls, Concurrency: o.Concurrency, Rounds: o.Rounds, NumCPU: runtime.NumCPU()}
	var doorRate, doorP50, doorP99, directRate, directP50, directP99 []float64
	for range o.Rounds {
		lat, secs, err := drive(ctx, o.Calls, o.Concurrency, call(doorPool, "echo__echo"))
		if err != nil {
			return nil, err
		}
		doorRate, doorP50, doorP99 = append(doorRate, float64(o.Calls)/secs), append(doorP50, pct(lat, 50)), append(doorP99, pct(lat, 99))
		lat, secs, err = drive(ctx, o.Calls, o.Concurrency, call(directPool, "echo"))
		if err != nil {
			return nil, err
		}
		directRate, directP50, directP99 = append(directRate, float64(o.Calls)/secs), append(directP50, pct(lat, 50)), append(directP99, pct(lat, 99))
	}
	r.DoorCallsPerSec, r.DoorP50ms, r.DoorP99ms = median(doorRate), median(doorP50), median(doorP99)
	r.DirectCallsPerSec, r.DirectP50ms, r.DirectP99ms = median(directRate), median(directP50), median(directP99)
	return r, nil
}
