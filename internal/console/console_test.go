package console_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/internal/console"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolbus"
)

// token is the tests' console token.
const token = "test-token-0123456789abcdef"

// get fetches url with the token (another one when given) and decodes its JSON.
func get[T any](t *testing.T, url string, tok ...string) T {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+append(tok, token)[0])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v T
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s %s", url, resp.Status, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return v
}

// post sends body as JSON to url with the token, as the page does, and decodes the
// answer into out (when not nil).
func post(t *testing.T, url, body string, out any) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		json.NewDecoder(resp.Body).Decode(out)
	}
	return resp
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The console's API against a running pipeline: the flow, the servers healthd probed,
// the catalog with its declarations, the calls the outputs tell of (filtered), a dead
// call redriven to a new output, a response tried, the live events, and the token.
func TestConsoleAPI(t *testing.T) {
	url := bustest.Server(t)
	nc, _ := bustest.Connect(t, url)
	ctx, cancel := context.WithCancel(context.Background())
	n, err := toolbus.Start(ctx, toolbus.Options{Provision: true, Conn: nc, Config: &config.Config{}, Ops: &toolbus.OpsOptions{}} /* status replies: replicas ready, breakers */)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); n.Wait() })
	js, _ := jetstream.New(nc)
	c, _ := client.New(nc)
	con := &console.Console{NC: nc, JS: js, Client: c, JaegerURL: "http://jaeger.example:16686"}
	srv := httptest.NewServer(con.Handler(token))
	defer srv.Close()

	actx, acancel := context.WithTimeout(ctx, time.Minute)
	defer acancel()
	if _, err := c.Ask(actx, "c1", `<tool_call>{"name": "clock", "arguments": {}}</tool_call><tool_call>{"name": "no_such_tool", "arguments": {}}</tool_call>`, nil); err != nil {
		t.Fatal(err)
	}

	flow := get[console.Flow](t, srv.URL+"/api/flow")
	if len(flow.Queues) != 4 || flow.Outputs == 0 {
		t.Errorf("flow %+v", flow)
	}
	// The replicas' status replies count when they come within the console's wait (the
	// first within a second); a busy machine may miss one poll, never every one.
	eventually(t, "one replica of each stage in the flow", func() bool {
		for _, q := range get[console.Flow](t, srv.URL+"/api/flow").Queues {
			if q.Replicas != 1 || q.Ready > 1 {
				t.Logf("queue %s: %d replicas, %d ready; want 1", q.Stage, q.Replicas, q.Ready)
				return false
			}
		}
		return true
	})
	eventually(t, "healthd's status of the local tools", func() bool {
		for _, s := range get[[]console.Server](t, srv.URL+"/api/servers") {
			if s.Server == "local" && s.State == messages.HealthUp && s.Breaker == "" {
				return true
			}
		}
		return false
	})
	var clock *console.Tool
	for _, tool := range get[[]console.Tool](t, srv.URL+"/api/tools") {
		if tool.Name == "clock" {
			clock = &tool
		}
	}
	if clock == nil || len(clock.Declarations) != 3 || !strings.Contains(string(clock.Declarations["openai"]), `"clock"`) {
		t.Fatalf("tools: clock %+v", clock)
	}

	calls := get[console.CallPage](t, srv.URL+"/api/calls?conversation=c1").Calls
	if len(calls) != 2 || calls[0].Tool != "no_such_tool" || calls[1].Tool != "clock" || !calls[1].Success || calls[1].Preview == "" ||
		calls[1].ArgumentsBytes != 2 || calls[1].DurationMS <= 0 {
		t.Fatalf("calls %+v", calls)
	}
	failed := get[console.CallPage](t, srv.URL+"/api/calls?outcome=failed").Calls
	if len(failed) != 1 || failed[0].Error == nil || failed[0].TraceURL != "" && !strings.HasPrefix(failed[0].TraceURL, "http://jaeger.example:16686/trace/") {
		t.Errorf("failed calls %+v", failed)
	}

	// A dead call, as the executor files one, is sent again and answered.
	call := messages.ToolCall{ID: "c2/r9/0", ResponseID: "r9", Conversation: "c2", Count: 1, Tool: "clock", Arguments: json.RawMessage(`{}`)}
	dead, _ := json.Marshal(messages.DeadCall{Call: call, Result: messages.ResultFor(call).Fail(messages.Errorf(messages.CodeServerUnavailable, "down: https://u:hunter22@x.example/mcp"))})
	if _, err := js.Publish(actx, messages.DeadSubject("c2"), dead); err != nil {
		t.Fatal(err)
	}
	letters := get[console.DeadPage](t, srv.URL+"/api/dead").Letters
	if len(letters) != 1 || !letters[0].Redrivable || letters[0].Tool != "clock" || !strings.Contains(letters[0].Reason, "down") {
		t.Fatalf("dead letters %+v", letters)
	}
	if strings.Contains(letters[0].Reason, "hunter22") || strings.Contains(string(letters[0].Body), "hunter22") || !strings.Contains(letters[0].Reason, "REDACTED") {
		t.Errorf("a URL's password is shown: %s %s", letters[0].Reason, letters[0].Body)
	}
	var out messages.Output
	resp := post(t, srv.URL+"/api/dead/redrive", `{"seq": `+strconv.FormatUint(letters[0].Sequence, 10)+`}`, &out)
	if resp.StatusCode != 200 || len(out.Results) != 1 || !out.Results[0].Success || !strings.HasPrefix(out.ResponseID, "redrive-") {
		t.Fatalf("redrive: %s %+v", resp.Status, out)
	}
	if letters := get[console.DeadPage](t, srv.URL+"/api/dead").Letters; len(letters) != 1 || letters[0].Redrive == nil || letters[0].Redrive.ResponseID != out.ResponseID {
		t.Errorf("after the redrive: %+v", letters)
	}
	if redriven := get[console.CallPage](t, srv.URL+"/api/calls?conversation=c2").Calls; len(redriven) != 1 || redriven[0].ResponseID != out.ResponseID {
		t.Errorf("the redriven call: %+v", redriven)
	}

	// Try it.
	out = messages.Output{}
	post(t, srv.URL+"/api/try", `{"conversation": "try-1", "text": "<tool_call>{\"name\": \"clock\", \"arguments\": {}}</tool_call>"}`, &out)
	if len(out.Results) != 1 || !out.Results[0].Success || !strings.Contains(out.Text, "<tool_result>") {
		t.Errorf("try: %+v", out)
	}

	// Live: the flow as server-sent events.
	evReq, _ := http.NewRequest("GET", srv.URL+"/api/events", nil)
	evReq.Header.Set("Authorization", "Bearer "+token)
	ev, err := http.DefaultClient.Do(evReq)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(ev.Body)
	var event, data string
	for sc.Scan() && data == "" {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			event = v
		}
		if v, ok := strings.CutPrefix(line, "data: "); ok {
			data = v
		}
	}
	ev.Body.Close()
	var f console.Flow
	if event != "flow" || json.Unmarshal([]byte(data), &f) != nil || len(f.Queues) != 4 {
		t.Errorf("event %q: %s", event, data)
	}

	// The page.
	page, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(page.Body)
	page.Body.Close()
	if !strings.Contains(string(body), "<title>toolbus console</title>") {
		t.Errorf("the page: %.200s", body)
	}

	// The API only with the token, in the Authorization header; the page without it, and
	// with the token it was opened with (?token=, as toolbus prints it).
	for path, want := range map[string]int{"/api/flow": 401, "/api/flow?token=" + token: 401, "/": 200, "/?token=wrong": 401, "/?token=" + token: 200, "/app.js": 200} {
		r, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, r.StatusCode, want)
		}
	}
	for _, auth := range []string{"", "Bearer wrong", "Basic " + token, token} {
		req, _ := http.NewRequest("GET", srv.URL+"/api/flow", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != http.StatusUnauthorized || r.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("Authorization %q: %s, want 401 with WWW-Authenticate", auth, r.Status)
		}
	}
	if !console.Local("127.0.0.1:8090") || !console.Local("localhost:1") || !console.Local("[::1]:2") || console.Local(":8090") || console.Local("0.0.0.0:8090") {
		t.Error("Local")
	}
}

// With tenants, the console reads each tenant's output stream: the flow counts them all,
// the calls filter by tenant (or by a tenant's conversation), and a tenant the
// deployment does not serve is an error, not an empty list.
func TestConsoleTenants(t *testing.T) {
	url := bustest.Server(t)
	nc, _ := bustest.Connect(t, url)
	ctx, cancel := context.WithCancel(context.Background())
	cfg := &config.Config{Tenants: map[string]config.Tenant{"acme": {}}}
	n, err := toolbus.Start(ctx, toolbus.Options{Provision: true, Conn: nc, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); n.Wait() })
	js, _ := jetstream.New(nc)
	c, _ := client.New(nc)
	con := &console.Console{NC: nc, JS: js, Client: c, Tenants: []string{"acme"}}
	srv := httptest.NewServer(con.Handler(token))
	defer srv.Close()

	actx, acancel := context.WithTimeout(ctx, time.Minute)
	defer acancel()
	for _, conv := range []string{"acme.c1", "c1"} {
		if _, err := c.Ask(actx, conv, `<tool_call>{"name": "clock", "arguments": {}}</tool_call>`, nil); err != nil {
			t.Fatal(err)
		}
	}
	flow := get[console.Flow](t, srv.URL+"/api/flow")
	if flow.Outputs != 2 || len(flow.Tenants) != 1 || flow.Tenants[0] != "acme" {
		t.Errorf("flow: %d outputs, tenants %v; want 2 over both tenants' streams, and tenant acme", flow.Outputs, flow.Tenants)
	}
	for query, want := range map[string]string{"": "c1", "?tenant=acme": "acme.c1", "?conversation=acme.c1": "acme.c1", "?conversation=c1": "c1"} {
		calls := get[console.CallPage](t, srv.URL+"/api/calls"+query).Calls
		if len(calls) != 1 || calls[0].Conversation != want {
			t.Errorf("calls%s: %+v, want the one call of %s", query, calls, want)
		}
	}
	req, _ := http.NewRequest("GET", srv.URL+"/api/calls?tenant=globex", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		t.Errorf("calls of a tenant the deployment does not serve: %s, want an error", resp.Status)
	}
}
