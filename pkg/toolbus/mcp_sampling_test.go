package toolbus_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/toolbus/toolbus/internal/asyncapitest"
	"github.com/toolbus/toolbus/pkg/messages"
)

// A server's sampling request in the middle of a call (server-everything's
// trigger-sampling-request, over stdio and streamable HTTP, its servers configured with
// "sampling": "ask") reaches the conversation's orchestrator on toolbus.sample.<conv>,
// which answers it through pkg/client with a completion; the server's result holds the
// completion. What the servers log while the calls run (toggle-simulated-logging, then
// a long-running operation) reaches the orchestrator on the progress subject with the
// call's id. Every message on those subjects fits the protocol's document.
func TestSamplingAndLogsReachTheOrchestrator(t *testing.T) {
	t.Parallel()
	everything := mcpNPMScript(t, mcpEverythingPkg)
	_, httpURL := mcpStartEverything(t, "streamableHttp", 0)
	p := startMCPPipeline(t, mcpConfig(t, `{"mcpServers": {
		"everything": {"command": "node", "args": ["`+everything+`", "stdio"], "sampling": "ask"},
		"everything_http": {"type": "http", "url": "`+httpURL+`/mcp", "sampling": "ask"}}}`), nil)
	doc := asyncapitest.Load(t)
	const conv = "sampled"
	raw := make(chan *nats.Msg, 256)
	watcher := p.connect("watcher")
	for _, subject := range []string{messages.SampleSubject(conv), messages.ProgressSubject(conv), messages.AnswerSubject(conv, "*")} {
		sub, err := watcher.ChanSubscribe(subject, raw)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
	}

	var mu sync.Mutex
	var asked []messages.SampleRequest
	var logs []messages.CallLog
	sub, err := p.client.OnSample(conv, func(_ context.Context, req messages.SampleRequest) messages.SampleResponse {
		mu.Lock()
		asked = append(asked, req)
		mu.Unlock()
		return messages.SampleResponse{Model: "test-model", StopReason: "endTurn", Content: json.RawMessage(`{"type": "text", "text": "the answer is 42"}`)}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	lsub, err := p.client.OnCallLog(conv, func(l messages.CallLog) {
		mu.Lock()
		logs = append(logs, l)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer lsub.Unsubscribe()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := p.client.Ask(ctx, conv, `<tool_call>{"name": "everything__trigger-sampling-request", "arguments": {"prompt": "what is 6 times 7?", "maxTokens": 20}}</tool_call>
<tool_call>{"name": "everything_http__trigger-sampling-request", "arguments": {"prompt": "and over http?", "maxTokens": 30}}</tool_call>
<tool_call>{"name": "everything__toggle-simulated-logging", "arguments": {}}</tool_call>
<tool_call>{"name": "everything_http__toggle-simulated-logging", "arguments": {}}</tool_call>
<tool_call>{"name": "everything__trigger-long-running-operation", "arguments": {"duration": 11, "steps": 2}}</tool_call>
<tool_call>{"name": "everything_http__trigger-long-running-operation", "arguments": {"duration": 11, "steps": 2}}</tool_call>`, nil)
	if err != nil || len(out.Results) != 6 {
		t.Fatalf("%v %+v", err, out)
	}
	for i := range 2 {
		mcpOK(t, out.Results[i], "the answer is 42", "test-model")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 2 {
		t.Fatalf("%d sampling requests reached the orchestrator, want 2: %+v", len(asked), asked)
	}
	for _, req := range asked {
		if req.Conversation != conv || (req.Server != "everything" && req.Server != "everything_http") || req.MaxTokens < 20 ||
			!strings.Contains(string(req.Messages), "times 7") && !strings.Contains(string(req.Messages), "over http") || req.Deadline.IsZero() {
			t.Errorf("sampling request %+v", req)
		}
	}
	// A log line came during the calls of each server, marked with a call of its.
	byServer := map[string]int{}
	for _, l := range logs {
		if l.Conversation != conv || !strings.HasPrefix(l.CallID, conv+"/"+out.ResponseID+"/") || !strings.Contains(string(l.Data), "message") {
			t.Errorf("log %+v", l)
		}
		byServer[l.Server]++
	}
	if byServer["everything"] == 0 || byServer["everything_http"] == 0 {
		t.Errorf("log lines by server: %v, want some of each (%+v)", byServer, logs)
	}
	for len(raw) > 0 {
		m := <-raw
		if err := doc.Check(m.Subject, m.Header, m.Data); err != nil {
			t.Error(err)
		}
	}
}
