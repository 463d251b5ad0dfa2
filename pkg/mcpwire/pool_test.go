package mcpwire_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolbus/toolbus/internal/mcptest"
	"github.com/toolbus/toolbus/pkg/mcpwire"
	"github.com/toolbus/toolbus/pkg/messages"
)

type addIn struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}

type addOut struct {
	Sum float64 `json:"sum"`
}

// testServer is an in-process MCP server with a tool for each kind of result.
func testServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "test"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "add", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, addOut, error) {
			return nil, addOut{Sum: in.A + in.B}, nil
		})
	text := func(name, text string) {
		s.AddTool(&mcp.Tool{Name: name, InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil
			})
	}
	text("greet", "hello")
	text("json_text", `{"ok": true}`)
	s.AddTool(&mcp.Tool{Name: "two_texts", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "a"}, &mcp.TextContent{Text: "b"}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "image", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{Data: []byte{1, 2}, MIMEType: "image/png"}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "fail", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, errors.New("the disk is full")
		})
	s.AddTool(&mcp.Tool{Name: "picky", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "want a ticket id"}
		})
	s.AddTool(&mcp.Tool{Name: "hang", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		})
	return s
}

// TestPoolCall reads every kind of answer the same way in memory (the SDK's client)
// and over streamable HTTP (toolbus's own tools/call, see TestHTTPCallsAreToolbusOwn).
func TestPoolCall(t *testing.T) {
	t.Run("in memory", func(t *testing.T) {
		testPoolCall(t, newPool(t, map[string]mcpwire.ServerConfig{"test": placeholder}, &mcpwire.Options{Dial: inMemory(testServer())}))
	})
	t.Run("streamable http", func(t *testing.T) {
		url, wire := serveHTTP(t, testServer())
		testPoolCall(t, newPool(t, map[string]mcpwire.ServerConfig{"test": {Type: "http", URL: url}}, nil))
		wire.allDirect(t)
	})
	t.Run("streamable http, answers as JSON", func(t *testing.T) {
		url, wire := serveHTTP(t, testServer(), &mcp.StreamableHTTPOptions{JSONResponse: true})
		testPoolCall(t, newPool(t, map[string]mcpwire.ServerConfig{"test": {Type: "http", URL: url}}, nil))
		wire.allDirect(t)
	})
	t.Run("streamable http, stateless", func(t *testing.T) {
		// A stateless go-sdk server speaks protocol 2026-07-28, whose calls the SDK sends.
		url, wire := serveHTTP(t, testServer(), &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
		testPoolCall(t, newPool(t, map[string]mcpwire.ServerConfig{"test": {Type: "http", URL: url}}, nil))
		wire.sentBy(t, false)
	})
}

func testPoolCall(t *testing.T, p *mcpwire.Pool) {
	tests := []struct {
		name        string
		tool        string
		args        string
		want        string
		wantContent []messages.Content
		wantErr     func(error) bool
	}{
		{name: "structured content", tool: "test__add", args: `{"a":1,"b":2}`, want: `{"sum":3}`},
		{name: "bare name", tool: "add", args: `{"a":1,"b":2}`, want: `{"sum":3}`},
		{name: "mcp alias", tool: "mcp__test__add", args: `{"a":1,"b":2}`, want: `{"sum":3}`},
		{name: "colon alias", tool: "test::add", args: `{"a":2,"b":2}`, want: `{"sum":4}`},
		{name: "text", tool: "greet", want: `"hello"`},
		{name: "json text", tool: "json_text", want: `{"ok": true}`},
		{name: "two texts", tool: "two_texts", want: `"a\nb"`},
		// An image is named for the model and kept, whatever the transport.
		{name: "content blocks", tool: "image", want: `"[image: image/png, 2 bytes, content 1]"`,
			wantContent: []messages.Content{{Type: "image", MimeType: "image/png", Data: "AQI=", Size: 2}}},
		{name: "isError", tool: "fail", wantErr: func(err error) bool {
			var te *mcpwire.ToolError
			return errors.As(err, &te) && te.Code == 0 && te.Message == "the disk is full"
		}},
		{name: "schema violation reported by the server", tool: "add", args: `{"a":"x"}`, wantErr: func(err error) bool {
			var te *mcpwire.ToolError
			return errors.As(err, &te) && te.Code == 0
		}},
		{name: "invalid params", tool: "picky", wantErr: func(err error) bool {
			var te *mcpwire.ToolError
			return errors.As(err, &te) && te.InvalidArguments() && te.Message == "want a ticket id"
		}},
		{name: "unknown tool", tool: "nope", wantErr: func(err error) bool { return errors.Is(err, mcpwire.ErrUnknownTool) }},
		{name: "unknown tool of a known server", tool: "test__nope", wantErr: func(err error) bool { return errors.Is(err, mcpwire.ErrUnknownTool) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var kept mcpwire.KeptContent
			out, err := p.Call(mcpwire.WithKeptContent(ctxT(t), &kept), tt.tool, json.RawMessage(tt.args))
			if !reflect.DeepEqual(kept.Content, tt.wantContent) {
				t.Errorf("content %+v, want %+v", kept.Content, tt.wantContent)
			}
			if tt.wantErr != nil {
				if err == nil || !tt.wantErr(err) {
					t.Fatalf("err = %v (result %s), not the error wanted", err, out)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tt.want {
				t.Errorf("result = %s, want %s", out, tt.want)
			}
		})
	}
}

func TestPoolCatalog(t *testing.T) {
	route := "b"
	p := newPool(t, map[string]mcpwire.ServerConfig{
		"a": {Command: "in-memory", BlockedTools: []string{"fail", "h*"}},
		"b": {Command: "in-memory", Prefix: "bee_", AllowedTools: []string{"add", "greet", "fail"}},
	}, &mcpwire.Options{Dial: inMemory(testServer()), Routes: map[string]*string{"greet": &route}})
	tools := p.Tools(ctxT(t))
	var names []string
	byName := map[string]mcpwire.Tool{}
	for _, tool := range tools {
		names = append(names, tool.Name)
		byName[tool.Name] = tool
	}
	want := []string{"a__add", "a__greet", "a__image", "a__json_text", "a__picky", "a__two_texts", "bee_add", "bee_fail", "greet"}
	if len(names) != len(want) {
		t.Fatalf("tools = %v, want %v", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("tools = %v, want %v", names, want)
		}
	}
	if add := byName["a__add"]; !add.ReadOnly || !add.Idempotent || add.Destructive || add.Remote != "add" {
		t.Errorf("a__add = %+v, want read-only and idempotent from its annotations", add)
	}
	if fail := byName["bee_fail"]; fail.ReadOnly || fail.Idempotent || fail.Retryable() {
		t.Errorf("bee_fail = %+v, want neither read-only nor idempotent", fail)
	}

	tests := []struct {
		name       string
		tool       string
		wantServer string
		wantErr    error
	}{
		{name: "route wins over two servers", tool: "greet", wantServer: "b"},
		{name: "qualified name of the other server", tool: "a__greet", wantServer: "a"},
		{name: "prefix", tool: "bee_add", wantServer: "b"},
		{name: "canonical name works besides the prefix", tool: "b__add", wantServer: "b"},
		{name: "bare name of two servers", tool: "add", wantErr: mcpwire.ErrAmbiguous},
		{name: "unique bare name", tool: "picky", wantServer: "a"},
		{name: "blocked", tool: "a__fail", wantErr: mcpwire.ErrNotAllowed},
		{name: "blocked by glob", tool: "a__hang", wantErr: mcpwire.ErrNotAllowed},
		{name: "not in the allow-list", tool: "b__image", wantErr: mcpwire.ErrNotAllowed},
		{name: "unknown", tool: "nope", wantErr: mcpwire.ErrUnknownTool},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := p.Lookup(ctxT(t), tt.tool)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Server != tt.wantServer {
				t.Errorf("server = %q, want %q", got.Server, tt.wantServer)
			}
		})
	}
}

func TestPoolGlobalAllowList(t *testing.T) {
	p := newPool(t, map[string]mcpwire.ServerConfig{"a": placeholder, "b": placeholder},
		&mcpwire.Options{Dial: inMemory(testServer()), AllowedTools: []string{"mcp__a__add", "b::gr*"}})
	var names []string
	for _, tool := range p.Tools(ctxT(t)) {
		names = append(names, tool.Name)
	}
	if len(names) != 2 || names[0] != "a__add" || names[1] != "b__greet" {
		t.Errorf("tools = %v, want [a__add b__greet]", names)
	}
}

func TestPoolListChanged(t *testing.T) {
	srv := testServer()
	var catalogs atomic.Int32
	p := newPool(t, map[string]mcpwire.ServerConfig{"test": placeholder}, &mcpwire.Options{
		Dial:      inMemory(srv),
		OnCatalog: func(string, []mcpwire.Tool) { catalogs.Add(1) },
	})
	ctx := ctxT(t)
	if _, err := p.Lookup(ctx, "late"); !errors.Is(err, mcpwire.ErrUnknownTool) {
		t.Fatalf("before the change: err = %v, want ErrUnknownTool", err)
	}
	srv.AddTool(&mcp.Tool{Name: "late", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "here"}}}, nil
		})
	eventually(t, "the new tool in the catalog", func() bool {
		_, err := p.Lookup(ctx, "test__late")
		return err == nil
	})
	out, err := p.Call(ctx, "late", nil)
	if err != nil || string(out) != `"here"` {
		t.Fatalf("late = %s, %v", out, err)
	}
	if got := p.Status()[0].Connects; got != 1 {
		t.Errorf("connects = %d, want 1: the change needs no reconnect", got)
	}
	if catalogs.Load() < 2 {
		t.Errorf("OnCatalog called %d times, want at connect and after the change", catalogs.Load())
	}
}

func TestPoolTimeout(t *testing.T) {
	p := newPool(t, map[string]mcpwire.ServerConfig{
		"slow": {Command: "in-memory", Timeout: messages.Duration(300 * time.Millisecond)},
	}, &mcpwire.Options{Dial: inMemory(testServer())})
	ctx := ctxT(t)
	_, err := p.Call(ctx, "hang", nil)
	if !errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
		t.Fatalf("err = %v, want the server's own deadline, before the test's", err)
	}
	// The session survives a tool that hung.
	if out, err := p.Call(ctx, "greet", nil); err != nil || string(out) != `"hello"` {
		t.Fatalf("after the timeout: %s, %v", out, err)
	}
	if got := p.Status()[0].Connects; got != 1 {
		t.Errorf("connects = %d, want 1", got)
	}
}

// restartable is an HTTP MCP endpoint whose server can be replaced, as a process restart
// does: every session of the old one is gone, and open connections are cut.
type restartable struct {
	srv     *httptest.Server
	handler atomic.Pointer[http.Handler]
	make    func() http.Handler
}

func newRestartable(t *testing.T, make func() http.Handler) *restartable {
	r := &restartable{make: make}
	h := make()
	r.handler.Store(&h)
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		(*r.handler.Load()).ServeHTTP(w, req)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *restartable) restart() {
	h := r.make()
	r.handler.Store(&h)
	r.srv.CloseClientConnections()
}

func TestPoolHTTPRestart(t *testing.T) {
	for _, tt := range []struct {
		name      string
		transport string
		handler   func() http.Handler
	}{
		{name: "streamable", transport: "http", handler: func() http.Handler {
			s := testServer()
			return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
		}},
		{name: "streamable, 400 for a forgotten session", transport: "http", handler: func() http.Handler {
			s := testServer()
			return forgetsWith400(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
		}},
		{name: "sse", transport: "sse", handler: func() http.Handler {
			s := testServer()
			return mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return s }, nil)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newRestartable(t, tt.handler)
			p := newPool(t, map[string]mcpwire.ServerConfig{"remote": {Type: tt.transport, URL: r.srv.URL}}, nil)
			ctx := ctxT(t)
			if out, err := p.Call(ctx, "add", json.RawMessage(`{"a":1,"b":1}`)); err != nil || string(out) != `{"sum":2}` {
				t.Fatalf("before the restart: %s, %v", out, err)
			}
			r.restart()
			// The first call may race the connection's end (and then ask again), but
			// it must not fail: the old session was gone before the call was sent.
			out, err := p.Call(ctx, "add", json.RawMessage(`{"a":2,"b":3}`))
			if err != nil || string(out) != `{"sum":5}` {
				t.Fatalf("after the restart: %s, %v", out, err)
			}
			if got := p.Status()[0].Connects; got != 2 {
				t.Errorf("connects = %d, want 2", got)
			}
		})
	}
}

// forgetsWith400 answers a request in a session h did not open as servers built on the
// TypeScript SDK's examples do (server-everything among them): 400 and a JSON-RPC error
// without an id, where the spec says 404.
func forgetsWith400(h http.Handler) http.Handler {
	var known sync.Map
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := r.Header.Get("Mcp-Session-Id"); id != "" {
			if _, ok := known.Load(id); !ok {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				io.WriteString(w, `{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"}}`)
				return
			}
		}
		h.ServeHTTP(sessionRecorder{w, &known}, r)
	})
}

// sessionRecorder notes the session ids a handler gives out.
type sessionRecorder struct {
	http.ResponseWriter
	known *sync.Map
}

func (w sessionRecorder) WriteHeader(code int) {
	w.record()
	w.ResponseWriter.WriteHeader(code)
}

func (w sessionRecorder) Write(b []byte) (int, error) {
	w.record()
	return w.ResponseWriter.Write(b)
}

func (w sessionRecorder) Flush() { w.ResponseWriter.(http.Flusher).Flush() }

func (w sessionRecorder) record() {
	if id := w.Header().Get("Mcp-Session-Id"); id != "" {
		w.known.Store(id, true)
	}
}

func TestPoolHeaders(t *testing.T) {
	s := testServer()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	var missing atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer sesame" {
			missing.Add(1)
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p := newPool(t, map[string]mcpwire.ServerConfig{"remote": {
		Type: "http", URL: srv.URL, Headers: map[string]string{"Authorization": "Bearer sesame"},
	}}, nil)
	if out, err := p.Call(ctxT(t), "greet", nil); err != nil || string(out) != `"hello"` {
		t.Fatalf("greet = %s, %v", out, err)
	}
	if missing.Load() != 0 {
		t.Errorf("%d requests went without the configured header", missing.Load())
	}
}

func TestPoolUnavailable(t *testing.T) {
	url := "http://127.0.0.1:" + itoa(mcptest.FreePort(t)) + "/mcp"
	p := newPool(t, map[string]mcpwire.ServerConfig{
		"down":  {Type: "http", URL: url},
		"down2": {Type: "jsonrpc", URL: url},
		"gone":  {Command: "/nonexistent/toolbus-test-server"},
	}, nil)
	ctx := ctxT(t)
	if err := p.Connect(ctx); err == nil {
		t.Fatal("Connect succeeded with every server down")
	}
	for _, name := range []string{"down__x", "down2__x", "gone__x"} {
		_, err := p.Call(ctx, name, nil)
		if !errors.Is(err, mcpwire.ErrUnavailable) {
			t.Errorf("%s: err = %v, want ErrUnavailable", name, err)
		}
	}
	for _, st := range p.Status() {
		if st.Connected || st.Err == nil {
			t.Errorf("%s: status %+v, want not connected with an error", st.Server, st)
		}
	}
}

func TestPoolClosed(t *testing.T) {
	p := newPool(t, map[string]mcpwire.ServerConfig{"test": placeholder}, &mcpwire.Options{Dial: inMemory(testServer())})
	if _, err := p.Call(ctxT(t), "greet", nil); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Call(ctxT(t), "greet", nil); !errors.Is(err, mcpwire.ErrClosed) {
		t.Errorf("after Close: err = %v, want ErrClosed", err)
	}
}

func TestPoolCloseDuringCall(t *testing.T) {
	p := newPool(t, map[string]mcpwire.ServerConfig{"test": placeholder}, &mcpwire.Options{Dial: inMemory(testServer())})
	if _, err := p.Call(ctxT(t), "greet", nil); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := p.Call(ctxT(t), "hang", nil)
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond) // let the call start; either way it must end
	closed := make(chan struct{})
	go func() {
		p.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatal("Close waited for a hanging call")
	}
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("the hanging call succeeded")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the call outlived the pool")
	}
}

// A server that never answers a POST, here the one carrying the answer to its own
// roots/list request (server-everything's SSE endpoint does so for a session it dropped),
// must not keep Close waiting.
func TestPoolCloseDespiteAnUnansweredPost(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "test"}, nil)
	s.AddTool(&mcp.Tool{Name: "roots", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second) // so that the test server can stop
			defer cancel()
			_, err := req.Session.ListRoots(ctx, nil)
			return nil, err
		})
	sse := mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return s }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			if bytes.Contains(body, []byte(`"roots"`)) && !bytes.Contains(body, []byte(`"method"`)) {
				<-r.Context().Done() // the answer to roots/list: never acknowledged
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		sse.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p, err := mcpwire.NewPool(map[string]mcpwire.ServerConfig{
		"remote": {Type: "sse", URL: srv.URL, Timeout: messages.Duration(time.Second)},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Call(ctxT(t), "roots", nil); err == nil {
		t.Fatal("roots answered without the client's answer reaching the server")
	}
	closed := make(chan struct{})
	go func() {
		p.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatal("Close still waits for an unanswered POST after 20s")
	}
}

func TestPoolServerComesUpLater(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nobody listens yet
	p := newPool(t, map[string]mcpwire.ServerConfig{"late": {
		Type: "http", URL: "http://" + addr + "/mcp",
		Retry: &mcpwire.RetryPolicy{InitialInterval: messages.Duration(20 * time.Millisecond), MaxInterval: messages.Duration(100 * time.Millisecond)},
	}}, nil)
	ctx := ctxT(t)
	if _, err := p.Call(ctx, "late__greet", nil); !errors.Is(err, mcpwire.ErrUnavailable) {
		t.Fatalf("before the server started: err = %v, want ErrUnavailable", err)
	}
	s := testServer()
	srv := httptest.NewUnstartedServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	if srv.Listener, err = net.Listen("tcp", addr); err != nil {
		t.Skipf("the port was taken meanwhile: %v", err)
	}
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(func() { p.Close() }) // first: the server waits for the pool's open stream
	// The pool keeps trying in the background; the catalog fills without any call.
	eventually(t, "the catalog of the late server", func() bool {
		_, err := p.Lookup(ctx, "greet")
		return err == nil
	})
	if out, err := p.Call(ctx, "greet", nil); err != nil || string(out) != `"hello"` {
		t.Fatalf("greet = %s, %v", out, err)
	}
}

func TestPoolUpdate(t *testing.T) {
	stdio := stdioServer(t)
	srv := testServer()
	cfg := map[string]mcpwire.ServerConfig{
		"keep":   placeholder,
		"remove": {Command: stdio},
		"change": {Command: "in-memory", BlockedTools: []string{"greet"}},
	}
	var catalogs sync.Map
	p := newPool(t, cfg, &mcpwire.Options{
		Dial: func(ctx context.Context, name string) (mcp.Transport, error) {
			if name == "remove" {
				return nil, nil
			}
			return inMemory(srv)(ctx, name)
		},
		OnCatalog: func(server string, tools []mcpwire.Tool) { catalogs.Store(server, len(tools)) },
	})
	ctx := ctxT(t)
	if err := p.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	if len(procs(t, os.Getpid(), 0)) != 1 {
		t.Fatal("the stdio server is not running")
	}
	if _, err := p.Lookup(ctx, "change__greet"); !errors.Is(err, mcpwire.ErrNotAllowed) {
		t.Fatalf("change__greet before: err = %v", err)
	}
	// A call to a server that stays is under way during the update.
	errc := make(chan error, 1)
	release := make(chan struct{})
	srv.AddTool(&mcp.Tool{Name: "wait", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			<-release
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
		})
	eventually(t, "the wait tool listed", func() bool { _, err := p.Lookup(ctx, "keep__wait"); return err == nil })
	go func() {
		_, err := p.Call(ctx, "keep__wait", nil)
		errc <- err
	}()

	bad := map[string]mcpwire.ServerConfig{"keep": placeholder, "new": {Type: "sse"}}
	if err := p.Update(bad, nil, nil, nil); err == nil {
		t.Fatal("an invalid configuration was applied")
	}
	route := "added"
	err := p.Update(map[string]mcpwire.ServerConfig{
		"keep":   placeholder,
		"change": placeholder,
		"added":  placeholder,
	}, map[string]*string{"add": &route}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-errc; err != nil {
		t.Errorf("the call under way to the unchanged server failed: %v", err)
	}
	if kids := procs(t, os.Getpid(), 0); len(kids) != 0 {
		t.Errorf("the removed stdio server %v is still running", kids)
	}
	if _, err := p.Lookup(ctx, "remove__pid"); !errors.Is(err, mcpwire.ErrUnknownTool) {
		t.Errorf("remove__pid: err = %v, want ErrUnknownTool", err)
	}
	if n, _ := catalogs.Load("remove"); n != 0 {
		t.Errorf("OnCatalog of the removed server: %v tools, want 0", n)
	}
	if out, err := p.Call(ctx, "change__greet", nil); err != nil || string(out) != `"hello"` {
		t.Errorf("change__greet after: %s, %v", out, err)
	}
	if got, err := p.Lookup(ctx, "add"); err != nil || got.Server != "added" {
		t.Errorf("the new route: %+v, %v", got, err)
	}
	for _, st := range p.Status() {
		if st.Server == "keep" && st.Connects != 1 {
			t.Errorf("the unchanged server reconnected: %+v", st)
		}
	}
}

// Calls in flight to one http server reuse their connections: 16 at a time open about
// 16 connections, not one per call (net/http's default transport keeps only 2 idle).
func TestPoolReusesConnections(t *testing.T) {
	s := testServer()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	srv := httptest.NewUnstartedServer(h)
	var conns, closed atomic.Int32
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			conns.Add(1)
		case http.StateClosed:
			closed.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	p := newPool(t, map[string]mcpwire.ServerConfig{"remote": {Type: "http", URL: srv.URL}}, nil)
	const calls, inFlight = 1000, 16
	var wg sync.WaitGroup
	var next atomic.Int32
	for range inFlight {
		wg.Go(func() {
			for next.Add(1) <= calls {
				// Each call has its own context, cancelled once it returns, as the
				// executor's are: the end of an answer's event stream is still read
				// after that, and its connection serves again.
				ctx, cancel := context.WithCancel(ctxT(t))
				out, err := p.Call(ctx, "greet", nil)
				cancel()
				if err != nil || string(out) != `"hello"` {
					t.Errorf("greet = %s, %v", out, err)
					return
				}
			}
		})
	}
	wg.Wait()
	// Closed while the pool runs: a connection dropped after a call instead of kept for
	// the next one (a slow machine may drop one that waited for its answer's end
	// longer than a second).
	if n, c := conns.Load(), closed.Load(); n > 4*inFlight || c > 2 {
		t.Errorf("%d connections for %d calls, %d in flight, %d of them closed: connections are not reused", n, calls, inFlight, c)
	}
	t.Logf("%d connections for %d calls, %d closed", conns.Load(), calls, closed.Load())
}

// A server that accepts connections and never answers delays only the names it could
// own: a tool another server listed resolves at once, and a name nobody has waits no
// longer than the caller's context, while the silent server's first attempt is still
// under way.
func TestPoolLookupDoesNotWaitForASilentServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held sync.WaitGroup
	stop := make(chan struct{})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held.Go(func() { <-stop; c.Close() }) // accepted, never answered
		}
	}()
	t.Cleanup(func() { ln.Close(); close(stop); held.Wait() })
	srv := testServer()
	p := newPool(t, map[string]mcpwire.ServerConfig{
		"fast":   {Command: "in-memory"},
		"silent": {Type: "http", URL: "http://" + ln.Addr().String() + "/mcp", Timeout: messages.Duration(time.Hour)},
	}, &mcpwire.Options{Dial: func(ctx context.Context, server string) (mcp.Transport, error) {
		if server != "fast" {
			return nil, nil
		}
		return inMemory(srv)(ctx, server)
	}})
	silentPending := func() bool {
		for _, st := range p.Status() {
			if st.Server == "silent" {
				return !st.Connected && st.Err == nil
			}
		}
		return false
	}
	start, cancelStart := context.WithTimeout(context.Background(), 10*time.Millisecond)
	p.Lookup(start, "greet") // starts the pool
	cancelStart()
	eventually(t, "fast listed", func() bool {
		for _, st := range p.Status() {
			if st.Server == "fast" && st.Connected {
				return true
			}
		}
		return false
	})
	wait, cancelWait := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelWait()
	tool, err := p.Lookup(wait, "greet")
	if err != nil || tool.Server != "fast" {
		t.Fatalf("greet resolved to %+v, %v", tool, err)
	}
	if wait.Err() != nil {
		t.Fatal("the lookup of a tool another server listed waited for the silent server until its context ended")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := p.Lookup(ctx, "nobody_has_this"); !errors.Is(err, mcpwire.ErrUnknownTool) {
		t.Fatalf("unknown name: err = %v, want ErrUnknownTool", err)
	}
	if !silentPending() {
		t.Fatal("the silent server answered; the test proves nothing")
	}
}

// An HTTP+SSE session speaks 2025-11-25, the last protocol that has the transport: the
// client sends initialize and never server/discover, which a go-sdk SSE server sometimes
// answers for protocols its transport cannot serve (it reads its session's versions
// before it has set them).
func TestSSESessionsSpeakTheLastSSEProtocol(t *testing.T) {
	sse := mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return testServer() }, nil)
	var mu sync.Mutex
	var methods []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			var m struct {
				Method string `json:"method"`
			}
			if json.Unmarshal(body, &m) == nil && m.Method != "" {
				mu.Lock()
				methods = append(methods, m.Method)
				mu.Unlock()
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		sse.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	r := mcpwire.Probe(ctxT(t), "s", mcpwire.ServerConfig{Type: "sse", URL: srv.URL}, nil)
	if r.Err != nil || r.Protocol != "2025-11-25" || r.Tools == 0 {
		t.Fatalf("probe: protocol %q, %d tools, %v; want 2025-11-25", r.Protocol, r.Tools, r.Err)
	}
	mu.Lock()
	defer mu.Unlock()
	if slices.Contains(methods, "server/discover") || !slices.Contains(methods, "initialize") {
		t.Errorf("the client sent %v; want initialize and no server/discover", methods)
	}
}

// A server's calls take turns when its configuration bounds them (concurrency): eight
// calls at once of a server that holds each for a while overlap there without the
// bound, never more than the bound with it, and all are answered. A call whose time
// runs out while it waits for its turn was never sent: ErrUnavailable.
func TestServerConcurrency(t *testing.T) {
	for _, tt := range []struct {
		name        string
		concurrency int
		overlap     func(int) bool
	}{
		{"unbounded", 0, func(n int) bool { return n > 1 }},
		{"one at a time", 1, func(n int) bool { return n == 1 }},
		{"two at a time", 2, func(n int) bool { return n >= 1 && n <= 2 }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var running, most atomic.Int32
			release := make(chan struct{})
			srv := mcp.NewServer(&mcp.Implementation{Name: "slow"}, nil)
			srv.AddTool(&mcp.Tool{Name: "hold", InputSchema: map[string]any{"type": "object"}},
				func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					n := running.Add(1)
					defer running.Add(-1)
					for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
					}
					select { // held until released
					case <-release:
					case <-ctx.Done():
					}
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
				})
			cfg := placeholder
			cfg.Concurrency, cfg.Sessions = tt.concurrency, "shared"
			p := newPool(t, map[string]mcpwire.ServerConfig{"slow": cfg}, &mcpwire.Options{Dial: inMemory(srv)})
			ctx := ctxT(t)
			if err := p.Connect(ctx); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for range 8 {
				wg.Go(func() {
					if out, err := p.Call(ctx, "hold", nil); err != nil || string(out) != `"done"` {
						errs <- fmt.Errorf("%s, %v", out, err)
					}
				})
			}
			if tt.concurrency == 0 {
				// Unbounded, every call reaches the server while the first is held.
				eventually(t, "eight calls running at once", func() bool { return running.Load() == 8 })
			} else {
				// Bounded, as many as it allows reach the server and are held; the others,
				// given a moment, must still be waiting for their turn.
				eventually(t, "the calls allowed running", func() bool { return int(running.Load()) == tt.concurrency })
				time.Sleep(50 * time.Millisecond)
			}
			close(release)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			if n := int(most.Load()); !tt.overlap(n) {
				t.Errorf("%d calls ran at once at the server, with concurrency %d", n, tt.concurrency)
			}
		})
	}
	t.Run("no turn in time", func(t *testing.T) {
		hold, started := make(chan struct{}), make(chan struct{}, 8)
		defer close(hold)
		srv := mcp.NewServer(&mcp.Implementation{Name: "slow"}, nil)
		srv.AddTool(&mcp.Tool{Name: "hold", InputSchema: map[string]any{"type": "object"}},
			func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				started <- struct{}{}
				select {
				case <-hold:
				case <-ctx.Done():
				}
				return &mcp.CallToolResult{}, nil
			})
		cfg := placeholder
		cfg.Concurrency, cfg.Sessions = 1, "shared"
		p := newPool(t, map[string]mcpwire.ServerConfig{"slow": cfg}, &mcpwire.Options{Dial: inMemory(srv)})
		ctx := ctxT(t)
		if err := p.Connect(ctx); err != nil {
			t.Fatal(err)
		}
		first, cancelFirst := context.WithCancel(ctx)
		defer cancelFirst()
		go p.Call(first, "hold", nil) //nolint:errcheck // held until the test ends
		<-started
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if _, err := p.Call(short, "hold", nil); !errors.Is(err, mcpwire.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("a call that found no turn: %v; want ErrUnavailable and the deadline", err)
		}
		if len(started) != 0 {
			t.Error("the call that found no turn reached the server")
		}
	})
}
