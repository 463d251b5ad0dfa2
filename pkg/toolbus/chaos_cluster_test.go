package toolbus_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolbus"
)

// chaosResponse is one response of the chaos test: its writes, in the order written.
type chaosResponse struct {
	id, conv string
	streamed bool
	writes   []string
}

func (r chaosResponse) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Response %s.\n", r.id)
	for _, w := range r.writes {
		fmt.Fprintf(&b, `Now <tool_call>{"name": "note_write", "arguments": {"conv": %q, "text": %q}}</tool_call> then `, r.conv, w)
	}
	b.WriteString("that is all.")
	return b.String()
}

// TestChaosLeaderKills runs the pipeline on a three-node cluster, two replicas of each
// stage, while the node leading one stream after another is shut down and started
// again: responses whose calls run in order, whole and streamed chunk by chunk, in
// several conversations. Every response must be answered once, with every call
// answered, every write run once and in the order written, across responses of a
// conversation too. TOOLBUS_LONG=1 runs many more responses and kills.
func TestChaosLeaderKills(t *testing.T) {
	t.Parallel() // waits mostly (leader elections, acks timing out)
	if testing.Short() {
		t.Skip("three-node cluster")
	}
	long := os.Getenv("TOOLBUS_LONG") != ""
	conversations, perConv := 4, 8
	victims := []string{messages.StreamChunks, "KV_" + messages.BucketGather}
	if long {
		conversations, perConv = 10, 40
		victims = []string{messages.StreamChunks, "KV_" + messages.BucketGather, messages.StreamCalls, messages.StreamResults,
			messages.StreamResponses, messages.StreamOutput, messages.StreamChunks, "KV_" + messages.BucketGather, "KV_" + messages.BucketCalls}
	}
	total := conversations * perConv

	cl := newNATSCluster(t)
	topo := bus.Topology{Replicas: 3, AckWait: 5 * time.Second}
	admin := connectCluster(t, cl.nodes, "admin")
	ajs, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	bustest.ProvisionCluster(t, ajs, topo)

	var j journal
	tools := journalTools(t, &j)
	cfg := mcpConfig(t, `{"engineering": {"enabled": false}, "parser": {"reasoning": "tagged", "stream_idle_timeout": "45s"}}`)
	ctx, cancel := context.WithCancel(context.Background())
	var nodes []*toolbus.Toolbus
	t.Cleanup(func() {
		cancel()
		for _, n := range nodes {
			n.Wait()
		}
	})
	for _, svc := range []struct{ conn, service string }{
		{"parser-1", toolbus.Parser}, {"parser-2", toolbus.Parser}, {"executor-1", toolbus.Executor}, {"executor-2", toolbus.Executor},
		{"formatter-1", toolbus.Formatter}, {"formatter-2", toolbus.Formatter},
	} {
		n, err := toolbus.Start(ctx, toolbus.Options{Provision: true, Conn: connectCluster(t, cl.nodes, svc.conn), Services: []string{svc.service},
			Topology: topo, Config: cfg, Tools: tools})
		if err != nil {
			t.Fatalf("%s: %v", svc.conn, err)
		}
		nodes = append(nodes, n)
	}
	runCtx, stop := context.WithTimeout(context.Background(), map[bool]time.Duration{false: 4 * time.Minute, true: 20 * time.Minute}[long])
	defer stop()
	for _, n := range nodes {
		if err := n.WaitForTools(runCtx); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(connectCluster(t, cl.nodes, "orchestrator"))
	if err != nil {
		t.Fatal(err)
	}

	// A conversation's responses, made as they are sent: each conversation goes on
	// until every kill is over and it sent perConv.
	plan := func(ci, ri int) chaosResponse {
		conv := fmt.Sprintf("chaos-%d", ci)
		r := chaosResponse{id: fmt.Sprintf("%s-r%03d", conv, ri), conv: conv, streamed: ri%2 == 0}
		for w := range 1 + ri%3 {
			r.writes = append(r.writes, fmt.Sprintf("r%03d-w%d", ri, w))
		}
		return r
	}
	plans := make([][]chaosResponse, conversations)

	// The killer shuts down the leader of each victim in turn, once a share of the
	// responses is answered, and starts it again.
	var answered atomic.Int32
	next := make(chan struct{}, len(victims))
	killed := make(chan string, len(victims))
	var killer sync.WaitGroup
	killsOver := make(chan struct{})
	killer.Add(1)
	go func() {
		defer killer.Done()
		defer close(killsOver)
		for _, stream := range victims {
			select {
			case <-next:
			case <-runCtx.Done():
				return
			}
			i := cl.leaderOf(stream)
			if i < 0 {
				i = len(cl.nodes) - 1
			}
			cl.kill(i)
			killed <- fmt.Sprintf("%s (leader of %s)", cl.opts[i].ServerName, stream)
			time.Sleep(time.Second)
			cl.start(i)
			// A bound on a hang: a replica of a busy key-value stream catches up by
			// replaying what it missed, which the race detector on a busy machine slows
			// (the gather bucket's took over a minute beside a suite).
			caughtUp := time.Now()
			cctx, cancel := context.WithTimeout(runCtx, 3*time.Minute)
			err := cl.current(cctx, ajs, messages.StreamChunks, messages.StreamResponses, messages.StreamCalls, messages.StreamResults,
				messages.StreamOutput, "KV_"+messages.BucketGather, "KV_"+messages.BucketCalls)
			cancel()
			if err != nil {
				t.Errorf("after restarting %s: %v", cl.opts[i].ServerName, err)
				return
			}
			t.Logf("%s current again %v after its restart", cl.opts[i].ServerName, time.Since(caughtUp).Round(time.Millisecond))
		}
	}()
	every := max(total/(len(victims)+1), 1)

	outs := map[string]*messages.Output{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for ci := range plans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ri := 0; ; ri++ { // a conversation's responses one after another
				if ri >= perConv {
					select {
					case <-killsOver:
						return
					default:
					}
				}
				r := plan(ci, ri)
				out, err := chaosAnswer(runCtx, c, r)
				if err != nil {
					t.Errorf("%s: %v", r.id, err)
					return
				}
				mu.Lock()
				outs[r.id] = out
				plans[ci] = append(plans[ci], r)
				mu.Unlock()
				if n := answered.Add(1); int(n)%every == 0 {
					select {
					case next <- struct{}{}:
					default:
					}
				}
			}
		}()
	}
	wg.Wait()
	stop2 := time.Now()
	close(next)
	killer.Wait()
	close(killed)
	var kills []string
	for k := range killed {
		kills = append(kills, k)
	}
	total = int(answered.Load())
	t.Logf("%d responses (half streamed) answered in %v; shut down and restarted %s", total, stop2.Sub(start).Round(time.Millisecond), strings.Join(kills, ", "))
	if len(kills) == 0 {
		t.Error("no node was shut down")
	}
	if t.Failed() {
		return
	}

	// Every call answered, in order; every write ran once, in the order written.
	for ci, rs := range plans {
		var want []string
		for _, r := range rs {
			want = append(want, r.writes...)
			out := outs[r.id]
			if out.Kind != messages.KindToolResults || len(out.Results) != len(r.writes) {
				t.Errorf("%s: output of kind %s with %d results, want %d: %s", r.id, out.Kind, len(out.Results), len(r.writes), out.Text)
				continue
			}
			for i, res := range out.Results {
				if !res.Success || res.Tool != "note_write" || !strings.Contains(string(res.Result), fmt.Sprintf("%q]", r.writes[i])) {
					t.Errorf("%s call %d: %s %+v %s, want the journal ending with %s", r.id, i, res.Tool, res.Error, res.Result, r.writes[i])
				}
			}
		}
		j.mu.Lock()
		got := slices.Clone(j.entries[fmt.Sprintf("chaos-%d", ci)])
		j.mu.Unlock()
		if !slices.Equal(got, want) {
			t.Errorf("chaos-%d: the writes ran as\n%v\nwant (each once, in the order written)\n%v", ci, got, want)
		}
	}

	// The checks have time of their own: the responses may have used most of runCtx's.
	checkCtx, checked := context.WithTimeout(context.Background(), 2*time.Minute)
	defer checked()

	// Exactly one output per response in the output stream.
	counts := map[string]int{}
	cons, err := ajs.OrderedConsumer(checkCtx, messages.StreamOutput, jetstream.OrderedConsumerConfig{FilterSubjects: []string{messages.AllOutputs}})
	if err != nil {
		t.Fatal(err)
	}
	for seen := 0; checkCtx.Err() == nil; {
		batch, err := cons.Fetch(256, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Logf("reading the output stream: %v (trying again)", err)
			continue
		}
		got := 0
		for m := range batch.Messages() {
			counts[m.Headers().Get(messages.HeaderResponseID)]++
			got++
		}
		seen += got
		if got == 0 && seen >= total {
			break
		}
	}
	for _, rs := range plans {
		for _, r := range rs {
			if counts[r.id] != 1 {
				t.Errorf("%s has %d outputs in the output stream, want 1", r.id, counts[r.id])
			}
		}
	}
	if len(counts) != total {
		t.Errorf("outputs of %d responses, want %d", len(counts), total)
	}

	// Answered responses leave only their marks in the gather bucket (their keys go
	// once the output is stored, which a redelivery finishes when a kill cut it short).
	t.Logf("the output stream holds one output per response (read by %v)", time.Since(stop2).Round(time.Millisecond))
	gather, err := ajs.KeyValue(checkCtx, messages.BucketGather)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	var listErr error
	for {
		lctx, cancel := context.WithTimeout(checkCtx, 15*time.Second)
		keys, err := gather.ListKeys(lctx)
		if err == nil {
			var now []string
			for k := range keys.Keys() {
				if strings.HasPrefix(k, "chaos-") && strings.Contains(k, ".") {
					now = append(now, k)
				}
			}
			left, listErr = now, nil
		} else {
			listErr = err
		}
		cancel()
		if err == nil && len(left) == 0 {
			break
		}
		if checkCtx.Err() != nil {
			var what []string
			for _, k := range left[:min(len(left), 5)] {
				gctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				e, err := gather.Get(gctx, k)
				cancel()
				if err != nil {
					what = append(what, fmt.Sprintf("%s: %v", k, err))
					continue
				}
				v := string(e.Value())
				what = append(what, fmt.Sprintf("%s (revision %d, %s): %.300s", k, e.Revision(), e.Created().Format(time.RFC3339Nano), v))
			}
			t.Errorf("the gather bucket still holds %d keys of answered responses (last listing error: %v): %v\n%s",
				len(left), listErr, left[:min(len(left), 20)], strings.Join(what, "\n"))
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// chaosAnswer gets the output of one response through node failures: asked whole or
// streamed chunk by chunk, and when the output was missed while the client reconnected,
// read from the output stream (the response id makes a repeated submit a no-op).
func chaosAnswer(ctx context.Context, c *client.Client, r chaosResponse) (*messages.Output, error) {
	if !r.streamed {
		return answer(ctx, c, clusterResponse{id: r.id, conv: r.conv, text: r.text()}, new(atomic.Int32))
	}
	s, err := c.Stream(ctx, r.conv, &client.StreamOptions{SubmitOptions: client.SubmitOptions{ResponseID: r.id}})
	if err != nil {
		return nil, err
	}
	text := r.text()
	for i := 0; i < len(text); i += 6 {
		if _, err := s.WriteString(text[i:min(i+6, len(text))]); err != nil {
			return nil, err
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	out, err := s.Close(cctx)
	cancel()
	for err != nil && ctx.Err() == nil {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		var werr error
		out, werr = c.Wait(wctx, r.conv, r.id)
		cancel()
		err = errors.Join(err, werr)
		if werr == nil {
			err = nil
		}
	}
	return out, err
}
