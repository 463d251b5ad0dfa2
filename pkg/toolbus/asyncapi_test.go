package toolbus_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolbus/toolbus/internal/asyncapitest"
	"github.com/toolbus/toolbus/internal/mcptest"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolbus"
)

// wireLog keeps every message seen on the subjects it listens to, in the order the
// connection read them.
type wireLog struct {
	mu   sync.Mutex
	msgs []*nats.Msg
	// replies are the reply subjects of the requests seen, by the channel of their
	// answers.
	replies map[string]string
}

func (l *wireLog) all() []*nats.Msg {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*nats.Msg(nil), l.msgs...)
}

// until waits for a message for which ok holds.
func (l *wireLog) until(t *testing.T, ctx context.Context, what string, ok func(*nats.Msg) bool) *nats.Msg {
	t.Helper()
	for {
		for _, m := range l.all() {
			if ok(m) {
				return m
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no %s seen on the wire", what)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Every message a running toolbus publishes and receives while it answers a whole
// response with calls, a dependent call, a failing call, a streamed response with
// progress, a result too large to travel inline, a response without headers, a chunk
// that cannot be routed, a server's question to the orchestrator, and probes an MCP
// server, fits docs/asyncapi.yaml: each is
// captured with a core NATS subscription and checked against the channel of its
// subject. A message on a subject the document has no channel for fails too.
func TestMessagesOnTheWireFitTheDocument(t *testing.T) {
	t.Parallel()
	doc := asyncapitest.Load(t)

	// An MCP server over streamable HTTP that asks the user a question mid-call, which
	// toolbus puts to the orchestrator; healthd probes it through the executor.
	booking := mcptest.BookingServer(t)

	const bigBytes = 1_200_000
	local := localtools.New()
	local.Add(localtools.Tool{Info: messages.ToolInfo{Name: "lookup_order", ReadOnly: true},
		Run: func(_ context.Context, args json.RawMessage) (json.RawMessage, error) {
			var in struct {
				ID string `json:"id"`
			}
			_ = json.Unmarshal(args, &in)
			return json.Marshal(map[string]string{"id": in.ID, "status": "packed", "warehouse": "W-" + in.ID})
		}})
	local.Add(localtools.Tool{Info: messages.ToolInfo{Name: "ship_order"},
		Run: func(_ context.Context, args json.RawMessage) (json.RawMessage, error) {
			var in struct {
				Warehouse string `json:"warehouse"`
			}
			if json.Unmarshal(args, &in) != nil || !strings.HasPrefix(in.Warehouse, "W-") {
				return nil, messages.Errorf(messages.CodeInvalidArguments, "ship_order needs the warehouse lookup_order gave")
			}
			return json.Marshal(map[string]string{"shipped_from": in.Warehouse})
		}})
	local.Add(localtools.Tool{Info: messages.ToolInfo{Name: "cancel_order"},
		Run: func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return nil, messages.Errorf(messages.CodeToolError, "the order has shipped and cannot be cancelled")
		}})
	local.Add(localtools.Tool{Info: messages.ToolInfo{Name: "big_report", ReadOnly: true},
		Run: func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return json.Marshal(strings.Repeat("r", bigBytes))
		}})
	cfg := mcpConfig(t, fmt.Sprintf(`{"health": {"interval": "200ms"}, "mcpServers": {"booking": {"type": "http", "url": %q, "elicitation": "ask"}}}`, booking))

	url := bustest.Server(t)
	connect := func(name string) *nats.Conn {
		nc, _ := bustest.Connect(t, url, nats.Name(name))
		return nc
	}

	// The wire, from before anything runs: toolbus's subjects, the health bucket, and
	// the inboxes of requests' replies (_INBOX.<id>.<token>), where only the answers to
	// requests seen on toolbus's subjects are kept. Not _INBOX.>: that takes the
	// messages the server sends a stage's pull consumer as it closes its prefetch
	// (docs/operations.md, "Watching the wire"), which then wait out AckWait.
	watcher := connect("watcher")
	wire := &wireLog{replies: map[string]string{}}
	ch := make(chan *nats.Msg, 1<<16)
	var subs []*nats.Subscription
	for _, subject := range []string{"toolbus.>", "$KV." + messages.BucketHealth + ".>", "_INBOX.*.*"} {
		sub, err := watcher.ChanSubscribe(subject, ch)
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, sub)
	}
	if err := watcher.Flush(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m := range ch {
			wire.mu.Lock()
			// What comes through the inbox subscription is kept only when it answers a
			// request seen; consumers deliver there too, with their stream's subjects.
			if m.Sub.Subject == "_INBOX.*.*" {
				if _, ok := wire.replies[m.Subject]; ok {
					wire.msgs = append(wire.msgs, m)
				}
			} else {
				if m.Reply != "" && strings.HasPrefix(m.Subject, "toolbus.probe.") {
					wire.replies[m.Reply] = "probeReply"
				}
				wire.msgs = append(wire.msgs, m)
			}
			wire.mu.Unlock()
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nctx, stop := context.WithCancel(context.Background())
	n, err := toolbus.Start(nctx, toolbus.Options{Provision: true, Conn: connect("node"), Config: cfg, Tools: local})
	if err != nil {
		stop()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop()
		if err := n.Wait(); err != nil {
			t.Errorf("services: %v", err)
		}
	})
	onc := connect("orchestrator")
	c, err := client.New(onc)
	if err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	phase := func(what string) { t.Logf("%s done after %v", what, time.Since(start).Round(time.Millisecond)) }
	// A whole response of two calls, the second waiting for the first; then the next
	// turn's call, with what the first answered.
	out, err := c.Ask(ctx, "c1", `Let me look.
<tool_call>{"name": "lookup_order", "arguments": {"id": "42"}}</tool_call>
<tool_call>{"name": "ship_order", "arguments": {"warehouse": "W-42"}}</tool_call>`,
		&client.SubmitOptions{Reasoning: "tagged", Deadline: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Results) != 2 || !out.Results[0].Success || !out.Results[1].Success {
		t.Fatalf("first response: %+v", out)
	}
	var looked struct{ Warehouse string }
	if err := json.Unmarshal(out.Results[0].Result, &looked); err != nil {
		t.Fatal(err)
	}
	out, err = c.Ask(ctx, "c1", fmt.Sprintf(`<tool_call>{"name": "ship_order", "arguments": {"warehouse": %q}}</tool_call>`, looked.Warehouse), nil)
	if err != nil || !out.Results[0].Success {
		t.Fatalf("dependent call: %+v, %v", out, err)
	}

	phase("whole and dependent")
	// Failures of every origin: the tool's, an unknown tool, a block nobody can read.
	out, err = c.Ask(ctx, "c2", `<tool_call>{"name": "cancel_order", "arguments": {"id": "42"}}</tool_call>
<tool_call>{"name": "launch_rocket", "arguments": {}}</tool_call>
<tool_call>{"name": "lookup_order" "arguments" {{{ ]]]</tool_call>`, nil)
	if err != nil {
		t.Fatal(err)
	}
	var codes []messages.ErrorCode
	for _, r := range out.Results {
		if r.Error != nil {
			codes = append(codes, r.Error.Code)
		}
	}
	if fmt.Sprint(codes) != fmt.Sprint([]messages.ErrorCode{messages.CodeToolError, messages.CodeUnknownTool, messages.CodeParseError}) {
		t.Fatalf("failures answered %v: %+v", codes, out.Results)
	}

	// No call.
	if out, err = c.Ask(ctx, "c2", "Nothing to call.", nil); err != nil || out.Kind != messages.KindNoToolCall {
		t.Fatalf("no call: %+v, %v", out, err)
	}

	// A result too large to travel inline, kept whole and fetched back.
	out, err = c.Ask(ctx, "c3", `<tool_call>{"name": "big_report", "arguments": {}}</tool_call>`, nil)
	if err != nil || len(out.Results) != 1 || out.Results[0].Stored == nil {
		t.Fatalf("large result: %+v, %v", out, err)
	}
	whole, err := c.FetchResult(ctx, out.Results[0].Stored)
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(whole); len(whole) != bigBytes+2 || hex.EncodeToString(sum[:]) != out.Results[0].Stored.SHA256 {
		t.Fatalf("fetched %d bytes, want %d with the output's sha256", len(whole), bigBytes+2)
	}

	phase("large")
	// A streamed response, chunk by chunk, with progress.
	var progress []messages.ToolResult
	var pmu sync.Mutex
	s, err := c.Stream(ctx, "c4", &client.StreamOptions{SubmitOptions: client.SubmitOptions{Reasoning: "tagged"},
		Progress: func(r messages.ToolResult) { pmu.Lock(); progress = append(progress, r); pmu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	for _, chunk := range client.SplitTokens(`First <tool_call>{"name": "lookup_order", "arguments": {"id": "7"}}</tool_call> then
<tool_call>{"name": "ship_order", "arguments": {"warehouse": "W-7"}}</tool_call> and <tool_call>{"name": "big_report", "arguments": {}}</tool_call> done.`) {
		if _, err := s.WriteString(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if out, err = s.Close(ctx); err != nil || len(out.Results) != 3 {
		t.Fatalf("streamed: %+v, %v", out, err)
	}

	phase("streamed")
	// A response as `nats pub` sends one, without headers.
	if err := onc.Publish(messages.ResponseSubject("c5"), []byte(`<tool_call>{"name": "lookup_order", "arguments": {"id": "9"}}</tool_call>`)); err != nil {
		t.Fatal(err)
	}
	wire.until(t, ctx, "output of c5", func(m *nats.Msg) bool { return m.Subject == messages.OutputSubject("c5") })

	// A chunk that names no response: rejected, and kept as a dead letter.
	if err := onc.Publish(messages.StreamSubject("c6"), []byte("lost")); err != nil {
		t.Fatal(err)
	}
	wire.until(t, ctx, "rejection", func(m *nats.Msg) bool { return strings.HasPrefix(m.Subject, "toolbus.rejected.") })
	wire.until(t, ctx, "dead letter", func(m *nats.Msg) bool { return strings.HasPrefix(m.Subject, "toolbus.dead.") })

	phase("rejected")
	// A server's question, answered by the orchestrator. The executor lists the server's
	// tools as it starts: until then the tool is unknown.
	asks, err := c.OnElicit("c7", func(context.Context, messages.ElicitRequest) messages.ElicitResponse {
		return messages.ElicitResponse{Action: "accept", Content: map[string]any{"seat": "12A"}}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer asks.Unsubscribe()
	for {
		out, err = c.Ask(ctx, "c7", `<tool_call>{"name": "booking__book", "arguments": {}}</tool_call>`, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r := out.Results[0]; r.Error == nil || r.Error.Code != messages.CodeUnknownTool {
			if !r.Success || !bytes.Contains(r.Result, []byte(`"12A"`)) {
				t.Fatalf("booking: %+v", r)
			}
			break
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The MCP server's health, through an executor's session.
	wire.until(t, ctx, "health of booking", func(m *nats.Msg) bool {
		return m.Subject == messages.HealthSubject("booking") && bytes.Contains(m.Data, []byte(`"state":"up"`))
	})
	wire.until(t, ctx, "a probe answer", func(m *nats.Msg) bool { return strings.HasPrefix(m.Subject, "_INBOX.") })
	// Each of the streamed response's results reached the client as progress (its own
	// subscription: they may come after the output did).
	for {
		pmu.Lock()
		n := len(progress)
		pmu.Unlock()
		if n == 3 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("%d progress messages reached the client, want 3", n)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Everything the watcher's connection has read by now is in the log.
	if err := watcher.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, sub := range subs {
		if err := sub.Unsubscribe(); err != nil {
			t.Fatal(err)
		}
	}
	close(ch)
	<-done
	seen := map[string]int{}
	for _, m := range wire.all() {
		var c *asyncapitest.Channel
		if id, ok := wire.replies[m.Subject]; ok {
			c = doc.ChannelByID(id)
		} else {
			c = doc.Channel(m.Subject)
		}
		if m.Subject == "$KV."+messages.BucketHealth+"."+messages.HealthLeaderKey {
			seen["healthd lease"]++ // the key the document names as no status
			continue
		}
		if m.Subject == messages.StreamSubject("c6") {
			// The chunk without a response id this test sent: the document must refuse it.
			if c.Check(m.Header, m.Data) == nil {
				t.Errorf("%s: a chunk without a response id fits the document", m.Subject)
			}
			seen["refused chunk"]++
			continue
		}
		if c == nil {
			t.Errorf("%s (sub %s): a message on a subject %s has no channel for:\n%v\n%.200s", m.Subject, m.Sub.Subject, asyncapitest.Path, m.Header, m.Data)
			continue
		}
		if err := c.Check(m.Header, m.Data); err != nil {
			t.Errorf("%s: %v", m.Subject, err)
			continue
		}
		if seen[c.ID] == 0 {
			t.Logf("channel %s: first seen on %s", c.ID, m.Subject)
		}
		seen[c.ID]++
		if c.ID == "output" {
			if err := doc.CheckOutputText(t, m.Data); err != nil {
				t.Errorf("%s: %v", m.Subject, err)
			}
		}
	}
	var kinds []string
	for k, n := range seen {
		kinds = append(kinds, fmt.Sprintf("%s: %d", k, n))
	}
	sort.Strings(kinds)
	t.Logf("messages checked: %s", strings.Join(kinds, ", "))
	for _, want := range []string{"responses", "stream", "calls", "results", "output", "progress", "rejected", "dead", "health", "healthBucket", "probe", "probeReply", "elicit", "answers"} {
		if seen[want] == 0 {
			t.Errorf("no message seen on channel %s: the run no longer exercises it", want)
		}
	}
}
