package toolbus_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolbus"
)

// clusterResponse is one response of the failover test and the areas its calls must give
// (0 for a clock call).
type clusterResponse struct {
	id, conv, text string
	areas          []float64
}

// TestClusterFailover runs the pipeline on a three-node cluster with every stream and
// bucket at three replicas, shuts down the node leading the calls stream while 200
// responses are in flight, and checks that every response still gets exactly one output
// with every call answered, in order. Services and the orchestrator each have their own
// connection listing all three nodes.
func TestClusterFailover(t *testing.T) {
	t.Parallel() // waits mostly (processes starting, acks timing out): beside another test
	if testing.Short() {
		t.Skip("three-node cluster")
	}
	servers := startNATSCluster(t)

	// A short AckWait: a message whose ack was lost with the node comes back in seconds.
	topo := bus.Topology{Replicas: 3, AckWait: 5 * time.Second}
	ajs, err := jetstream.New(connectCluster(t, servers, "provision"))
	if err != nil {
		t.Fatal(err)
	}
	bustest.ProvisionCluster(t, ajs, topo)
	ctx, cancel := context.WithCancel(context.Background())
	var nodes []*toolbus.Toolbus
	for _, svc := range []struct{ conn, service string }{
		{"parser", toolbus.Parser}, {"executor-1", toolbus.Executor}, {"executor-2", toolbus.Executor},
		{"formatter", toolbus.Formatter}, {"healthd", toolbus.Healthd},
	} {
		n, err := toolbus.Start(ctx, toolbus.Options{Provision: true, Conn: connectCluster(t, servers, svc.conn), Services: []string{svc.service}, Topology: topo})
		if err != nil {
			cancel()
			t.Fatalf("%s: %v", svc.conn, err)
		}
		nodes = append(nodes, n)
	}
	t.Cleanup(func() {
		cancel()
		for _, n := range nodes {
			if err := n.Wait(); err != nil {
				t.Errorf("service: %v", err)
			}
		}
	})

	c, err := client.New(connectCluster(t, servers, "orchestrator"))
	if err != nil {
		t.Fatal(err)
	}
	// A bound on a hang, not a speed: beside a second suite the 200 responses took over 3
	// minutes.
	runCtx, stop := context.WithTimeout(context.Background(), 10*time.Minute)
	defer stop()

	// Streams and buckets are replicated on every node.
	anc := connectCluster(t, servers, "admin")
	js, err := jetstream.New(anc)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{messages.StreamResponses, messages.StreamCalls, messages.StreamResults, messages.StreamOutput, "KV_" + messages.BucketSessions, "KV_" + messages.BucketCalls} {
		st, err := js.Stream(runCtx, name)
		if err != nil {
			t.Fatal(err)
		}
		if n := st.CachedInfo().Config.Replicas; n != 3 {
			t.Fatalf("%s has %d replicas, want 3", name, n)
		}
	}

	const conversations, responses = 10, 200
	for i := range conversations {
		out, err := c.Ask(runCtx, fmt.Sprintf("cl-%d", i), `<tool_call>{"name": "dispatch_engineering", "arguments": {"domain": "geometry", "action": "activate"}}</tool_call>`, nil)
		if err != nil || len(out.Results) != 1 || !out.Results[0].Success {
			t.Fatalf("activation: %v %+v", err, out)
		}
	}
	plans := make([]clusterResponse, responses)
	for i := range plans {
		p := clusterResponse{id: fmt.Sprintf("resp-%03d", i), conv: fmt.Sprintf("cl-%d", i%conversations)}
		var blocks []string
		for j := range 1 + i%3 {
			if (i+j)%2 == 0 {
				blocks = append(blocks, `<tool_call>{"name": "clock", "arguments": {}}</tool_call>`)
				p.areas = append(p.areas, 0)
				continue
			}
			r := float64(i) + float64(j)/10 + 1
			blocks = append(blocks, fmt.Sprintf(`<tool_call>{"name": "execute_tool", "arguments": {"tool_name": "geometry.solve_circle_area", "parameters": {"r": %g}}}</tool_call>`, r))
			p.areas = append(p.areas, math.Pi*r*r)
		}
		p.text = fmt.Sprintf("Response %d.\n%s", i, strings.Join(blocks, "\n"))
		plans[i] = p
	}

	// Drive the responses with a few orchestrator workers; take a node down once a
	// quarter of them are answered.
	outs := make([]*messages.Output, responses)
	var answered, retries atomic.Int32
	killed := make(chan string, 1)
	work := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				out, err := answer(runCtx, c, plans[i], &retries)
				if err != nil {
					t.Errorf("%s: %v", plans[i].id, err)
					continue
				}
				outs[i] = out
				if answered.Add(1) == responses/4 {
					killed <- killCallsLeader(t, servers)
				}
			}
		}()
	}
	start := time.Now()
	for i := range plans {
		work <- i
	}
	close(work)
	wg.Wait()
	t.Logf("%d responses answered in %v", responses, time.Since(start).Round(time.Millisecond))
	select {
	case name := <-killed:
		t.Logf("shut down %s (leader of %s) after %d answers; %d asks were repeated", name, messages.StreamCalls, responses/4, retries.Load())
	default:
		t.Fatal("no node was shut down")
	}
	if t.Failed() {
		return
	}

	for i, p := range plans {
		checkClusterOutput(t, p, outs[i])
	}

	// Exactly one output per response in the output stream, none for anything else.
	counts := map[string]int{}
	cons, err := js.OrderedConsumer(runCtx, messages.StreamOutput, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	want := responses + conversations
	// The cluster may still be settling after the shutdown: an empty or failed fetch is
	// tried again until the run's deadline.
	for seen := 0; seen < want && runCtx.Err() == nil; {
		batch, err := cons.Fetch(want-seen, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Logf("reading the output stream: %v (trying again)", err)
			continue
		}
		for m := range batch.Messages() {
			counts[m.Headers().Get(messages.HeaderResponseID)]++
			seen++
		}
	}
	st, err := js.Stream(runCtx, messages.StreamOutput)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.CachedInfo().State.Msgs; got != uint64(want) {
		t.Errorf("the output stream holds %d outputs, want %d (%d responses, %d activations)", got, want, responses, conversations)
	}
	for _, p := range plans {
		if counts[p.id] != 1 {
			t.Errorf("%s has %d outputs in the stream, want 1", p.id, counts[p.id])
		}
	}
}

// answer gets the output of one response through a node failure: Ask, and when the output
// was missed while the client reconnected or the submit failed, read the output stream and
// submit again (the response id makes a repeated submit a no-op).
func answer(ctx context.Context, c *client.Client, p clusterResponse, retries *atomic.Int32) (*messages.Output, error) {
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			retries.Add(1)
		}
		actx, cancel := context.WithTimeout(ctx, 15*time.Second)
		out, err := c.Ask(actx, p.conv, p.text, &client.SubmitOptions{ResponseID: p.id})
		cancel()
		if err == nil {
			return out, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		out, werr := c.Wait(wctx, p.conv, p.id)
		cancel()
		if werr == nil {
			return out, nil
		}
		if ctx.Err() != nil {
			return nil, errors.Join(err, werr)
		}
	}
}

// killCallsLeader shuts down the node that leads the calls stream and returns its name.
func killCallsLeader(t *testing.T, servers []*server.Server) string {
	for _, s := range servers {
		if s.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, messages.StreamCalls) {
			s.Shutdown()
			return s.Name()
		}
	}
	t.Log("no leader of the calls stream right now: shutting down the last node")
	s := servers[len(servers)-1]
	s.Shutdown()
	return s.Name()
}

func checkClusterOutput(t *testing.T, p clusterResponse, out *messages.Output) {
	t.Helper()
	if out == nil {
		return
	}
	if out.ResponseID != p.id || out.Kind != messages.KindToolResults || len(out.Results) != len(p.areas) {
		t.Errorf("%s: output %s of kind %s with %d results, want %d", p.id, out.ResponseID, out.Kind, len(out.Results), len(p.areas))
		return
	}
	for j, area := range p.areas {
		r := out.Results[j]
		if !r.Success {
			t.Errorf("%s call %d: %+v", p.id, j, r.Error)
			continue
		}
		if area == 0 {
			if r.Tool != "clock" {
				t.Errorf("%s call %d: tool %s, want clock (out of order?)", p.id, j, r.Tool)
			}
			continue
		}
		var res struct {
			Value float64 `json:"value"`
		}
		if err := json.Unmarshal(r.Result, &res); err != nil || math.Abs(res.Value-area) > 1e-5*area {
			t.Errorf("%s call %d: area %v, want %.6g (out of order?)", p.id, j, res.Value, area)
		}
	}
}
