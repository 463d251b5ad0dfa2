package frontdoor_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolbus/toolbus/internal/mcptest"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/frontdoor"
	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolbus"
)

// Tokens of the tests' two callers: the default tenant's and acme's.
const (
	defaultToken = "d3fau1t-t0ken-0f-the-test-callers"
	acmeToken    = "acme-t0ken-0f-the-test-callers-xyz"
)

// ledger is a Go tool "transfer" with a side effect: each run is recorded.
type ledger struct {
	mu   sync.Mutex
	runs []int
}

func (l *ledger) ran() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.runs)
}

// door is toolbus with its front door on streamable HTTP, an MCP server "weather" (a
// go-sdk server over HTTP), the engineering calculators and a local tool "transfer",
// under a policy: transfers above 1000 denied, above 100 held for approval; "weather"
// hidden from tenant acme; "secret_tool" denied everywhere.
type door struct {
	url    string
	ledger *ledger
	orch   *client.Client // an orchestrator's client, which decides approvals
	conn   func(string) *nats.Conn
	// replica starts another front door on the same NATS and returns its URL and what
	// kills it (its HTTP server and connections closed at once, as a process dying).
	replica func() (url string, kill func())
	started chan int // the amounts slow_transfer starts on
}

// startDoor starts it; servers are further mcpServers entries ("name": {…}, JSON).
func startDoor(t *testing.T, servers ...string) *door {
	t.Helper()
	weather := mcp.NewServer(&mcp.Implementation{Name: "weather"}, nil)
	mcp.AddTool(weather, &mcp.Tool{Name: "get_weather", Description: "the weather of a city"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		City string `json:"city"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "sunny in " + in.City}}}, nil, nil
	})
	ws := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return weather }, nil))
	t.Cleanup(ws.Close)
	cfg, err := config.Parse([]byte(fmt.Sprintf(`{
		"tenants": {"acme": {}},
		"mcpServers": {"weather": {"type": "http", "url": %q}%s},
		"policy": {"rules": [
			{"name": "weather-not-for-acme", "tools": ["weather__*"], "when": "tenant == 'acme'", "effect": "deny"},
			{"name": "no-secrets", "tools": ["secret_tool"], "effect": "deny"},
			{"name": "no-huge-transfers", "tools": ["transfer"], "when": "args.amount > 1000", "effect": "deny"},
			{"name": "big-transfers", "tools": ["transfer"], "when": "args.amount > 100", "effect": "approve", "timeout": "10m"}
		]}}`, ws.URL, extra(servers))), "test.json", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	l := &ledger{}
	reg := localtools.New()
	type amount struct {
		Amount int `json:"amount"`
	}
	if err := localtools.AddFunc(reg, messages.ToolInfo{Name: "transfer", Description: "send money"}, func(_ context.Context, a amount) (string, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.runs = append(l.runs, a.Amount)
		return fmt.Sprintf("sent %d", a.Amount), nil
	}); err != nil {
		t.Fatal(err)
	}
	started := make(chan int, 100)
	if err := localtools.AddFunc(reg, messages.ToolInfo{Name: "slow_transfer", Description: "send money, slowly"}, func(_ context.Context, a amount) (string, error) {
		started <- a.Amount
		time.Sleep(time.Second)
		l.mu.Lock()
		defer l.mu.Unlock()
		l.runs = append(l.runs, a.Amount)
		return fmt.Sprintf("sent %d slowly", a.Amount), nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := localtools.AddFunc(reg, messages.ToolInfo{Name: "secret_tool"}, func(context.Context, struct{}) (string, error) { return "secret", nil }); err != nil {
		t.Fatal(err)
	}
	natsURL := bustest.Server(t)
	conn := func(name string) *nats.Conn { nc, _ := bustest.Connect(t, natsURL, nats.Name(name)); return nc }
	ctx, cancel := context.WithCancel(context.Background())
	tb, err := toolbus.Start(ctx, toolbus.Options{Config: cfg, Tools: reg, Conn: conn("toolbus"), Provision: true, Replicas: 2}) // two of each stage: two executors
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	var replicas sync.WaitGroup
	replica := func() (string, func()) {
		d, err := frontdoor.New(conn("frontdoor"), &frontdoor.Options{Offers: toolbus.ToolOffers(cfg)})
		if err != nil {
			t.Fatal(err)
		}
		rctx, stop := context.WithCancel(ctx)
		replicas.Add(1)
		go func() { defer replicas.Done(); d.Run(rctx) }()
		hs := httptest.NewServer(d.Handler(&frontdoor.HTTPOptions{Tokens: map[string]string{
			frontdoor.HashToken(defaultToken): "", frontdoor.HashToken(acmeToken): "acme"}}))
		var once sync.Once
		kill := func() { once.Do(func() { hs.CloseClientConnections(); hs.Close(); stop() }) }
		t.Cleanup(kill)
		return hs.URL, kill
	}
	url0, _ := replica()
	t.Cleanup(func() { cancel(); replicas.Wait(); tb.Close() })
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	defer wcancel()
	if err := tb.WaitForTools(wctx); err != nil {
		t.Fatal(err)
	}
	orch, err := client.New(conn("orchestrator"))
	if err != nil {
		t.Fatal(err)
	}
	return &door{url: url0, ledger: l, orch: orch, conn: conn, replica: replica, started: started}
}

func extra(servers []string) string {
	if len(servers) == 0 {
		return ""
	}
	return ", " + strings.Join(servers, ", ")
}

// bearer adds a token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// session connects the go-sdk's client with token, waiting until tools/list holds want.
func (d *door) session(t *testing.T, token string, o *mcp.ClientOptions, want ...string) *mcp.ClientSession {
	t.Helper()
	return sessionAt(t, d.url, token, o, want...)
}

// sessionAt is session with the front door at url.
func sessionAt(t *testing.T, url, token string, o *mcp.ClientOptions, want ...string) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "test"}, o)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	for {
		names := toolNames(t, cs)
		missing := slices.DeleteFunc(slices.Clone(want), func(n string) bool { return slices.Contains(names, n) })
		if len(missing) == 0 {
			return cs
		}
		select {
		case <-ctx.Done():
			t.Fatalf("tools/list lacks %v: %v", missing, names)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	return names
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// The go-sdk's client lists the tools its tenant may see and calls a local tool, an
// engineering calculator and an MCP server's tool through the pipeline; a call the
// policy denies is an isError result with toolbus's error code, and the tool never ran.
func TestCallsThroughTheFrontDoor(t *testing.T) {
	d := startDoor(t)
	cs := d.session(t, defaultToken, nil, "transfer", "dispatch_engineering", "weather__get_weather")
	if names := toolNames(t, cs); slices.Contains(names, "secret_tool") {
		t.Errorf("a tool the policy denies everywhere is listed: %v", names)
	}

	if res := call(t, cs, "transfer", map[string]any{"amount": 5}); res.IsError || text(res) != "sent 5" {
		t.Errorf("transfer: %v %q", res.IsError, text(res))
	}
	res := call(t, cs, "dispatch_engineering", map[string]any{"domain": "geometry", "action": "activate"})
	if res.IsError || !strings.Contains(text(res), "geometry") {
		t.Errorf("engineering: %v %q", res.IsError, text(res))
	}
	if res := call(t, cs, "weather__get_weather", map[string]any{"city": "Oslo"}); res.IsError || text(res) != "sunny in Oslo" {
		t.Errorf("weather: %v %q", res.IsError, text(res))
	}

	res = call(t, cs, "transfer", map[string]any{"amount": 5000})
	if !res.IsError || res.Meta[frontdoor.MetaErrorCode] != string(messages.CodeNotAllowed) || !strings.Contains(text(res), "no-huge-transfers") {
		t.Errorf("a denied call: isError %v, meta %v, %q", res.IsError, res.Meta, text(res))
	}
	if got := d.ledger.ran(); !slices.Equal(got, []int{5}) {
		t.Errorf("transfers run: %v, want [5]", got)
	}
}

// A tenant's token sees its tenant's tools only (the policy hides weather from acme),
// and its calls run in the tenant's conversations; a wrong token, or none, gets 401.
func TestTenantTokens(t *testing.T) {
	d := startDoor(t)
	acme := d.session(t, acmeToken, nil, "transfer")
	if names := toolNames(t, acme); slices.Contains(names, "weather__get_weather") {
		t.Errorf("acme sees a tool the policy denies it: %v", names)
	}
	watch := d.conn("watcher")
	outputs, err := watch.SubscribeSync("toolbus.output.acme.>")
	if err != nil {
		t.Fatal(err)
	}
	if res := call(t, acme, "transfer", map[string]any{"amount": 7}); res.IsError || text(res) != "sent 7" {
		t.Errorf("acme's transfer: %v %q", res.IsError, text(res))
	}
	if _, err := outputs.NextMsg(10 * time.Second); err != nil {
		t.Errorf("acme's call was not answered in an acme conversation: %v", err)
	}

	for _, token := range []string{"not-a-token-of-this-door-at-all", ""} {
		req, _ := http.NewRequest(http.MethodPost, d.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || strings.Contains(string(body), token) && token != "" {
			t.Errorf("token %q: %d %s", token, resp.StatusCode, body)
		}
		if got := resp.Header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
			t.Errorf("token %q: WWW-Authenticate %q, want a Bearer challenge", token, got)
		}
	}
}

// An approval rule holds the call: the client that gave a progress token is told it
// waits for approval, and the call runs once a person approves it (pkg/client's Decide,
// as `toolbus approve` does).
func TestApprovalHoldsTheCall(t *testing.T) {
	d := startDoor(t)
	progress := make(chan string, 10)
	cs := d.session(t, defaultToken, &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
		progress <- r.Params.Message
	}}, "transfer")
	requests, err := d.conn("watcher").SubscribeSync(messages.AllApprovals)
	if err != nil {
		t.Fatal(err)
	}
	answer := make(chan *mcp.CallToolResult, 1)
	go func() {
		params := &mcp.CallToolParams{Name: "transfer", Arguments: map[string]any{"amount": 500}}
		params.SetProgressToken("p1")
		res, err := cs.CallTool(context.Background(), params)
		if err != nil {
			t.Error(err)
		}
		answer <- res
	}()
	m, err := requests.NextMsg(30 * time.Second)
	if err != nil {
		t.Fatalf("no approval asked for: %v", err)
	}
	var req messages.ApprovalRequest
	if err := json.Unmarshal(m.Data, &req); err != nil {
		t.Fatal(err)
	}
	select {
	case msg := <-progress:
		if !strings.Contains(msg, "waiting for approval") || !strings.Contains(msg, req.ID) {
			t.Errorf("progress: %q", msg)
		}
	case <-time.After(30 * time.Second):
		t.Error("no progress notification said the call waits for approval")
	}
	select {
	case res := <-answer:
		t.Fatalf("answered before anyone decided: %v %q", res.IsError, text(res))
	default:
	}
	if got := d.ledger.ran(); len(got) != 0 {
		t.Fatalf("ran before approval: %v", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := d.orch.Decide(ctx, req.ID, true, "fine", req.ArgumentsSHA256); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-answer:
		if res == nil || res.IsError || text(res) != "sent 500" {
			t.Errorf("after approval: %+v", res)
		}
	case <-time.After(time.Minute):
		t.Fatal("no answer after approval")
	}
	if got := d.ledger.ran(); !slices.Equal(got, []int{500}) {
		t.Errorf("transfers run: %v", got)
	}
}

// rpcRequest is the POST of one JSON-RPC message in session (none: "") of protocol
// version, with token.
func rpcRequest(url, session, token, version, body string) *http.Request {
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", version)
	}
	return req
}

// rpc posts one JSON-RPC message in session (none: "") and returns the answer to id
// (from JSON or an event stream) and the response's session id.
func rpc(t *testing.T, url, session, token string, body string) (json.RawMessage, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(rpcRequest(url, session, token, "2025-06-18", body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s: %d %s", body, resp.StatusCode, b)
	}
	var answer json.RawMessage
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data:"); ok && strings.Contains(data, `"result"`) || ok && strings.Contains(data, `"error"`) {
				answer = json.RawMessage(strings.TrimSpace(data))
				break
			}
		}
	} else {
		answer, _ = io.ReadAll(resp.Body)
	}
	return answer, resp.Header.Get("Mcp-Session-Id")
}

// A client's retry of a tools/call (the same session, the same request id: its
// connection broke before the answer) is answered with the first call's result and
// runs nothing again; another request id is another call, and so is another call under
// a request id used before (a client resuming the session counts its ids from 0 again):
// run, and answered with its own result.
func TestRetriedRequestRunsOnce(t *testing.T) {
	d := startDoor(t)
	d.session(t, defaultToken, nil, "transfer") // the catalog is in
	_, session := rpc(t, d.url, "", defaultToken, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if session == "" {
		t.Fatal("no session id")
	}
	rpc(t, d.url, session, defaultToken, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	callBody := func(id int, amount int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"transfer","arguments":{"amount":%d}}}`, id, amount)
	}
	first, _ := rpc(t, d.url, session, defaultToken, callBody(7, 9))
	again, _ := rpc(t, d.url, session, defaultToken, callBody(7, 9))
	if !bytes.Contains(first, []byte("sent 9")) || !bytes.Equal(first, again) {
		t.Errorf("first %s, retry %s", first, again)
	}
	if got := d.ledger.ran(); !slices.Equal(got, []int{9}) {
		t.Errorf("transfers run: %v, want one", got)
	}
	if other, _ := rpc(t, d.url, session, defaultToken, callBody(8, 9)); !bytes.Contains(other, []byte("sent 9")) {
		t.Errorf("another request: %s", other)
	}
	if got := d.ledger.ran(); !slices.Equal(got, []int{9, 9}) {
		t.Errorf("transfers run: %v, want two", got)
	}
	if reused, _ := rpc(t, d.url, session, defaultToken, callBody(7, 5)); !bytes.Contains(reused, []byte("sent 5")) {
		t.Errorf("another call under request id 7: %s, want its own result", reused)
	}
	if got := d.ledger.ran(); !slices.Equal(got, []int{9, 9, 5}) {
		t.Errorf("transfers run: %v, want the third", got)
	}
}

// A page of another origin is refused, and so is a body beyond the bound.
func TestOriginAndBodyBound(t *testing.T) {
	d := startDoor(t)
	post := func(origin string, body string) int {
		req, _ := http.NewRequest(http.MethodPost, d.url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+defaultToken)
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	if code := post("http://evil.example", init); code != http.StatusForbidden {
		t.Errorf("another origin: %d", code)
	}
	if code := post(d.url, init); code != http.StatusOK {
		t.Errorf("its own origin: %d", code)
	}
	huge := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"transfer","arguments":{"pad":"` + strings.Repeat("x", 5<<20) + `"}}}`
	if code := post("", huge); code != http.StatusRequestEntityTooLarge {
		t.Errorf("a 5 MiB body: %d", code)
	}
}

// A change of the catalog bucket reaches connected clients as tools/list_changed, and
// the list follows it.
func TestListChanged(t *testing.T) {
	d := startDoor(t)
	changed := make(chan struct{}, 10)
	cs := d.session(t, defaultToken, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		changed <- struct{}{}
	}}, "transfer")
	js, err := jetstream.New(d.conn("admin"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kv, err := js.KeyValue(ctx, messages.BucketCatalog)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "extra", []byte(`[{"name": "extra__lookup", "server": "extra", "remote": "lookup", "description": "a new tool"}]`)); err != nil {
		t.Fatal(err)
	}
	// Each notification says the list changed (the executors write their own keys too);
	// one of them is this change's.
	for {
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("no tools/list_changed lists the new tool: %v", toolNames(t, cs))
		}
		if slices.Contains(toolNames(t, cs), "extra__lookup") {
			return
		}
	}
}

// A front-door replica dies while a non-idempotent call of its client runs; the client
// retries the request (same session id, same request id) at another replica, which
// takes the session on and answers with the one result: the tool ran once. The session
// stays its token's there (403 for another).
func TestRetryAtAnotherReplicaRunsOnce(t *testing.T) {
	d := startDoor(t)
	first, kill := d.replica()
	second, _ := d.replica()
	sessionAt(t, first, defaultToken, nil, "slow_transfer") // each replica has the catalog
	sessionAt(t, second, defaultToken, nil, "slow_transfer")
	_, session := rpc(t, first, "", defaultToken, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	rpc(t, first, session, defaultToken, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	body := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"slow_transfer","arguments":{"amount":42}}}`
	lost := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, first, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+defaultToken)
		req.Header.Set("Mcp-Session-Id", session)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		lost <- err
	}()
	select {
	case <-d.started:
	case <-time.After(30 * time.Second):
		t.Fatal("the call did not start")
	}
	kill()
	if err := <-lost; err == nil {
		t.Log("the first replica answered before it died") // the retry must still not run it again
	}
	answer, _ := rpc(t, second, session, defaultToken, body)
	if !bytes.Contains(answer, []byte("sent 42 slowly")) {
		t.Errorf("the retry at the second replica: %s", answer)
	}
	if got := d.ledger.ran(); !slices.Equal(got, []int{42}) {
		t.Errorf("runs: %v, want one", got)
	}
	// The session, taken on, stays its token's: another token cannot use it.
	req, _ := http.NewRequest(http.MethodPost, second, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+acmeToken)
	req.Header.Set("Mcp-Session-Id", session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("another token in the session: %d", resp.StatusCode)
	}
	if got := d.ledger.ran(); !slices.Equal(got, []int{42}) {
		t.Errorf("runs: %v, want one", got)
	}
}

// A backend's sampling request and elicitation question in the middle of a call (its
// configuration says "ask") reach the MCP client that called, which declared it can
// answer them, and its answers reach the backend: all through the pipeline.
func TestSamplingAndElicitationReachTheClient(t *testing.T) {
	backend := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return mcptest.ConformanceServer() }, nil))
	t.Cleanup(backend.Close)
	d := startDoor(t, `"conf": {"type": "http", "url": "`+backend.URL+`", "sampling": "ask", "elicitation": "ask"}`)
	cs := d.session(t, defaultToken, &mcp.ClientOptions{
		CreateMessageHandler: func(_ context.Context, r *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			prompt := r.Params.Messages[0].Content.(*mcp.TextContent).Text
			return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: "the model read " + prompt}}, nil
		},
		ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"username": "ada", "email": "ada@example.com"}}, nil
		},
	}, "conf__test_sampling", "conf__test_elicitation")
	if res := call(t, cs, "conf__test_sampling", map[string]any{"prompt": "a question"}); res.IsError || text(res) != "LLM response: the model read a question" {
		t.Errorf("sampling: %v %q", res.IsError, text(res))
	}
	if res := call(t, cs, "conf__test_elicitation", map[string]any{"message": "who?"}); res.IsError || !strings.Contains(text(res), "action accept") || !strings.Contains(text(res), "ada@example.com") {
		t.Errorf("elicitation: %v %q", res.IsError, text(res))
	}
}

// Bad input is answered with a structured error and the door goes on: arguments that
// are not an object, a tool it does not list, a conversation header that names none, a
// body that is not JSON.
func TestBadInputIsAnswered(t *testing.T) {
	d := startDoor(t)
	d.session(t, defaultToken, nil, "transfer")
	_, session := rpc(t, d.url, "", defaultToken, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	rpc(t, d.url, session, defaultToken, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	answer, _ := rpc(t, d.url, session, defaultToken, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"transfer","arguments":[1,2]}}`)
	if !bytes.Contains(answer, []byte(`"isError":true`)) && !bytes.Contains(answer, []byte(`"error"`)) {
		t.Errorf("arguments that are not an object: %s", answer)
	}
	answer, _ = rpc(t, d.url, session, defaultToken, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"no_such_tool","arguments":{}}}`)
	if !bytes.Contains(answer, []byte(`"error"`)) && !bytes.Contains(answer, []byte(`"isError":true`)) {
		t.Errorf("an unknown tool: %s", answer)
	}
	post := func(body string, header ...string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, d.url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+defaultToken)
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := post(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"transfer","arguments":{"amount":1}}}`, frontdoor.HeaderConversation, "not a conversation")
	if code != http.StatusOK || !strings.Contains(body, `"isError":true`) || !strings.Contains(body, "invalid_arguments") {
		t.Errorf("a bad conversation header: %d %s", code, body)
	}
	if code, body := post(`{"jsonrpc":`); code/100 != 4 {
		t.Errorf("a body that is not JSON: %d %s", code, body)
	}
	if got := d.ledger.ran(); len(got) != 0 {
		t.Errorf("ran: %v", got)
	}
	if answer, _ := rpc(t, d.url, session, defaultToken, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"transfer","arguments":{"amount":2}}}`); !bytes.Contains(answer, []byte("sent 2")) {
		t.Errorf("after the bad input: %s", answer)
	}
}

// post sends one JSON-RPC message in session and returns the answer to its id, or an
// error when the front door could not answer (it died, or does not know the session).
func post(url, session, token, body string) (json.RawMessage, error) {
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Mcp-Session-Id", session)
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data:"); ok && (strings.Contains(data, `"result"`) || strings.Contains(data, `"error"`)) {
			return json.RawMessage(strings.TrimSpace(data)), nil
		}
	}
	return nil, fmt.Errorf("no answer: %v", sc.Err())
}

// Two front-door replicas, two executors, 10 MCP sessions (half begun at each replica)
// making 50 non-idempotent calls, five each in turn; one replica is killed while calls
// run, and its clients retry each unanswered request at the other: every call is
// answered, and none ran twice.
func TestReplicaKilledDuringManyCalls(t *testing.T) {
	d := startDoor(t)
	a, killA := d.replica()
	b, _ := d.replica()
	sessionAt(t, a, defaultToken, nil, "slow_transfer")
	sessionAt(t, b, defaultToken, nil, "slow_transfer")
	const sessions, calls = 10, 5
	type answer struct {
		amount int
		text   string
		err    error
	}
	answers := make(chan answer, sessions*calls)
	var wg sync.WaitGroup
	for s := range sessions {
		home, other := a, b
		if s%2 == 1 {
			home, other = b, a
		}
		_, session := rpc(t, home, "", defaultToken, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
		rpc(t, home, session, defaultToken, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		wg.Add(1)
		go func() {
			defer wg.Done()
			url := home
			for k := 1; k <= calls; k++ {
				amount := 1000 + s*10 + k
				body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"slow_transfer","arguments":{"amount":%d}}}`, k, amount)
				var got json.RawMessage
				var err error
				for try := 0; try < 2; try++ { // a retry at the other replica when this one fails
					if got, err = post(url, session, defaultToken, body); err == nil {
						break
					}
					url = other
				}
				answers <- answer{amount, string(got), err}
			}
		}()
	}
	// Kill a once a few calls ran and more are under way.
	for range 6 {
		select {
		case <-d.started:
		case <-time.After(time.Minute):
			t.Fatal("the calls did not start")
		}
	}
	killA()
	wg.Wait()
	close(answers)
	n := 0
	for ans := range answers {
		n++
		if ans.err != nil || !strings.Contains(ans.text, fmt.Sprintf("sent %d slowly", ans.amount)) {
			t.Errorf("call %d: %v %s", ans.amount, ans.err, ans.text)
		}
	}
	runs := map[int]int{}
	for _, amount := range d.ledger.ran() {
		runs[amount]++
	}
	for amount, times := range runs {
		if times != 1 {
			t.Errorf("call %d ran %d times", amount, times)
		}
	}
	if n != sessions*calls || len(runs) != sessions*calls {
		t.Errorf("%d answers, %d calls run; want %d of each", n, len(runs), sessions*calls)
	}
}

// A stateful server's state stays the MCP session's: toolbus keeps a server session
// per conversation, and the conversation is the MCP session's, also after its front
// door died and another took the session on. Each MCP session's counter counts 1, 2,
// 3, 4 across the kill — never another session's calls, never a call twice.
func TestStatePerSessionAcrossReplicas(t *testing.T) {
	var mu sync.Mutex
	counts := map[*mcp.ServerSession]int{}
	counter := mcp.NewServer(&mcp.Implementation{Name: "counter"}, nil)
	mcp.AddTool(counter, &mcp.Tool{Name: "bump", Description: "counts this session's calls"}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		mu.Lock()
		counts[req.Session]++
		n := counts[req.Session]
		mu.Unlock()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("count %d", n)}}}, nil, nil
	})
	cs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return counter }, nil))
	t.Cleanup(cs.Close)
	d := startDoor(t, `"counter": {"type": "http", "url": "`+cs.URL+`"}`)
	a, killA := d.replica()
	b, _ := d.replica()
	sessionAt(t, a, defaultToken, nil, "counter__bump")
	sessionAt(t, b, defaultToken, nil, "counter__bump")
	var ids []string
	for range 4 {
		_, session := rpc(t, a, "", defaultToken, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
		rpc(t, a, session, defaultToken, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		ids = append(ids, session)
	}
	bump := func(url, session string, k int) string {
		t.Helper()
		got, err := post(url, session, defaultToken, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"counter__bump","arguments":{}}}`, k))
		if err != nil {
			t.Fatalf("bump %d: %v", k, err)
		}
		return string(got)
	}
	for k := 1; k <= 4; k++ {
		url := a
		if k > 2 {
			url = b
		}
		if k == 3 {
			killA()
			// The retry of the second call at b, the same request: its answer again.
			for _, s := range ids {
				if got := bump(b, s, 2); !strings.Contains(got, "count 2") {
					t.Errorf("session %s, call 2 retried at b: %s", s, got)
				}
			}
		}
		for _, s := range ids {
			if got := bump(url, s, k); !strings.Contains(got, fmt.Sprintf("count %d", k)) {
				t.Errorf("session %s, call %d: %s", s, k, got)
			}
		}
	}
}

// The backends' prompts are the front door's: prompts/list and prompts/get run the
// servers' prompts tools through the pipeline. A prompt one server alone offers is named
// as it is there; one two servers offer is named <server>__<prompt>, the form that
// always works.
func TestPromptsThroughTheFrontDoor(t *testing.T) {
	serve := func(greeting string, prompts ...string) string {
		srv := mcp.NewServer(&mcp.Implementation{Name: "greeter"}, nil)
		for _, p := range prompts {
			srv.AddPrompt(&mcp.Prompt{Name: p, Description: "a greeting", Arguments: []*mcp.PromptArgument{{Name: "name", Required: true}}},
				func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
					return &mcp.GetPromptResult{Description: "a greeting", Messages: []*mcp.PromptMessage{
						{Role: "user", Content: &mcp.TextContent{Text: greeting + " " + req.Params.Arguments["name"]}}}}, nil
				})
		}
		hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
		t.Cleanup(hs.Close)
		return hs.URL
	}
	d := startDoor(t, `"greeter": {"type": "http", "url": "`+serve("Hello", "greet", "welcome")+`"}`, `"hailer": {"type": "http", "url": "`+serve("Hail", "greet")+`"}`)
	cs := d.session(t, defaultToken, nil, "greeter__prompts_get", "hailer__prompts_get")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list, err := cs.ListPrompts(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range list.Prompts {
		names = append(names, p.Name)
		if len(p.Arguments) != 1 {
			t.Errorf("prompt %s: arguments %+v", p.Name, p.Arguments)
		}
	}
	if !slices.Equal(names, []string{"greeter__greet", "welcome", "hailer__greet"}) {
		t.Fatalf("prompts: %v", names)
	}
	for _, c := range []struct{ name, want string }{
		{"greeter__greet", "Hello Ada"}, {"hailer__greet", "Hail Ada"}, {"welcome", "Hello Ada"}, {"greeter__welcome", "Hello Ada"},
	} {
		got, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: c.name, Arguments: map[string]string{"name": "Ada"}})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(got.Messages) != 1 || got.Messages[0].Content.(*mcp.TextContent).Text != c.want {
			t.Errorf("%s: %+v", c.name, got)
		}
	}
	for _, name := range []string{"nobody__greet", "greet"} { // no server; two servers
		if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: name, Arguments: map[string]string{"name": "Ada"}}); err == nil {
			t.Errorf("prompt %s was got", name)
		}
	}
}

// What the conformance suite's server offers reaches the client through the door as
// the server gave it: a tool's embedded text resource as a resource block (its text
// written out for the model too, as before), resources read with their media type, text
// or blob, templates listed and read, prompts with arguments, an embedded resource or an
// image, each under its own name (one server offers it), completions of a prompt's and
// a template's arguments, and a subscribed resource's update.
func TestBackendContentAsItCame(t *testing.T) {
	backend := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return mcptest.ConformanceServer() }, nil))
	t.Cleanup(backend.Close)
	d := startDoor(t, `"conf": {"type": "http", "url": "`+backend.URL+`", "completions": true, "subscriptions": true}`)
	cs := d.session(t, defaultToken, nil, "conf__test_embedded_resource", "conf__resources_read", "conf__prompts_get", "conf__completion_complete")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	res := call(t, cs, "conf__test_embedded_resource", map[string]any{})
	if len(res.Content) != 2 || text(res) != "[resource: test://embedded-resource, text/plain]\nThis is an embedded resource content." {
		t.Fatalf("embedded resource: %q, %d blocks", text(res), len(res.Content))
	}
	if e, ok := res.Content[1].(*mcp.EmbeddedResource); !ok || e.Resource.URI != "test://embedded-resource" || e.Resource.MIMEType != "text/plain" ||
		e.Resource.Text != "This is an embedded resource content." || e.Resource.Blob != nil {
		t.Errorf("the resource block: %#v", res.Content[1])
	}
	res = call(t, cs, "conf__test_multiple_content_types", map[string]any{})
	var kinds []string
	for _, c := range res.Content {
		kinds = append(kinds, fmt.Sprintf("%T", c))
	}
	if !slices.Equal(kinds, []string{"*mcp.TextContent", "*mcp.ImageContent", "*mcp.EmbeddedResource"}) {
		t.Errorf("mixed content: %v", kinds)
	}

	read := func(uri string) *mcp.ResourceContents {
		t.Helper()
		got, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil || len(got.Contents) != 1 {
			t.Fatalf("%s: %v %+v", uri, err, got)
		}
		return got.Contents[0]
	}
	if c := read("test://static-text"); c.URI != "test://static-text" || c.MIMEType != "text/plain" || c.Text != mcptest.StaticText || c.Blob != nil {
		t.Errorf("text resource: %+v", c)
	}
	if c := read("test://static-binary"); c.MIMEType != "image/png" || len(c.Blob) == 0 || c.Text != "" {
		t.Errorf("binary resource: %+v", c)
	}
	if c := read("test://template/123/data"); c.MIMEType != "application/json" || c.Text != `{"data":"Data for ID: 123","id":"123","templateTest":true}` {
		t.Errorf("templated resource: %+v", c)
	}
	templates, err := cs.ListResourceTemplates(ctx, nil)
	if err != nil || len(templates.ResourceTemplates) != 1 || templates.ResourceTemplates[0].URITemplate != "test://template/{id}/data" || templates.ResourceTemplates[0].Name != "template" {
		t.Errorf("templates: %v %+v", err, templates)
	}

	prompt := func(name string, args map[string]string) []*mcp.PromptMessage {
		t.Helper()
		got, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return got.Messages
	}
	if m := prompt("test_simple_prompt", nil); len(m) != 1 || m[0].Content.(*mcp.TextContent).Text != mcptest.SimplePromptText {
		t.Errorf("simple prompt: %+v", m)
	}
	if m := prompt("test_prompt_with_arguments", map[string]string{"arg1": "a", "arg2": "b"}); len(m) != 1 || m[0].Content.(*mcp.TextContent).Text != "Prompt with arguments: arg1='a', arg2='b'" {
		t.Errorf("prompt with arguments: %+v", m)
	}
	if m := prompt("test_prompt_with_embedded_resource", map[string]string{"resourceUri": "test://x"}); len(m) != 2 {
		t.Errorf("prompt with a resource: %+v", m)
	} else if e, ok := m[0].Content.(*mcp.EmbeddedResource); !ok || e.Resource.URI != "test://x" || e.Resource.Text != mcptest.EmbeddedText {
		t.Errorf("prompt with a resource: %#v", m[0].Content)
	}
	if m := prompt("test_prompt_with_image", nil); len(m) != 2 {
		t.Errorf("prompt with an image: %+v", m)
	} else if img, ok := m[0].Content.(*mcp.ImageContent); !ok || img.MIMEType != "image/png" || len(img.Data) == 0 {
		t.Errorf("prompt with an image: %#v", m[0].Content)
	}

	// completion/complete reaches the server of the prompt or the template named.
	for _, c := range []struct {
		ref   *mcp.CompleteReference
		value string
		want  []string
	}{
		{&mcp.CompleteReference{Type: "ref/prompt", Name: "test_prompt_with_arguments"}, "par", []string{"paris", "park", "party"}},
		{&mcp.CompleteReference{Type: "ref/resource", URI: "test://template/{id}/data"}, "te", []string{"test", "testValue1"}},
		{&mcp.CompleteReference{Type: "ref/prompt", Name: "test_simple_prompt"}, "nothing", []string{}},
	} {
		got, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: c.ref, Argument: mcp.CompleteParamsArgument{Name: "arg1", Value: c.value}})
		if err != nil || !slices.Equal(got.Completion.Values, c.want) {
			t.Errorf("complete %+v %q: %v %+v, want %v", c.ref, c.value, err, got, c.want)
		}
	}
	if _, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "no_such_prompt"}, Argument: mcp.CompleteParamsArgument{Name: "a"}}); err == nil {
		t.Error("a prompt nobody has was completed")
	}

	// resources/subscribe reaches the server that lists the resource, whose update
	// (it updates the watched resource at once) reaches the subscribed session.
	updated := make(chan string, 10)
	ws := d.session(t, defaultToken, &mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
		updated <- r.Params.URI
	}}, "conf__resources_subscribe")
	if err := ws.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://watched-resource"}); err != nil {
		t.Fatal(err)
	}
	select {
	case uri := <-updated:
		if uri != "test://watched-resource" {
			t.Errorf("updated %s", uri)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no notifications/resources/updated of the subscribed resource")
	}
	if err := ws.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "test://watched-resource"}); err != nil {
		t.Error(err)
	}
}

// The backends' resources are the front door's: resources/list names them
// <server>__<name> when two servers have one so named, with their URIs; resources/read
// finds the server that has one and gives its contents as they came — through the
// servers' resources tools in the pipeline.
func TestResourcesThroughTheFrontDoor(t *testing.T) {
	serve := func(name, uri, text string) string {
		srv := mcp.NewServer(&mcp.Implementation{Name: name}, nil)
		srv.AddResource(&mcp.Resource{Name: "readme", URI: uri, MIMEType: "text/plain"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "text/plain", Text: text}}}, nil
		})
		hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
		t.Cleanup(hs.Close)
		return hs.URL
	}
	alpha, beta := serve("alpha", "test://alpha/readme", "alpha's text"), serve("beta", "test://beta/readme", "beta's text")
	d := startDoor(t, `"alpha": {"type": "http", "url": "`+alpha+`"}`, `"beta": {"type": "http", "url": "`+beta+`"}`)
	cs := d.session(t, defaultToken, nil, "alpha__resources_read", "beta__resources_read")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range list.Resources {
		names = append(names, r.Name+" "+r.URI)
	}
	if !slices.Equal(names, []string{"alpha__readme test://alpha/readme", "beta__readme test://beta/readme"}) {
		t.Errorf("resources: %v", names)
	}
	got, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://beta/readme"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Contents) != 1 || got.Contents[0].Text != "beta's text" || got.Contents[0].URI != "test://beta/readme" || got.Contents[0].MIMEType != "text/plain" {
		t.Errorf("read: %+v", got.Contents)
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://nobody/x"}); err == nil {
		t.Error("a resource nobody has was read")
	}
}

// A session's subscription reaches the backend in the session's conversation, and ends
// there when the client unsubscribes or when its session ends; a resource nobody
// subscribed to is not unsubscribed at the backend.
func TestSubscriptionsEndWithTheirSession(t *testing.T) {
	events := make(chan string, 20)
	srv := mcp.NewServer(&mcp.Implementation{Name: "watched"}, &mcp.ServerOptions{
		SubscribeHandler: func(_ context.Context, r *mcp.SubscribeRequest) error {
			events <- "subscribe " + r.Params.URI
			return nil
		},
		UnsubscribeHandler: func(_ context.Context, r *mcp.UnsubscribeRequest) error {
			events <- "unsubscribe " + r.Params.URI
			return nil
		},
	})
	srv.AddResource(&mcp.Resource{URI: "test://w", Name: "w"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "test://w", Text: "w"}}}, nil
	})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	d := startDoor(t, `"watched": {"type": "http", "url": "`+hs.URL+`", "subscriptions": true}`)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	next := func(want string) {
		t.Helper()
		select {
		case got := <-events:
			if got != want {
				t.Errorf("the backend saw %q, want %q", got, want)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("the backend saw no %q", want)
		}
	}
	first := d.session(t, defaultToken, nil, "watched__resources_subscribe")
	second := d.session(t, defaultToken, nil, "watched__resources_subscribe")
	for _, cs := range []*mcp.ClientSession{first, second} { // two conversations: two backend sessions
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://w"}); err != nil {
			t.Fatal(err)
		}
		next("subscribe test://w")
	}
	if err := second.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "test://nothing"}); err != nil {
		t.Error(err)
	}
	if err := second.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "test://w"}); err != nil {
		t.Fatal(err)
	}
	next("unsubscribe test://w")
	first.Close()
	next("unsubscribe test://w")
	select {
	case got := <-events:
		t.Errorf("the backend saw %q too", got)
	case <-time.After(500 * time.Millisecond):
	}
}

// A client whose stream broke during a call (2025-11-25: the stream begins with a
// priming event naming it) resumes it with Last-Event-ID and gets the call's result,
// which ran once.
func TestStreamResumedWithLastEventID(t *testing.T) {
	d := startDoor(t)
	d.session(t, defaultToken, nil, "slow_transfer") // the catalog is in
	post := func(session, body string) *http.Response {
		resp, err := http.DefaultClient.Do(rpcRequest(d.url, session, defaultToken, "2025-11-25", body))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	session := resp.Header.Get("Mcp-Session-Id")
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	resp = post(session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	resp.Body.Close()

	resp = post(session, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow_transfer","arguments":{"amount":7}}}`)
	sc := bufio.NewScanner(resp.Body)
	var primed string
	for primed == "" && sc.Scan() {
		if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
			primed = id
		}
	}
	resp.Body.Close() // the stream breaks before the answer
	if primed == "" {
		t.Fatal("the stream began with no event id (no priming event)")
	}
	select {
	case <-d.started:
	case <-time.After(30 * time.Second):
		t.Fatal("the call did not start")
	}

	req, _ := http.NewRequest(http.MethodGet, d.url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+defaultToken)
	req.Header.Set("Mcp-Session-Id", session)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Last-Event-ID", primed)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("resuming: %d %s", resp.StatusCode, b)
	}
	sc = bufio.NewScanner(resp.Body)
	var answer string
	for answer == "" && sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && strings.Contains(data, `"id":2`) {
			answer = data
		}
	}
	if !strings.Contains(answer, "sent 7 slowly") {
		t.Fatalf("the resumed stream's answer: %q (%v)", answer, sc.Err())
	}
	if got := d.ledger.ran(); !slices.Equal(got, []int{7}) {
		t.Errorf("runs: %v, want one", got)
	}
}
