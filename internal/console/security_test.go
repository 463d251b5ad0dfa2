package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/internal/cli"
	"github.com/toolbus/toolbus/internal/console"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolbus"
)

// pipeline runs toolbus's services on a fresh embedded NATS and returns its URL, and a
// console of it.
func pipeline(t *testing.T) (string, *console.Console) {
	t.Helper()
	url := bustest.Server(t)
	nc, _ := bustest.Connect(t, url)
	ctx, cancel := context.WithCancel(context.Background())
	n, err := toolbus.Start(ctx, toolbus.Options{Provision: true, Conn: nc, Config: &config.Config{},
		Services: []string{toolbus.Parser, toolbus.Executor, toolbus.Formatter}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); n.Wait() })
	js, _ := jetstream.New(nc)
	c, _ := client.New(nc)
	return url, &console.Console{NC: nc, JS: js, Client: c}
}

// do sends a request built by the test and returns its status, headers and body.
func do(t *testing.T, req *http.Request) (int, http.Header, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp.StatusCode, resp.Header, "" // live events: they do not end
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func request(method, url, body string, header map[string]string) *http.Request {
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	for k, v := range header {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	return req
}

// checkHeaders checks the security headers of one response.
func checkHeaders(t *testing.T, what string, h http.Header) {
	t.Helper()
	csp := h.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("%s: Content-Security-Policy %q lacks %q", what, csp, want)
		}
	}
	if strings.Contains(csp, "unsafe") {
		t.Errorf("%s: Content-Security-Policy %q allows something unsafe", what, csp)
	}
	for name, want := range map[string]string{"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"} {
		if got := h.Get(name); got != want {
			t.Errorf("%s: %s %q, want %q", what, name, got, want)
		}
	}
}

// served runs `toolbus console` on localhost against a pipeline, as a user does, and
// returns the address it serves on, the token its printed URL carries ("" when none),
// and a console of the pipeline.
func served(t *testing.T) (base, tok string, con *console.Console) {
	t.Helper()
	url, con := pipeline(t)
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &bustest.LogBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- cli.Main(ctx, []string{"console", "--nats", url, "--console-addr", "127.0.0.1:0"},
			cli.Env{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: stderr, Getenv: func(string) string { return "" }})
	}()
	t.Cleanup(func() { cancel(); <-done })
	printed := regexp.MustCompile(`console on (http://[^\s;]+)`)
	var page string
	eventually(t, "toolbus console prints its URL", func() bool {
		if m := printed.FindStringSubmatch(stderr.String()); m != nil {
			page = m[1]
		}
		return page != ""
	})
	u, err := neturl.Parse(page)
	if err != nil {
		t.Fatal(err)
	}
	if u.Hostname() != "127.0.0.1" {
		t.Fatalf("printed URL %s: want the loopback address", page)
	}
	return "http://" + u.Host, u.Query().Get("token"), con
}

// merge returns the headers of hs, the later ones winning.
func merge(hs ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, h := range hs {
		for k, v := range h {
			out[k] = v
		}
	}
	return out
}

// On localhost too, `toolbus console` requires a token: a random one, which its printed
// URL carries; the API refuses a request without it (in the Authorization header: the
// query string will not do), and the page opened with it works.
func TestConsoleTokenOnLocalhost(t *testing.T) {
	base, tok, _ := served(t)
	if len(tok) < 32 {
		t.Fatalf("the printed URL carries no random token (%q)", tok)
	}
	for _, path := range []string{"/api/flow", "/api/dead", "/api/events", "/api/flow?token=" + tok} {
		if code, _, _ := do(t, request("GET", base+path, "", nil)); code != http.StatusUnauthorized {
			t.Errorf("GET %s without the token in a header: %d, want 401", path, code)
		}
	}
	if code, _, body := do(t, request("GET", base+"/?token="+tok, "", nil)); code != 200 || !strings.Contains(body, "<title>toolbus console</title>") {
		t.Errorf("the page with its token: %d %.200s", code, body)
	}
	if code, _, body := do(t, request("GET", base+"/api/flow", "", map[string]string{"Authorization": "Bearer " + tok})); code != 200 {
		t.Errorf("GET /api/flow with the token: %d %s", code, body)
	}
}

// Another site's page posts to try it — a "simple" request (text/plain, a form), with or
// without the token (which it should not have), or its Origin: the console refuses it
// before any handler, and nothing runs. The page's own request runs.
func TestConsoleRefusesCrossSitePost(t *testing.T) {
	base, tok, con := served(t)
	ctx := context.Background()
	responses := func() uint64 {
		s, err := con.JS.Stream(ctx, messages.StreamResponses)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.LastSeq
	}
	bearer := map[string]string{"Authorization": "Bearer " + tok}
	evil := map[string]string{"Origin": "http://evil.example"}
	try := `{"conversation": "csrf-1", "text": "<tool_call>{\"name\": \"clock\", \"arguments\": {}}</tool_call>"}`
	before := responses()
	for name, h := range map[string]map[string]string{
		"text/plain from another site":                      merge(evil, map[string]string{"Content-Type": "text/plain"}),
		"a form from another site":                          merge(evil, map[string]string{"Content-Type": "application/x-www-form-urlencoded"}),
		"text/plain with no Origin":                         {"Content-Type": "text/plain"},
		"text/plain with the token":                         merge(bearer, map[string]string{"Content-Type": "text/plain"}),
		"JSON from another site, with the token":            merge(bearer, evil, map[string]string{"Content-Type": "application/json"}),
		"JSON with the token, another site's by its fetch":  merge(bearer, map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"}),
		"JSON without the token":                            {"Content-Type": "application/json"},
		"JSON from a sandboxed frame (Origin null)":         merge(bearer, map[string]string{"Content-Type": "application/json", "Origin": "null"}),
		"JSON from another port of localhost, token or not": merge(bearer, map[string]string{"Content-Type": "application/json", "Origin": "http://127.0.0.1:1"}),
	} {
		code, _, body := do(t, request("POST", base+"/api/try", try, h))
		if code != http.StatusForbidden && code != http.StatusUnsupportedMediaType && code != http.StatusUnauthorized {
			t.Errorf("POST /api/try, %s: %d %.200s, want 401, 403 or 415", name, code, body)
		}
	}
	if code, _, _ := do(t, request("POST", base+"/api/try?token="+tok, try, map[string]string{"Content-Type": "application/json"})); code != http.StatusUnauthorized {
		t.Errorf("POST /api/try with the token in the query string: %d, want 401", code)
	}
	if code, _, _ := do(t, request("POST", base+"/api/dead/redrive?seq=1", "", merge(evil, map[string]string{"Content-Type": "text/plain"}))); code != http.StatusForbidden && code != http.StatusUnsupportedMediaType {
		t.Errorf("POST /api/dead/redrive from another site: %d, want 403 or 415", code)
	}
	if code, _, _ := do(t, request("POST", base+"/api/approvals/decide", `{"id": "0123456789abcdef", "decision": "approve"}`, merge(evil, map[string]string{"Content-Type": "text/plain"}))); code != http.StatusForbidden && code != http.StatusUnsupportedMediaType {
		t.Errorf("POST /api/approvals/decide from another site: %d, want 403 or 415", code)
	}
	if after := responses(); after != before {
		t.Errorf("refused requests ran: the responses stream went from %d to %d", before, after)
	}
	if calls := get[console.CallPage](t, base+"/api/calls?conversation=csrf-1", tok).Calls; len(calls) != 0 {
		t.Errorf("refused requests ran: calls %+v", calls)
	}

	// The page's own request: the token, JSON, its origin. It runs.
	var out messages.Output
	code, _, body := do(t, request("POST", base+"/api/try", try, merge(bearer, map[string]string{"Content-Type": "application/json; charset=utf-8", "Origin": base, "Sec-Fetch-Site": "same-origin"})))
	if code != 200 || json.Unmarshal([]byte(body), &out) != nil || len(out.Results) != 1 || !out.Results[0].Success {
		t.Errorf("POST /api/try as the page sends it: %d %s", code, body)
	}
}

// A name that resolves to this host (DNS rebinding) is refused on every path, the page
// included, with the token too; localhost and the loopback addresses with the
// console's port are its own.
func TestConsoleRefusesForeignHost(t *testing.T) {
	base, tok, _ := served(t)
	bearer := map[string]string{"Authorization": "Bearer " + tok}
	port := base[strings.LastIndex(base, ":")+1:]
	for _, host := range []string{"evil.example:" + port, "evil.example", "localhost.evil.example:" + port, "127.0.0.1:1", "10.0.0.1:" + port} {
		for _, path := range []string{"/", "/?token=" + tok, "/app.js", "/api/flow", "/api/events"} {
			code, _, _ := do(t, request("GET", base+path, "", merge(bearer, map[string]string{"Host": host})))
			if code != http.StatusMisdirectedRequest && code != http.StatusForbidden {
				t.Errorf("GET %s with Host %s: %d, want 421 or 403", path, host, code)
			}
		}
	}
	for _, host := range []string{"localhost:" + port, "LOCALHOST:" + port, "127.0.0.1:" + port} {
		if code, _, body := do(t, request("GET", base+"/api/flow", "", merge(bearer, map[string]string{"Host": host}))); code != 200 {
			t.Errorf("GET /api/flow with Host %s: %d %s", host, code, body)
		}
	}
}

// Every response carries the security headers: the page, its script, the API, and the
// refusals.
func TestConsoleSecurityHeaders(t *testing.T) {
	base, tok, _ := served(t)
	bearer := map[string]string{"Authorization": "Bearer " + tok}
	for name, req := range map[string]*http.Request{
		"the page":            request("GET", base+"/?token="+tok, "", nil),
		"its script":          request("GET", base+"/app.js", "", nil),
		"its style":           request("GET", base+"/style.css", "", nil),
		"the API":             request("GET", base+"/api/flow", "", bearer),
		"a missing file":      request("GET", base+"/nothing", "", nil),
		"no token":            request("GET", base+"/api/flow", "", nil),
		"a foreign Host":      request("GET", base+"/", "", map[string]string{"Host": "evil.example"}),
		"another site's POST": request("POST", base+"/api/try", "{}", map[string]string{"Origin": "http://evil.example", "Content-Type": "text/plain"}),
		"text/plain":          request("POST", base+"/api/try", "{}", merge(bearer, map[string]string{"Content-Type": "text/plain"})),
	} {
		_, h, _ := do(t, req)
		checkHeaders(t, name, h)
	}
}

// The guard of Handler itself: a console behind a proxy answers to the names it is
// given (and their origins), still to its loopback addresses, and to nothing else.
func TestConsoleHosts(t *testing.T) {
	con := &console.Console{}
	srv := httptest.NewServer(con.Handler(token, "console.example.com", "tb.internal:8443"))
	defer srv.Close()
	port := strings.TrimPrefix(srv.URL, "http://127.0.0.1:")
	for host, want := range map[string]int{
		"console.example.com": 200, "Console.Example.COM:443": 200, "tb.internal:8443": 200, "tb.internal:8444": 421, "tb.internal": 421,
		"localhost:" + port: 200, "127.0.0.1:" + port: 200, "[::1]:" + port: 200, "evil.example:" + port: 421,
	} {
		code, h, _ := do(t, request("GET", srv.URL+"/", "", map[string]string{"Host": host}))
		if code != want {
			t.Errorf("Host %q: %d, want %d", host, code, want)
		}
		checkHeaders(t, "Host "+host, h)
	}
	for origin, want := range map[string]int{
		"https://console.example.com": 415, "http://console.example.com": 415, "https://tb.internal:8443": 415,
		"https://evil.example": 403, "https://console.example.com.evil.example": 403, "null": 403,
	} {
		// The origin passes (415: text/plain is still refused, before any handler) or not.
		code, _, _ := do(t, request("POST", srv.URL+"/api/try", "{}", map[string]string{"Host": "console.example.com", "Origin": origin,
			"Authorization": "Bearer " + token, "Content-Type": "text/plain"}))
		if code != want {
			t.Errorf("Origin %s: %d, want %d", origin, code, want)
		}
	}
}

// A dead letter is redriven once: a second redrive is refused (409) unless forced, on
// the API and with `toolbus dead redrive` (--force), and two redrives at once send it
// once.
func TestRedriveOnce(t *testing.T) {
	url, con := pipeline(t)
	srv := httptest.NewServer(con.Handler(token))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	file := func(conv string) uint64 {
		call := messages.ToolCall{ID: conv + "/r1/0", ResponseID: "r1", Conversation: conv, Count: 1, Tool: "clock", Arguments: json.RawMessage(`{}`)}
		body, _ := json.Marshal(messages.DeadCall{Call: call, Result: messages.ResultFor(call).Fail(messages.Errorf(messages.CodeServerUnavailable, "down"))})
		ack, err := con.JS.Publish(ctx, messages.DeadSubject(conv), body)
		if err != nil {
			t.Fatal(err)
		}
		return ack.Sequence
	}
	seq := file("once-1")
	redrive := `{"seq": ` + strconv.FormatUint(seq, 10)

	// The sequence in the query or in the body, force in either.
	var first, forced messages.Output
	if resp := post(t, srv.URL+"/api/dead/redrive?seq="+strconv.FormatUint(seq, 10), ``, &first); resp.StatusCode != 200 || len(first.Results) != 1 || !first.Results[0].Success {
		t.Fatalf("first redrive: %s %+v", resp.Status, first)
	}
	var refused struct {
		Error    string                 `json:"error"`
		Redriven *console.RedrivenError `json:"redriven"`
	}
	for _, body := range []string{"", redrive + `}`, redrive + `, "force": false}`} {
		refused.Error, refused.Redriven = "", nil
		if resp := post(t, srv.URL+"/api/dead/redrive?seq="+strconv.FormatUint(seq, 10), body, &refused); resp.StatusCode != http.StatusConflict ||
			refused.Redriven == nil || refused.Redriven.ResponseID != first.ResponseID || !strings.Contains(refused.Error, "again") {
			t.Errorf("second redrive %s: %s %+v, want 409 naming %s", body, resp.Status, refused, first.ResponseID)
		}
	}
	if resp := post(t, srv.URL+"/api/dead/redrive", redrive+`, "force": true}`, &forced); resp.StatusCode != 200 ||
		len(forced.Results) != 1 || forced.ResponseID == first.ResponseID {
		t.Fatalf("forced redrive: %s %+v", resp.Status, forced)
	}
	letters := get[console.DeadPage](t, srv.URL+"/api/dead").Letters
	if len(letters) != 1 || letters[0].Sequence != seq || letters[0].Redriven != forced.ResponseID || letters[0].Redrive == nil || !letters[0].Redrive.Forced {
		t.Errorf("dead letters after a redrive and a forced one: %+v, want the letter, its newest redrive forced", letters)
	}

	// toolbus dead redrive: the same rule, and --force.
	dead := func(args ...string) (int, string) {
		var stdout, stderr bytes.Buffer
		code := cli.Main(ctx, append([]string{"dead", "redrive", "--nats", url}, args...),
			cli.Env{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr, Getenv: func(string) string { return "" }})
		return code, stdout.String() + stderr.String()
	}
	seq2 := strconv.FormatUint(file("once-2"), 10)
	if code, out := dead(seq2); code != 0 {
		t.Fatalf("toolbus dead redrive %s: exit %d: %s", seq2, code, out)
	}
	if code, out := dead(seq2); code == 0 || !strings.Contains(out, "redriven already") || !strings.Contains(out, "--force") {
		t.Errorf("toolbus dead redrive %s again: exit %d: %s; want a refusal naming --force", seq2, code, out)
	}
	if code, out := dead("--force", seq2); code != 0 || !strings.Contains(out, "tool_result") {
		t.Errorf("toolbus dead redrive --force %s: exit %d: %s", seq2, code, out)
	}

	// Two pages (or a page and the CLI) redrive one dead letter at once: it is sent once.
	seq3 := file("once-3")
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = con.Redrive(ctx, seq3)
		}()
	}
	wg.Wait()
	sent := 0
	for _, err := range errs {
		switch {
		case err == nil:
			sent++
		case !errors.Is(err, console.ErrRedriven):
			t.Errorf("a redrive at once: %v", err)
		}
	}
	if sent != 1 {
		t.Errorf("4 redrives of one dead letter at once: %d sent, want 1 (%v)", sent, errs)
	}
}
