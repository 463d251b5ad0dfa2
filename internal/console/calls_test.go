package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/internal/console"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/catalog"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/redact"
)

// publishOutput stores an output as the formatter does (messages.AppendOutput on the
// conversation's output subject), its calls' results written in its text.
func publishOutput(ctx context.Context, js jetstream.JetStream, conv, id string, results ...messages.ToolResult) (jetstream.PubAckFuture, error) {
	o := messages.Output{ResponseID: id, Conversation: conv, Kind: messages.KindToolResults}
	for _, r := range results {
		o.Text += messages.Block(r)
		o.Results = append(o.Results, messages.OutputResult{Tool: r.Tool, Success: r.Success, Error: r.Error, Attempts: 1, DurationMS: r.DurationMS, ArgumentsBytes: 2})
	}
	return js.PublishAsync(messages.OutputSubject(conv), messages.AppendOutput(nil, &o), jetstream.WithMsgID(id))
}

func okResult(tool string, ms float64) messages.ToolResult {
	return messages.ToolResult{Tool: tool, Success: true, Result: json.RawMessage(`{"time":"now"}`), DurationMS: ms}
}

func failedResult(tool string, code messages.ErrorCode, msg string) messages.ToolResult {
	return messages.ToolResult{Tool: tool}.Fail(messages.Errorf(code, "%s", msg))
}

// outputs fills an output stream: a conversation with a failed call, then 1,100 newer
// outputs of other conversations (every tenth call failed, durations 1 to 100 ms), and
// the catalog that says the tools' servers. It returns the time between the two.
func outputs(t *testing.T, ctx context.Context, js jetstream.JetStream) time.Time {
	t.Helper()
	if err := bus.Provision(ctx, js, bus.Topology{}); err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, messages.BucketCatalog)
	if err != nil {
		t.Fatal(err)
	}
	tools, _ := json.Marshal([]catalog.Tool{{Name: "clock"}})
	if _, err := kv.Put(ctx, "local", tools); err != nil {
		t.Fatal(err)
	}
	tools, _ = json.Marshal([]catalog.Tool{{Name: "spy__echo", Remote: "echo"}})
	if _, err := kv.Put(ctx, "spy", tools); err != nil {
		t.Fatal(err)
	}
	if _, err := publishOutput(ctx, js, "old-1", "old-1-r1", okResult("clock", 3),
		failedResult("spy::echo", messages.CodeServerUnavailable, "spy went away: connection refused")); err != nil {
		t.Fatal(err)
	}
	<-js.PublishAsyncComplete()
	time.Sleep(20 * time.Millisecond)
	mid := time.Now()
	time.Sleep(20 * time.Millisecond)
	for i := range 1100 {
		r := okResult("clock", float64(i%100+1))
		if i%10 == 0 {
			r = failedResult("clock", messages.CodeServerUnavailable, "down")
			r.DurationMS = float64(i%100 + 1)
		}
		if _, err := publishOutput(ctx, js, fmt.Sprintf("busy-%d", i%37), fmt.Sprintf("busy-r%d", i), r); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	return mid
}

// The calls over everything the output stream keeps: a conversation 1,100 outputs ago
// is read through its own subject (one output read, not 1,100); a tool's calls come
// page by page, newest first, each page continuing from the last one's cursor, none
// twice; a page that the console's bound of outputs read cuts says so and continues;
// the time filters bound the outputs read; a tool's spellings are one tool of its
// server; and each tool's count, error rate and p50/p99 are stated with the number of
// outputs they come from.
func TestCallsPagesAndStats(t *testing.T) {
	_, js := bustest.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mid := outputs(t, ctx, js)
	bounded := httptest.NewServer((&console.Console{JS: js, ScanLimit: 500}).Handler(token))
	defer bounded.Close()
	whole := httptest.NewServer((&console.Console{JS: js}).Handler(token))
	defer whole.Close()

	old := get[console.CallPage](t, bounded.URL+"/api/calls?conversation=old-1")
	if len(old.Calls) != 2 || old.Scanned != 1 || old.Next != 0 || old.Notice != "" {
		t.Fatalf("the calls of old-1 under 1,100 newer outputs: %+v", old)
	}
	if c := old.Calls[0]; c.Success || c.Error == nil || !strings.Contains(c.Error.Message, "spy went away") || c.Tool != "spy__echo" || c.Server != "spy" {
		t.Errorf("old-1's failed call: %+v", c)
	}
	if c := old.Calls[1]; !c.Success || c.Tool != "clock" || c.Server != "local" {
		t.Errorf("old-1's clock call: %+v", c)
	}
	for _, q := range []string{"tool=spy__echo", "tool=mcp__spy__echo", "server=spy", "server=spy&outcome=failed&conversation=old-1"} {
		if page := get[console.CallPage](t, whole.URL+"/api/calls?"+q); len(page.Calls) != 1 || page.Calls[0].ResponseID != "old-1-r1" {
			t.Errorf("calls?%s: %+v, want old-1's failed call", q, page.Calls)
		}
	}

	// Page by page, newest first: every clock call once.
	seen, pages, cursor := map[string]bool{}, 0, uint64(0)
	last := uint64(1 << 62)
	for {
		page := get[console.CallPage](t, fmt.Sprintf("%s/api/calls?tool=clock&limit=100&cursor=%d", bounded.URL, cursor))
		pages++
		for _, c := range page.Calls {
			if seen[c.ResponseID] || c.Sequence > last {
				t.Fatalf("page %d: call %s (sequence %d) again or out of order", pages, c.ResponseID, c.Sequence)
			}
			seen[c.ResponseID], last = true, c.Sequence
		}
		if page.Next == 0 {
			break
		}
		if page.Next >= cursor && cursor != 0 || pages > 30 {
			t.Fatalf("page %d: next %d after cursor %d", pages, page.Next, cursor)
		}
		cursor = page.Next
	}
	if len(seen) != 1101 || pages != 12 {
		t.Errorf("%d clock calls in %d pages, want 1,101 in 12 pages of 100", len(seen), pages)
	}

	// The one spy call is the oldest output: the bound of 500 outputs a page cuts the
	// pages before it, and says so.
	var notices []string
	cursor = 0
	for range 5 {
		page := get[console.CallPage](t, fmt.Sprintf("%s/api/calls?tool=spy__echo&cursor=%d", bounded.URL, cursor))
		if page.Scanned > 500 {
			t.Errorf("a page read %d outputs, over the bound of 500", page.Scanned)
		}
		if page.Notice != "" {
			notices = append(notices, page.Notice)
		}
		if len(page.Calls) > 0 {
			if page.Calls[0].ResponseID != "old-1-r1" || page.Next != 0 {
				t.Errorf("the spy call: %+v", page)
			}
			break
		}
		if page.Next == 0 || page.Notice == "" || !strings.Contains(page.Notice, "500 outputs") {
			t.Fatalf("an empty page cut by the bound: %+v", page)
		}
		cursor = page.Next
	}
	if len(notices) != 2 {
		t.Errorf("notices %q, want 2 (1,101 outputs, 500 a page)", notices)
	}

	// Time: until the middle holds old-1's output only; since the middle, not it.
	until := url.QueryEscape(mid.Format(time.RFC3339Nano))
	if page := get[console.CallPage](t, bounded.URL+"/api/calls?until="+until); len(page.Calls) != 2 || page.Scanned != 1 || page.Calls[0].Conversation != "old-1" {
		t.Errorf("calls until %s: %+v", mid, page)
	}
	if page := get[console.CallPage](t, whole.URL+"/api/calls?since="+until+"&conversation=old-1"); len(page.Calls) != 0 || page.Scanned != 0 || page.Next != 0 {
		t.Errorf("old-1's calls since %s: %+v", mid, page)
	}

	// Statistics over the last hour: every output read, then only the newest 500.
	st := get[console.Stats](t, whole.URL+"/api/stats?since=1h")
	if st.Outputs != 1101 || st.Notice != "" || len(st.Tools) != 2 {
		t.Fatalf("stats: %+v", st)
	}
	clock, spy := st.Tools[0], st.Tools[1]
	if clock.Tool != "clock" || clock.Server != "local" || clock.Calls != 1101 || clock.Failed != 110 || clock.Ran != 1101 || clock.P50ms < 45 || clock.P50ms > 55 || clock.P99ms < 98 {
		t.Errorf("clock: %+v", clock)
	}
	if spy.Tool != "spy__echo" || spy.Server != "spy" || spy.Calls != 1 || spy.ErrorRate != 1 {
		t.Errorf("spy: %+v", spy)
	}
	st = get[console.Stats](t, bounded.URL+"/api/stats?since=1h")
	if st.Outputs != 500 || !strings.Contains(st.Notice, "newest 500 outputs") || st.Tools[0].Calls != 500 {
		t.Errorf("bounded stats: %+v", st)
	}
	if st := get[console.Stats](t, whole.URL+"/api/stats?conversation=old-1&since=1h"); st.Outputs != 1 || len(st.Tools) != 2 {
		t.Errorf("old-1's stats: %+v", st)
	}

	for _, q := range []string{"outcome=maybe", "since=yesterday", "cursor=x", "conversation=a+b", "limit=0", "tenant=globex"} {
		req, _ := http.NewRequest("GET", whole.URL+"/api/calls?"+q, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("calls?%s: %s %s, want 400", q, resp.Status, body)
		}
	}
}

// A secret the preview's cut falls in is masked, not shown up to the cut; so is one in
// a tool name a model wrote.
func TestCallPreviewMasksASecretItCuts(t *testing.T) {
	_, js := bustest.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := bus.Provision(ctx, js, bus.Topology{}); err != nil {
		t.Fatal(err)
	}
	const secret = "sk-live-SECRETZ9q8w7e6r5t4"
	for i, at := range []int{0, 280, 290, 299} { // where the secret starts in the result
		value, _ := json.Marshal(strings.Repeat("x", at) + secret + strings.Repeat("y", 400))
		r := okResult("clock", 1)
		r.Result = value[:len(value):len(value)]
		conv := fmt.Sprintf("leak-%d", i)
		o := messages.Output{ResponseID: conv + "-r", Conversation: conv, Kind: messages.KindToolResults, Text: messages.Block(r),
			Results: []messages.OutputResult{{Tool: "clock", Success: true, Result: r.Result, Attempts: 1}}}
		if _, err := js.Publish(ctx, messages.OutputSubject(conv), messages.AppendOutput(nil, &o)); err != nil {
			t.Fatal(err)
		}
	}
	// A tool name the model wrote with the secret in it (no catalog knows it).
	named := failedResult("nosuch_"+secret, messages.CodeUnknownTool, "no such tool")
	o := messages.Output{ResponseID: "leak-name-r", Conversation: "leak-name", Kind: messages.KindToolResults, Text: messages.Block(named),
		Results: []messages.OutputResult{{Tool: named.Tool, Error: named.Error, Attempts: 1}}}
	if _, err := js.Publish(ctx, messages.OutputSubject("leak-name"), messages.AppendOutput(nil, &o)); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer((&console.Console{JS: js, Redact: redact.New(secret)}).Handler(token))
	defer srv.Close()
	if page := get[console.CallPage](t, srv.URL+"/api/calls?conversation=leak-name"); len(page.Calls) != 1 || page.Calls[0].Tool != "nosuch_"+redact.Mask {
		t.Errorf("a tool name holding the secret is shown as %+v", page.Calls)
	}
	for i := range 4 {
		page := get[console.CallPage](t, fmt.Sprintf("%s/api/calls?conversation=leak-%d", srv.URL, i))
		if len(page.Calls) != 1 {
			t.Fatalf("leak-%d: %d calls", i, len(page.Calls))
		}
		p := page.Calls[0].Preview
		if strings.Contains(p, secret[:8]) || len(p) > 300 || !strings.HasPrefix(p, `"x`) && i > 0 {
			t.Errorf("leak-%d: preview %q shows the secret, or is not the result's start", i, p)
		}
	}
}
