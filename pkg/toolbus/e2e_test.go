package toolbus_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolbus"
)

// startBus starts an embedded JetStream server and returns a connection factory; each
// service in a test gets a connection of its own, as separate processes would.
func startBus(t *testing.T) (connect func(name string) *nats.Conn) {
	t.Helper()
	url := bustest.Server(t)
	return func(name string) *nats.Conn {
		nc, _ := bustest.Connect(t, url, nats.Name(name))
		return nc
	}
}

// startEach runs each service as a node of its own on a connection of its own, with o
// (whose Services it sets), until the test ends.
func startEach(t *testing.T, connect func(string) *nats.Conn, o toolbus.Options, services ...string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var nodes []*toolbus.Toolbus
	t.Cleanup(func() {
		cancel()
		for _, n := range nodes {
			n.Wait()
		}
	})
	for _, svc := range services {
		o.Services, o.Conn, o.Provision = []string{svc}, connect(svc), true
		n, err := toolbus.Start(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
}

// flakyOrders is a local tool lookup_order that fails its first call with
// server_unavailable (message msg) and answers every later one; tries counts the calls.
func flakyOrders(msg string, tries *atomic.Int32) *localtools.Registry {
	local := localtools.New()
	local.Add(localtools.Tool{
		Info: messages.ToolInfo{Name: "lookup_order", Idempotent: true},
		Run: func(context.Context, json.RawMessage) (json.RawMessage, error) {
			if tries.Add(1) == 1 {
				return nil, &messages.ToolError{Code: messages.CodeServerUnavailable, Message: msg}
			}
			return json.RawMessage(`{"status":"shipped"}`), nil
		},
	})
	return local
}

// startServices runs the parser, formatter and healthd on one connection and
// executors executor replicas on a connection each.
func startServices(t *testing.T, connect func(string) *nats.Conn, executors int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var nodes []*toolbus.Toolbus
	start := func(name string, services ...string) {
		n, err := toolbus.Start(ctx, toolbus.Options{Provision: true, Conn: connect(name), Services: services})
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	start("pipeline", toolbus.Parser, toolbus.Formatter, toolbus.Healthd)
	for i := range executors {
		start(fmt.Sprintf("executor-%d", i), toolbus.Executor)
	}
	t.Cleanup(func() {
		cancel()
		for _, n := range nodes {
			if err := n.Wait(); err != nil {
				t.Errorf("service error: %v", err)
			}
		}
	})
}

// call is one planned call of a test response and what its result must be.
type call struct {
	block   string
	tool    string
	ok      bool
	code    messages.ErrorCode
	area    float64 // expected value of a circle-area call
	isClock bool
}

func circleCall(r float64) call {
	return call{
		block: fmt.Sprintf(`<tool_call>{"name": "execute_tool", "arguments": {"tool_name": "geometry.solve_circle_area", "parameters": {"r": %g}}}</tool_call>`, r),
		tool:  "execute_tool", ok: true, area: math.Pi * r * r,
	}
}

var (
	clockCall = call{block: `<tool_call>{"tool": "clock", "parameters": {}}</tool_call>`, tool: "clock", ok: true, isClock: true}
	infoCall  = call{block: `<tool_call>{"name": "dispatch_engineering", "arguments": {"domain": "geometry", "action": "info"}}</tool_call>`, tool: "dispatch_engineering", ok: true}
	badCall   = call{block: `<tool_call>{"name": "clock" "arguments" {{{ ]]] nonsense</tool_call>`, ok: false, code: messages.CodeParseError}
)

func TestPipelineEndToEnd(t *testing.T) {
	t.Parallel()
	connect := startBus(t)
	startServices(t, connect, 2)
	c, err := client.New(connect("orchestrator"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Activation goes through whichever executor replica takes it; the calculators below
	// then run on both replicas, so the session must be shared through the bucket.
	const conversations = 4
	for i := range conversations {
		out, err := c.Ask(ctx, fmt.Sprintf("conv-%d", i), `<tool_call>{"name": "dispatch_engineering", "arguments": {"domain": "geometry", "action": "activate"}}</tool_call>`, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Results) != 1 || !out.Results[0].Success {
			t.Fatalf("activation failed: %+v", out)
		}
	}

	// 100 responses of 1–3 calls, plus one without a call and one with a malformed block.
	rng := rand.New(rand.NewPCG(1, 2))
	type planned struct {
		conv, text string
		calls      []call
	}
	var plans []planned
	for i := range 100 {
		p := planned{conv: fmt.Sprintf("conv-%d", i%conversations), text: fmt.Sprintf("Response %d.\n", i)}
		for j := range 1 + rng.IntN(3) {
			var cl call
			switch rng.IntN(3) {
			case 0:
				cl = clockCall
			case 1:
				cl = infoCall
			default:
				cl = circleCall(float64(i*10+j+1) / 8)
			}
			p.calls = append(p.calls, cl)
			p.text += "Let me call a tool.\n" + cl.block + "\n"
		}
		plans = append(plans, p)
	}
	plans = append(plans,
		planned{conv: "conv-0", text: "The answer is 42. No tool is needed."},
		planned{conv: "conv-1", text: "Three calls, one broken:\n" + circleCall(2).block + "\n" + badCall.block + "\n" + clockCall.block,
			calls: []call{circleCall(2), badCall, clockCall}},
	)

	// Count every output published, to prove none is published twice.
	counts := map[string]int{}
	var mu sync.Mutex
	watcher := connect("watcher")
	sub, err := watcher.Subscribe(messages.AllOutputs, func(m *nats.Msg) {
		mu.Lock()
		counts[m.Header.Get(messages.HeaderResponseID)]++
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := watcher.Flush(); err != nil { // the subscription is in place before any output
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	outs := make([]*messages.Output, len(plans))
	errs := make([]error, len(plans))
	sem := make(chan struct{}, 16)
	for i, p := range plans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			outs[i], errs[i] = c.Ask(ctx, p.conv, p.text, nil)
		}()
	}
	wg.Wait()

	for i, p := range plans {
		if errs[i] != nil {
			t.Fatalf("response %d: %v", i, errs[i])
		}
		checkOutput(t, i, p.calls, outs[i])
	}

	// Every response has exactly one output, also in the stream.
	time.Sleep(300 * time.Millisecond)
	mu.Lock()
	for _, o := range outs {
		if counts[o.ResponseID] != 1 {
			t.Errorf("response %s: %d outputs published", o.ResponseID, counts[o.ResponseID])
		}
	}
	mu.Unlock()
	js, _ := jetstream.New(connect("inspect"))
	st, err := js.Stream(ctx, messages.StreamOutput)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := uint64(len(plans) + conversations); info.State.Msgs != want {
		t.Errorf("output stream holds %d messages, want %d", info.State.Msgs, want)
	}
}

func checkOutput(t *testing.T, i int, calls []call, out *messages.Output) {
	t.Helper()
	if len(calls) == 0 {
		if out.Kind != messages.KindNoToolCall || len(out.Results) != 0 || out.Text != "" {
			t.Errorf("response %d: want no_tool_call, got %+v", i, out)
		}
		return
	}
	if out.Kind != messages.KindToolResults || len(out.Results) != len(calls) {
		t.Fatalf("response %d: want %d results, got kind %s with %d", i, len(calls), out.Kind, len(out.Results))
	}
	if n := strings.Count(out.Text, "<tool_result>"); n != len(calls) {
		t.Errorf("response %d: %d blocks in text, want %d", i, n, len(calls))
	}
	for j, want := range calls {
		got := out.Results[j]
		if got.Success != want.ok {
			t.Errorf("response %d call %d: success=%v (%+v), want %v", i, j, got.Success, got.Error, want.ok)
			continue
		}
		if !want.ok {
			if got.Error == nil || got.Error.Code != want.code {
				t.Errorf("response %d call %d: error %+v, want code %s", i, j, got.Error, want.code)
			}
			continue
		}
		if got.Tool != want.tool {
			t.Errorf("response %d call %d: tool %q, want %q (out of order?)", i, j, got.Tool, want.tool)
		}
		var res map[string]any
		if err := json.Unmarshal(got.Result, &res); err != nil {
			t.Errorf("response %d call %d: result is not an object: %s", i, j, got.Result)
			continue
		}
		switch {
		case want.isClock:
			if _, ok := res["utc"]; !ok {
				t.Errorf("response %d call %d: clock result without utc: %s", i, j, got.Result)
			}
		case want.area > 0:
			v, _ := res["value"].(float64)
			if res["solved_for"] != "A" || math.Abs(v-want.area) > 1e-5*want.area {
				t.Errorf("response %d call %d: area %v (solved for %v), want %.6g (out of order?)", i, j, v, res["solved_for"], want.area)
			}
		}
	}
}
