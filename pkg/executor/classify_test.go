package executor_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/claims/claimstest"
	"github.com/toolbus/toolbus/pkg/executor"
	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/mcpwire"
	"github.com/toolbus/toolbus/pkg/mcpwire/oauth"
	"github.com/toolbus/toolbus/pkg/messages"
)

// calcServer is an MCP server of typed tools, counting the calls that reach it:
// "add" (read-only, {a, b} integers), "flaky_read" (read-only: its first call breaks
// the connection, cut), "always_drop" (read-only: every call breaks it).
func calcServer(calls *atomic.Int32, cut func(*mcp.ServerSession)) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "calc", Version: "1"}, nil)
	type pair struct {
		A int `json:"a"`
		B int `json:"b"`
	}
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true}
	mcp.AddTool(s, &mcp.Tool{Name: "add", Annotations: readOnly}, func(_ context.Context, _ *mcp.CallToolRequest, in pair) (*mcp.CallToolResult, map[string]int, error) {
		calls.Add(1)
		return nil, map[string]int{"sum": in.A + in.B}, nil
	})
	var flaky atomic.Int32
	s.AddTool(&mcp.Tool{Name: "flaky_read", InputSchema: map[string]any{"type": "object"}, Annotations: readOnly},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			calls.Add(1)
			if flaky.Add(1) == 1 {
				cut(req.Session)
				<-ctx.Done()
				return nil, ctx.Err()
			}
			return &mcp.CallToolResult{StructuredContent: map[string]bool{"ok": true}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "always_drop", InputSchema: map[string]any{"type": "object"}, Annotations: readOnly},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			calls.Add(1)
			cut(req.Session)
			<-ctx.Done()
			return nil, ctx.Err()
		})
	return s
}

// calcPool is a pool of servers from the configuration, where the Command "in-memory"
// is calcServer over a pipe, counting its calls in calls.
func calcPool(t *testing.T, servers map[string]mcpwire.ServerConfig, calls *atomic.Int32, o *mcpwire.Options) *mcpwire.Pool {
	t.Helper()
	var conns sync.Map // *mcp.ServerSession → the server's end of its connection
	srv := calcServer(calls, func(ss *mcp.ServerSession) {
		if c, ok := conns.Load(ss); ok {
			c.(net.Conn).Close()
		}
	})
	if o == nil {
		o = &mcpwire.Options{}
	}
	o.Dial = func(ctx context.Context, name string) (mcp.Transport, error) {
		if servers[name].Command != "in-memory" {
			return nil, nil // from the configuration
		}
		c, s := net.Pipe()
		ss, err := srv.Connect(ctx, &mcp.IOTransport{Reader: s, Writer: s}, nil)
		conns.Store(ss, s)
		return &mcp.IOTransport{Reader: c, Writer: c}, err
	}
	p, err := mcpwire.NewPool(servers, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// callNumber numbers the calls execute makes up.
var callNumber atomic.Int32

// execute runs call through a stage from its first delivery on, until it is answered
// (the last delivery is the fifth), and returns the result, the delivery that answered
// and whether a dead-letter copy came with it.
func execute(t *testing.T, s *executor.Stage, call messages.ToolCall) (res messages.ToolResult, delivered int, dead bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if call.ID == "" {
		n := strconv.Itoa(int(callNumber.Add(1)))
		call.ID, call.ResponseID, call.Conversation, call.Count = "c/r"+n+"/0", "r"+n, "c", 1
	}
	for d := 1; d <= 5; d++ {
		dl := &bus.Delivery{Delivered: d, Last: d == 5}
		out, err := s.Execute(ctx, call, dl)
		if err == nil {
			err = dl.Published(ctx) // as the stage runner does once out is stored
		}
		var retry *bus.RetryError
		if errors.As(err, &retry) {
			continue
		}
		if err != nil || len(out) == 0 {
			t.Fatalf("delivery %d: %d messages, %v", d, len(out), err)
		}
		if err := json.Unmarshal(out[0].Body, &res); err != nil {
			t.Fatal(err)
		}
		return res, d, len(out) == 2
	}
	t.Fatal("no delivery answered the call")
	return
}

// A stdio server whose command is not found, or not executable, cannot be used until
// someone changes the configuration: its calls are answered at once (the first
// delivery, one attempt, nothing handed back), the pool says so once and tells its
// catalog the server has no tools (nobody waits for them), and another server's calls
// go on as if it were not there.
func TestMisconfiguredCommandIsFinalAtOnce(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("file modes")
	}
	notExecutable := filepath.Join(t.TempDir(), "server")
	if err := os.WriteFile(notExecutable, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs bustest.LogBuffer
	var listed sync.Map
	var calls atomic.Int32
	pool := calcPool(t, map[string]mcpwire.ServerConfig{
		"missing": {Command: "toolbus-test-no-such-command"},
		"noexec":  {Command: notExecutable},
		"calc":    {Command: "in-memory"},
	}, &calls, &mcpwire.Options{
		Logger:    slog.New(slog.NewTextHandler(&logs, nil)),
		OnCatalog: func(server string, tools []mcpwire.Tool) { listed.Store(server, len(tools)) },
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := pool.Connect(ctx); err == nil {
		t.Fatal("the pool connected to servers that cannot start")
	}
	s := &executor.Stage{Claims: &claimstest.Memory{}, RedeliveryDelay: time.Millisecond,
		Exec: &executor.Executor{Router: executor.NewRouter(executor.MCPBackend{Pool: pool})}}
	for _, tt := range []struct{ tool, wantSaid string }{
		{"missing__search", "not found"},
		{"noexec__search", "permission denied"},
	} {
		for i := range 3 {
			res, delivered, dead := execute(t, s, messages.ToolCall{Tool: tt.tool, Arguments: json.RawMessage(`{}`)})
			if res.Success || res.Error.Code != messages.CodeServerUnavailable || !strings.Contains(res.Error.Message, tt.wantSaid) {
				t.Fatalf("%s: answered %+v, want server_unavailable saying %q", tt.tool, res.Error, tt.wantSaid)
			}
			if delivered != 1 || res.Attempts != 1 || dead {
				t.Errorf("%s, call %d: answered on delivery %d after %d attempts (dead-lettered %v); want the first, after one, not dead-lettered",
					tt.tool, i, delivered, res.Attempts, dead)
			}
		}
		server, _, _ := strings.Cut(tt.tool, "__")
		if n, ok := listed.Load(server); !ok || n != 0 {
			t.Errorf("the catalog was not told that %q has no tools (%v, %v): whoever waits for every server's tools waits for it", server, n, ok)
		}
		if n := strings.Count(logs.String(), "server="+server); n != 1 {
			t.Errorf("the server %q is logged %d times, want once:\n%s", server, n, logs.String())
		}
	}
	// The other server is not held up by them.
	res, delivered, _ := execute(t, s, messages.ToolCall{Tool: "calc__add", Arguments: json.RawMessage(`{"a": 1, "b": 2}`)})
	if !res.Success || delivered != 1 || string(res.Result) != `{"sum":3}` {
		t.Errorf("the other server's call: %+v on delivery %d", res, delivered)
	}
}

// An http server that refuses the configured credentials (403, or 401 to the headers
// the configuration gives it: not a login that is missing), or whose TLS certificate
// does not verify, is told so, at once, and is not sent request after request: its calls
// send none (the pool tries it again in its own time), and the answer names the refusal.
func TestRefusedCredentialsAreFinalAtOnce(t *testing.T) {
	for _, tt := range []struct {
		name     string
		status   int
		typ      string
		tls      bool
		wantSaid string
	}{
		{name: "403 to the configured key", status: http.StatusForbidden, typ: "http", wantSaid: "HTTP 403 Forbidden"},
		{name: "401 to the configured key", status: http.StatusUnauthorized, typ: "http", wantSaid: "HTTP 401 Unauthorized to the configured headers"},
		{name: "401 to the configured key, sse", status: http.StatusUnauthorized, typ: "sse", wantSaid: "HTTP 401 Unauthorized to the configured headers"},
		{name: "a certificate nobody vouches for", typ: "http", tls: true, wantSaid: "x509"},
		{name: "403 to a plain JSON-RPC service", status: http.StatusForbidden, typ: "jsonrpc", wantSaid: "HTTP 403 Forbidden: this key may not use the workspace"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var calls, requests atomic.Int32
			h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return calcServer(&calls, func(*mcp.ServerSession) {}) }, nil)
			handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				requests.Add(1)
				if r.Header.Get("Authorization") != "Bearer right-key" {
					http.Error(w, "this key may not use the workspace", tt.status)
					return
				}
				h.ServeHTTP(w, r)
			})
			hs := httptest.NewUnstartedServer(handler)
			hs.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
			if tt.tls {
				hs.StartTLS()
			} else {
				hs.Start()
			}
			t.Cleanup(hs.Close)
			key := "Bearer wrong-key"
			if tt.tls {
				key = "Bearer right-key"
			}
			pool := calcPool(t, map[string]mcpwire.ServerConfig{
				"calc": {Type: tt.typ, URL: hs.URL, Headers: map[string]string{"Authorization": key}},
			}, &calls, nil)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := pool.Connect(ctx); err == nil {
				t.Fatal("connected")
			}
			connecting := requests.Load()
			s := &executor.Stage{Claims: &claimstest.Memory{}, RedeliveryDelay: time.Millisecond,
				Exec: &executor.Executor{Router: executor.NewRouter(executor.MCPBackend{Pool: pool})}}
			for i := range 3 {
				res, delivered, dead := execute(t, s, messages.ToolCall{Tool: "calc__add", Arguments: json.RawMessage(`{"a": 1, "b": 2}`)})
				if res.Success || res.Error.Code != messages.CodeServerUnavailable || !strings.Contains(res.Error.Message, tt.wantSaid) ||
					!strings.Contains(res.Error.Message, "configuration") || strings.Contains(res.Error.Message, "auth login") {
					t.Fatalf("answered %+v, want server_unavailable saying %q and the configuration", res.Error, tt.wantSaid)
				}
				if delivered != 1 || res.Attempts != 1 || dead {
					t.Errorf("call %d: answered on delivery %d after %d attempts (dead-lettered %v); want the first, after one", i, delivered, res.Attempts, dead)
				}
			}
			t.Logf("connecting sent %d requests", connecting)
			if n := requests.Load(); n != connecting || connecting > 4 {
				t.Errorf("the server got %d requests (%d while connecting); want the calls to send none", n, connecting)
			}
			if calls.Load() != 0 {
				t.Error("a call reached the tool")
			}
		})
	}
}

// A tools-folder tool's own timeout is its call's budget: a call that runs past it is
// answered timeout naming it (the tool was stopped: nothing may still complete), and is
// run once, read-only or not.
func TestFolderToolTimeoutIsItsBudget(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("shell tools")
	}
	dir, runs := t.TempDir(), t.TempDir()
	for _, tool := range []struct{ name, annotations string }{
		{"slow_write", `{}`},
		{"slow_read", `{"readOnlyHint": true}`},
	} {
		script := "#!/bin/sh\necho run >> \"$RUNS/" + tool.name + "\"\nsleep 60\n"
		manifest := `{"name": "` + tool.name + `", "inputSchema": {"type": "object"}, "annotations": ` + tool.annotations + `, "timeout": "2s"}`
		if err := os.WriteFile(filepath.Join(dir, tool.name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, tool.name+localtools.ManifestSuffix), []byte(manifest), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	folder, err := localtools.NewFolder(dir, &localtools.FolderOptions{Env: []string{"RUNS=" + runs}})
	if err != nil {
		t.Fatal(err)
	}
	reg := localtools.New()
	reg.AddFolder(folder)
	// The executor's own budget is a minute, with three attempts a call.
	s := &executor.Stage{Claims: &claimstest.Memory{}, RedeliveryDelay: time.Millisecond,
		Exec: &executor.Executor{Router: executor.NewRouter(executor.LocalBackend{Registry: reg}), Timeout: time.Minute}}
	var wg sync.WaitGroup
	for i, tool := range []string{"slow_write", "slow_read"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			call := messages.ToolCall{ID: "c/r/" + tool, ResponseID: "r", Conversation: "c", Index: i, Count: 2, Tool: tool, Arguments: json.RawMessage(`{}`)}
			res, delivered, _ := execute(t, s, call)
			if res.Success || res.Error.Code != messages.CodeTimeout || !strings.Contains(res.Error.Message, "2s") || strings.Contains(res.Error.Message, "1m0s") {
				t.Errorf("%s: answered %+v, want a timeout naming its 2s", tool, res.Error)
			}
			// Started once and never again. (On a busy machine the shell may not have
			// written its line before the 2 s ran out: 0 is not a second run.)
			data, _ := os.ReadFile(filepath.Join(runs, tool))
			if n := strings.Count(string(data), "run"); n > 1 || res.Attempts != 1 || delivered != 1 {
				t.Errorf("%s ran %d times (%d attempts, answered on delivery %d); want once, on the first", tool, n, res.Attempts, delivered)
			}
		}()
	}
	wg.Wait()
}

// Attempts count the requests that reached the server: a resend after a broken
// connection is one, and retry.maxAttempts bounds them across deliveries.
func TestAttemptsCountRequests(t *testing.T) {
	var calls atomic.Int32
	pool := calcPool(t, map[string]mcpwire.ServerConfig{
		"calc":  {Command: "in-memory"},
		"calc4": {Command: "in-memory", Retry: &mcpwire.RetryPolicy{MaxAttempts: 4}},
	}, &calls, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := pool.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	// One attempt per delivery: its time for retries is up at once.
	s := &executor.Stage{Claims: &claimstest.Memory{}, RedeliveryDelay: time.Millisecond,
		Exec: &executor.Executor{Router: executor.NewRouter(executor.MCPBackend{Pool: pool}),
			Retry: executor.RetryPolicy{InitialInterval: time.Millisecond, MaxElapsed: time.Nanosecond}}}

	res, _, _ := execute(t, s, messages.ToolCall{Tool: "calc__flaky_read", Arguments: json.RawMessage(`{}`)})
	if !res.Success || res.Attempts != 2 || calls.Load() != 2 {
		t.Errorf("a call sent again after its connection broke: success %v after %d attempts, the server got %d requests; want 2 and 2",
			res.Success, res.Attempts, calls.Load())
	}

	calls.Store(0)
	res, delivered, dead := execute(t, s, messages.ToolCall{ID: "c/r2/0", ResponseID: "r2", Conversation: "c", Count: 1,
		Tool: "calc4__always_drop", Arguments: json.RawMessage(`{}`)})
	if res.Success || res.Error.Code != messages.CodeServerUnavailable || !dead {
		t.Fatalf("answered %+v (dead-lettered %v), want server_unavailable and a dead letter", res.Error, dead)
	}
	if n := calls.Load(); n != 4 || res.Attempts != 4 {
		t.Errorf("retry.maxAttempts 4: the server got %d requests over %d deliveries, the answer says %d attempts; want 4 and 4", n, delivered, res.Attempts)
	}
}

// The same mistake in the arguments is invalid_arguments, and nothing is sent, whatever
// the name the model wrote: bare, qualified in any spelling, or a local tool of the same
// schema.
func TestBadArgumentsAreTheSameMistakeByEveryName(t *testing.T) {
	var calls atomic.Int32
	pool := calcPool(t, map[string]mcpwire.ServerConfig{"calc": {Command: "in-memory"}}, &calls, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := pool.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	tool, err := pool.Lookup(ctx, "calc__add")
	if err != nil {
		t.Fatal(err)
	}
	// A local tool of the same schema, of an in-process server "local": its shown name,
	// its qualified spellings and its bare name.
	reg := localtools.New()
	err = reg.Server("local").Add(localtools.Tool{Info: messages.ToolInfo{Name: "local_add", InputSchema: tool.InputSchema, ReadOnly: true},
		Run: func(context.Context, json.RawMessage) (json.RawMessage, error) {
			calls.Add(1)
			return nil, errors.New("the arguments were not checked")
		}})
	if err != nil {
		t.Fatal(err)
	}
	e := &executor.Executor{Router: executor.NewRouter(executor.LocalBackend{Registry: reg}, executor.MCPBackend{Pool: pool})}
	for _, name := range []string{"add", "calc__add", "mcp__calc__add", "calc::add", "local_add", "mcp__local__local_add", "local::local_add"} {
		res, _ := e.Execute(ctx, messages.ToolCall{Tool: name, Arguments: json.RawMessage(`{"a": "one", "b": 2}`)})
		if res.Success || res.Error.Code != messages.CodeInvalidArguments {
			t.Errorf("%s: answered %+v, want invalid_arguments", name, res.Error)
		}
	}
	if calls.Load() != 0 {
		t.Errorf("%d calls with bad arguments were sent", calls.Load())
	}
	if res, _ := e.Execute(ctx, messages.ToolCall{Tool: "add", Arguments: json.RawMessage(`{"a": 1, "b": 2}`)}); !res.Success {
		t.Errorf("good arguments: %+v", res.Error)
	}
}

// promise is what an answer would say to promise that the call will be tried again.
var promise = regexp.MustCompile(`(?i)will be (tried|retried|sent)( again)?\b|tried again in|retrying|try again in`)

// A final answer says what happened, never that something will happen that will not:
// the call is not tried again once it is answered, whatever failed.
func TestFinalAnswersPromiseNoRetry(t *testing.T) {
	var calls atomic.Int32
	pool := calcPool(t, map[string]mcpwire.ServerConfig{
		"calc":    {Command: "in-memory", Timeout: messages.Duration(300 * time.Millisecond)},
		"missing": {Command: "toolbus-test-no-such-command"},
		"down":    {Type: "http", URL: "http://127.0.0.1:" + closedPort(t) + "/mcp"},
	}, &calls, nil)
	gate := executor.NewBreaker(&executor.BreakerOptions{FailureThreshold: 1, CoolDown: time.Minute})
	s := &executor.Stage{Claims: &claimstest.Memory{}, RedeliveryDelay: time.Millisecond,
		Exec: &executor.Executor{Router: executor.NewRouter(executor.MCPBackend{Pool: pool}), Gate: gate,
			Retry: executor.RetryPolicy{InitialInterval: time.Millisecond, MaxInterval: time.Millisecond}}}
	for i, tool := range []string{"down__search", "down__search", "missing__search", "calc4__nothing", "calc__always_drop", "calc__add"} {
		args := `{}`
		if tool == "calc__add" {
			args = `{"a": []}`
		}
		res, _, _ := execute(t, s, messages.ToolCall{ID: "c/r/" + strconv.Itoa(i), ResponseID: "r", Conversation: "c", Index: i, Count: 6, Tool: tool, Arguments: json.RawMessage(args)})
		if res.Success {
			t.Fatalf("%s succeeded", tool)
		}
		t.Logf("%s: %s: %s", tool, res.Error.Code, res.Error.Message)
		if promise.MatchString(res.Error.Message) {
			t.Errorf("%s: the final answer promises a retry: %s", tool, res.Error.Message)
		}
	}
}

// TestClassify holds the rules of the one classification of failures, on plain values.
func TestClassify(t *testing.T) {
	remote := executor.Route{Server: "mcp:tickets", MCP: mcpwire.Tool{Name: "tickets__create", Server: "tickets", Remote: "create"}}
	readOnly := remote
	readOnly.MCP.ReadOnly, readOnly.Info.ReadOnly = true, true
	local := executor.Route{Server: "local", Info: messages.ToolInfo{Name: "report"}, Timeout: 2 * time.Second}
	misconfigured := func(err error) error { return fmt.Errorf("%w: tickets: %w", mcpwire.ErrUnavailable, err) }
	tests := []struct {
		name      string
		err       error
		route     executor.Route
		budget    time.Duration
		wantCode  messages.ErrorCode
		wantFinal bool
		wantSaid  string
	}{
		{name: "command not found", err: misconfigured(&exec.Error{Name: "ghost", Err: exec.ErrNotFound}), route: remote,
			wantCode: messages.CodeServerUnavailable, wantFinal: true, wantSaid: "cannot be used as configured"},
		{name: "not executable", err: misconfigured(&fs.PathError{Op: "fork/exec", Path: "/srv/ghost", Err: syscall.EACCES}), route: remote,
			wantCode: messages.CodeServerUnavailable, wantFinal: true, wantSaid: "permission denied"},
		{name: "a busy system is no configuration's fault", err: misconfigured(&fs.PathError{Op: "fork/exec", Path: "/srv/ghost", Err: syscall.EAGAIN}), route: remote,
			wantCode: messages.CodeServerUnavailable, wantSaid: "cannot be reached"},
		{name: "403", err: misconfigured(&mcpwire.StatusError{Status: http.StatusForbidden, Err: errors.New("Forbidden")}), route: remote,
			wantCode: messages.CodeServerUnavailable, wantFinal: true, wantSaid: "HTTP 403 Forbidden"},
		{name: "a certificate nobody vouches for", err: misconfigured(x509.UnknownAuthorityError{}), route: remote,
			wantCode: messages.CodeServerUnavailable, wantFinal: true, wantSaid: "x509"},
		{name: "connection refused", err: misconfigured(syscall.ECONNREFUSED), route: remote,
			wantCode: messages.CodeServerUnavailable, wantSaid: "cannot be reached"},
		{name: "needs a login", err: fmt.Errorf("%w: tickets: %w", mcpwire.ErrUnavailable, oauth.ErrNeedsLogin), route: remote,
			wantCode: messages.CodeServerUnavailable, wantFinal: true, wantSaid: "toolbus auth login tickets"},
		{name: "deadline, side effects, remote", err: context.DeadlineExceeded, route: remote, budget: time.Minute,
			wantCode: messages.CodeOutcomeUnknown, wantSaid: "time limit of 1m0s; it may still complete"},
		{name: "deadline before the server could be reached", err: fmt.Errorf("%w: tickets: not connected within the call's time: %w", mcpwire.ErrUnavailable, context.DeadlineExceeded),
			route: remote, budget: time.Minute, wantCode: messages.CodeTimeout, wantSaid: "was not sent: its server could not be reached within its time limit of 1m0s"},
		{name: "deadline, read-only", err: context.DeadlineExceeded, route: readOnly, budget: time.Minute,
			wantCode: messages.CodeTimeout, wantSaid: "time limit of 1m0s"},
		{name: "a tool stopped at its own limit", err: &messages.ToolError{Code: messages.CodeTimeout, Message: "did not finish within 1.998s", Stopped: true},
			route: local, budget: time.Minute, wantCode: messages.CodeTimeout, wantFinal: true, wantSaid: "within its time limit of 2s and was stopped"},
		{name: "invalid params", err: &mcpwire.ToolError{Code: -32602, Message: "want a ticket id"}, route: remote,
			wantCode: messages.CodeInvalidArguments, wantSaid: "want a ticket id"},
		{name: "isError", err: &mcpwire.ToolError{Message: "the printer is on fire"}, route: remote, wantCode: messages.CodeToolError, wantSaid: "on fire"},
		{name: "lost, side effects", err: fmt.Errorf("%w: tickets: create: EOF", mcpwire.ErrConnectionLost), route: remote,
			wantCode: messages.CodeOutcomeUnknown, wantSaid: "connection to the server"},
		{name: "lost, read-only", err: fmt.Errorf("%w: tickets: create: EOF", mcpwire.ErrConnectionLost), route: readOnly,
			wantCode: messages.CodeServerUnavailable, wantSaid: "connection to the server"},
		{name: "cancelled in process", err: context.Canceled, route: local, wantCode: messages.CodeOutcomeUnknown, wantSaid: "cancelled"},
		{name: "anything else", err: errors.New("disk full"), route: local, wantCode: messages.CodeToolError, wantSaid: "disk full"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := executor.Classify(tt.err, executor.Failed{Name: "t", Route: tt.route, Budget: tt.budget})
			if got.Code != tt.wantCode || got.Final != tt.wantFinal || !strings.Contains(got.Message, tt.wantSaid) {
				t.Errorf("Classify = %s (final %v): %s; want %s (final %v) saying %q", got.Code, got.Final, got.Message, tt.wantCode, tt.wantFinal, tt.wantSaid)
			}
			if got.Retryable() && got.Final {
				t.Error("final and retryable")
			}
			if promise.MatchString(got.Message) {
				t.Errorf("promises a retry: %s", got.Message)
			}
		})
	}
}
