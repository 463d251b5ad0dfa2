package toolbus_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/toolbus/toolbus/internal/asyncapitest"
	"github.com/toolbus/toolbus/pkg/messages"
)

// What an MCP server reports of a call under way (server-everything's
// trigger-long-running-operation over stdio and over streamable HTTP:
// notifications/progress at each step) reaches the
// orchestrator on the conversation's progress subject, marked with the call's id, while
// the call runs; each message fits the protocol's document. A streamed response's
// client does not take them for results.
func TestCallProgressReachesTheOrchestrator(t *testing.T) {
	t.Parallel()
	everything := mcpNPMScript(t, mcpEverythingPkg)
	_, httpURL := mcpStartEverything(t, "streamableHttp", 0)
	p := startMCPPipeline(t, mcpConfig(t, `{"mcpServers": {
		"everything": {"command": "node", "args": ["`+everything+`"], "sessions": "shared"},
		"everything_http": {"type": "http", "url": "`+httpURL+`/mcp"}}}`), nil)
	doc := asyncapitest.Load(t)
	for _, tc := range []struct{ transport, server string }{{"stdio", "everything"}, {"http", "everything_http"}} {
		t.Run(tc.transport, func(t *testing.T) { callProgress(t, p, doc, tc.server, "slow-"+tc.transport) })
	}
}

func callProgress(t *testing.T, p *mcpPipeline, doc *asyncapitest.Document, server, conv string) {

	var mu sync.Mutex
	var got []messages.CallProgress
	var before time.Time // when the first report came
	sub, err := p.client.OnCallProgress(conv, func(cp messages.CallProgress) {
		mu.Lock()
		defer mu.Unlock()
		if len(got) == 0 {
			before = time.Now()
		}
		got = append(got, cp)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	// Every message on the subject, as the wire carries it.
	raw := make(chan *nats.Msg, 64)
	rawSub, err := p.connect("watcher").ChanSubscribe(messages.ProgressSubject(conv), raw)
	if err != nil {
		t.Fatal(err)
	}
	defer rawSub.Unsubscribe()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := p.client.Ask(ctx, conv, `<tool_call>{"name": "`+server+`__trigger-long-running-operation", "arguments": {"duration": 1.5, "steps": 3}}</tool_call>`, nil)
	answered := time.Now()
	if err != nil || len(out.Results) != 1 || !out.Results[0].Success {
		t.Fatalf("%v %+v", err, out)
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= 3 {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 {
		t.Fatalf("%d progress reports, want 3: %+v (output %s)", len(got), got, out.Text)
	}
	for i, cp := range got {
		if cp.CallID != messages.CallID(conv, out.ResponseID, 0) || cp.Conversation != conv || cp.Server != server ||
			cp.Tool != server+"__trigger-long-running-operation" || cp.Progress != float64(i+1) || cp.Total != 3 {
			t.Errorf("report %d: %+v", i, cp)
		}
	}
	if !before.Before(answered) {
		t.Errorf("the first report came at %v, after the answer (%v): not while the call ran", before, answered)
	}
	for len(raw) > 0 {
		m := <-raw
		if err := doc.Check(m.Subject, m.Header, m.Data); err != nil {
			t.Error(err)
		}
	}
}
