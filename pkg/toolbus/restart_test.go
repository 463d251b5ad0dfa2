package toolbus_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/internal/mcptest"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolbus"
)

// restartableServer starts a file-backed embedded server for t on a fixed port; restart
// stops it and, half a second later, starts it again on the same store. Clients made by
// connect reconnect forever.
func restartableServer(t *testing.T) (connect func(name string) *nats.Conn, restart func()) {
	t.Helper()
	dir, port := t.TempDir(), mcptest.FreePort(t)
	start := func() func() {
		_, stop, err := bus.StartEmbedded(bus.EmbeddedOptions{StoreDir: dir, Port: port})
		if err != nil {
			t.Fatal(err)
		}
		return stop
	}
	stop := start()
	t.Cleanup(func() { stop() })
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	connect = func(name string) *nats.Conn {
		nc, err := nats.Connect(url, nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	restart = func() {
		stop()
		time.Sleep(500 * time.Millisecond)
		stop = start()
	}
	return connect, restart
}

// askThroughRestart asks text as response id until it is answered or ctx ends: an
// orchestrator submits again with the same id after a failure, and de-duplication makes
// that safe.
func askThroughRestart(ctx context.Context, c *client.Client, conv, id, text string) (*messages.Output, error) {
	for {
		actx, cancel := context.WithTimeout(ctx, 20*time.Second)
		out, err := c.Ask(actx, conv, text, &client.SubmitOptions{ResponseID: id})
		cancel()
		if err == nil || ctx.Err() != nil {
			return out, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The file-backed server is stopped and started again (same store) in the middle of a
// run: every response still gets exactly one output.
func TestNATSRestartLosesNothing(t *testing.T) {
	connect, restart := restartableServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sctx, stopServices := context.WithCancel(ctx)
	var nodes []*toolbus.Toolbus
	for _, svc := range []string{toolbus.Parser, toolbus.Executor, toolbus.Executor, toolbus.Formatter} {
		// A short AckWait: acks lost with the connection come back as redeliveries soon.
		n, err := toolbus.Start(sctx, toolbus.Options{Provision: true, Conn: connect(svc), Services: []string{svc}, Topology: bus.Topology{AckWait: 2 * time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	c, err := client.New(connect("orchestrator"))
	if err != nil {
		t.Fatal(err)
	}

	const total = 300
	var done atomic.Int32
	counts := map[string]int{}
	var mu sync.Mutex
	watch := connect("watcher")
	if _, err := watch.Subscribe(messages.AllOutputs, func(m *nats.Msg) {
		mu.Lock()
		counts[m.Header.Get(messages.HeaderMsgID)]++
		mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	if err := watch.Flush(); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, total)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range total {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			id := fmt.Sprintf("restart-%d", i)
			text := `<tool_call>{"name": "clock", "arguments": {}}</tool_call><tool_call>{"name": "dispatch_engineering", "arguments": {"domain": "geometry", "action": "info"}}</tool_call>`
			out, err := askThroughRestart(ctx, c, "restart", id, text)
			switch {
			case err != nil:
				errs <- fmt.Errorf("%s: %w", id, err)
			case len(out.Results) != 2 || !out.Results[0].Success || !out.Results[1].Success:
				errs <- fmt.Errorf("%s: %+v", id, out)
			default:
				done.Add(1)
			}
		}()
	}
	for done.Load() < total/3 && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	restart()
	restarted := time.Now()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if done.Load() != total {
		t.Fatalf("%d of %d responses answered", done.Load(), total)
	}
	t.Logf("all answered %v after the restart", time.Since(restarted))
	// Every response has its output in the stream, and none two. An output the server
	// delivered to subscribers but had not stored when it stopped is published again
	// once its result is redelivered (its publish was never acknowledged), so the
	// stream may complete a few seconds after the last answer.
	js, err := jetstream.New(watch)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, messages.StreamOutput)
	if err != nil {
		t.Fatal(err)
	}
	var stored uint64
	for ctx.Err() == nil {
		info, err := st.Info(ctx)
		if err == nil {
			if stored = info.State.Msgs; stored >= total {
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second) // a second output for a response would show now
	if info, err := st.Info(ctx); err == nil {
		stored = info.State.Msgs
	}
	if stored != total {
		t.Errorf("output stream holds %d outputs for %d responses", stored, total)
	}
	stopServices()
	for _, n := range nodes {
		n.Wait()
	}
}

// A NATS restart in the middle of many calls with side effects: every call whose tool ran
// is answered with its real result, counted from the tool's side; none is reported
// outcome_unknown because its result could not be stored while the server was away.
func TestNATSRestartKnownOutcomes(t *testing.T) {
	t.Parallel() // waits mostly (processes starting, acks timing out): beside another test
	connect, restart := restartableServer(t)
	var ranMu sync.Mutex
	ran := map[int]int{} // n → times the tool ran
	local := localtools.New()
	local.Add(localtools.Tool{Info: messages.ToolInfo{Name: "create_ticket"},
		Run: func(_ context.Context, args json.RawMessage) (json.RawMessage, error) {
			var in struct{ N int }
			if err := json.Unmarshal(args, &in); err != nil {
				return nil, err
			}
			ranMu.Lock()
			ran[in.N]++
			ranMu.Unlock()
			return json.Marshal(map[string]int{"ticket": in.N})
		}})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	sctx, stopServices := context.WithCancel(ctx)
	var nodes []*toolbus.Toolbus
	for _, svc := range []string{toolbus.Parser, toolbus.Executor, toolbus.Executor, toolbus.Formatter} {
		n, err := toolbus.Start(sctx, toolbus.Options{Provision: true, Conn: connect(svc), Services: []string{svc}, Tools: local, Topology: bus.Topology{AckWait: 2 * time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	defer func() {
		stopServices()
		for _, n := range nodes {
			n.Wait()
		}
	}()
	c, err := client.New(connect("orchestrator"))
	if err != nil {
		t.Fatal(err)
	}
	const total = 2000
	results := make([]messages.OutputResult, total)
	var done atomic.Int32
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range total {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			text := fmt.Sprintf(`<tool_call>{"name": "create_ticket", "arguments": {"n": %d}}</tool_call>`, i)
			if out, err := askThroughRestart(ctx, c, "tickets", fmt.Sprintf("ticket-%d", i), text); err == nil && len(out.Results) == 1 {
				results[i] = out.Results[0]
				done.Add(1)
			}
		}()
	}
	for done.Load() < total/3 && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	restart()
	wg.Wait()
	if n := done.Load(); n != total {
		t.Fatalf("%d of %d calls answered", n, total)
	}
	ranMu.Lock()
	defer ranMu.Unlock()
	unknown := 0
	for i, r := range results {
		switch {
		case ran[i] > 1:
			t.Errorf("call %d ran %d times", i, ran[i])
		case ran[i] == 1 && !r.Success:
			unknown++
			if unknown <= 5 {
				t.Errorf("call %d ran, but was answered %+v", i, r.Error)
			}
		case ran[i] == 0 && r.Success:
			t.Errorf("call %d never ran, but was answered success", i)
		}
	}
	if unknown > 0 {
		t.Errorf("%d calls that ran were not answered with their result", unknown)
	}
}
