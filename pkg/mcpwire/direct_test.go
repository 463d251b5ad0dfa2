package mcpwire_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolbus/toolbus/pkg/mcpwire"
)

// wire records the ids of the tools/call requests a server received.
type wire struct {
	mu  sync.Mutex
	ids []string
	// cancelled are the request ids of the notifications/cancelled received.
	cancelled []string
}

// allDirect fails the test unless every tools/call went out as toolbus's own request
// (a string id "toolbus-N"; the SDK's client numbers its requests).
func (w *wire) allDirect(t *testing.T) { t.Helper(); w.sentBy(t, true) }

// sentBy fails the test unless every tools/call was toolbus's own (direct) or the
// SDK's.
func (w *wire) sentBy(t *testing.T, direct bool) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.ids) == 0 {
		t.Fatal("no tools/call reached the server")
	}
	for _, id := range w.ids {
		if own := strings.HasPrefix(id, `"toolbus-`); own != direct {
			t.Errorf("a tools/call with id %s: toolbus's own %v, want %v", id, own, direct)
		}
	}
}

// serveHTTP serves srv over streamable HTTP (the go-sdk's handler, with opts) and
// returns its URL.
func serveHTTP(t *testing.T, srv *mcp.Server, opts ...*mcp.StreamableHTTPOptions) (string, *wire) {
	t.Helper()
	w := &wire{}
	var o *mcp.StreamableHTTPOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, o)
	ts := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Params struct {
					RequestID json.RawMessage `json:"requestId"`
				} `json:"params"`
			}
			if json.Unmarshal(body, &m) == nil {
				w.mu.Lock()
				switch m.Method {
				case "tools/call":
					w.ids = append(w.ids, string(m.ID))
				case "notifications/cancelled":
					w.cancelled = append(w.cancelled, string(m.Params.RequestID))
				}
				w.mu.Unlock()
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(rw, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL, w
}

// TestHTTPCallAnswersServerRequests: a server that asks toolbus for its roots, pings it,
// asks it to sample (which toolbus does not offer) and logs, all during a tools/call
// over streamable HTTP, is answered as the SDK's client answers, and the call completes.
func TestHTTPCallAnswersServerRequests(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "asking"}, nil)
	srv.AddTool(&mcp.Tool{Name: "ask", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var out []string
		roots, err := req.Session.ListRoots(ctx, nil)
		if err != nil {
			return nil, err
		}
		for _, r := range roots.Roots {
			out = append(out, "root "+r.URI)
		}
		if err := req.Session.Ping(ctx, nil); err != nil {
			return nil, err
		}
		out = append(out, "pinged")
		_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: "working"})
		_, err = req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 1, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}})
		out = append(out, fmt.Sprintf("sampling: %v", err))
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(out, "; ")}}}, nil
	})
	url, w := serveHTTP(t, srv)
	root := t.TempDir()
	p := newPool(t, map[string]mcpwire.ServerConfig{"s": {Type: "http", URL: url, Roots: []string{root}}}, nil)
	out, err := p.Call(ctxT(t), "ask", nil)
	if err != nil {
		t.Fatal(err)
	}
	var text string
	if err := json.Unmarshal(out, &text); err != nil {
		t.Fatalf("result %s: %v", out, err)
	}
	for _, want := range []string{"root file://" + root, "pinged", "sampling: ", "not found"} {
		if !strings.Contains(text, want) {
			t.Errorf("result %q lacks %q", text, want)
		}
	}
	w.allDirect(t)
}

// TestHTTPCallCancelled: a call given up while the tool runs tells the server, which
// stops the tool (notifications/cancelled), as the SDK's client does.
func TestHTTPCallCancelled(t *testing.T) {
	started, stopped := make(chan struct{}), make(chan error, 1)
	srv := mcp.NewServer(&mcp.Implementation{Name: "slow"}, nil)
	srv.AddTool(&mcp.Tool{Name: "wait", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		close(started)
		<-ctx.Done()
		stopped <- ctx.Err()
		return nil, ctx.Err()
	})
	url, w := serveHTTP(t, srv)
	p := newPool(t, map[string]mcpwire.ServerConfig{"s": {Type: "http", URL: url}}, nil)
	ctx, cancel := context.WithCancel(ctxT(t))
	go func() {
		<-started
		cancel()
	}()
	if _, err := p.Call(ctx, "wait", nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want it cancelled", err)
	}
	select {
	case err := <-stopped:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the tool stopped with %v, want it cancelled", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the tool never stopped")
	}
	// The connection's end stops the go-sdk's tool too; the notification is what tells
	// a server behind a proxy that keeps the connection.
	eventually(t, "notifications/cancelled of the call", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.cancelled) == 1 && len(w.ids) == 1 && w.cancelled[0] == w.ids[0]
	})
	w.allDirect(t)
}

// TestHTTPCallBounded: an answer over maxMessageBytes fails the call instead of being
// read whole; under the bound it passes.
func TestHTTPCallBounded(t *testing.T) {
	big := strings.Repeat("x", 100<<10)
	srv := mcp.NewServer(&mcp.Implementation{Name: "big"}, nil)
	srv.AddTool(&mcp.Tool{Name: "big", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: big}}}, nil
	})
	url, _ := serveHTTP(t, srv)
	p := newPool(t, map[string]mcpwire.ServerConfig{
		"small": {Type: "http", URL: url, MaxMessageBytes: 16 << 10},
		"large": {Type: "http", URL: url},
	}, nil)
	if out, err := p.Call(ctxT(t), "small__big", nil); err == nil || !strings.Contains(err.Error(), "over 16384 bytes") {
		t.Errorf("small: %.40s, %v; want an error over the bound", out, err)
	}
	if out, err := p.Call(ctxT(t), "large__big", nil); err != nil || len(out) != len(big)+2 {
		t.Errorf("large: %d bytes, %v", len(out), err)
	}
}

// handServer is a hand-written streamable HTTP server of one session ("s1") and one
// tool, "poll", for what the go-sdk's server does not do: call answers a tools/call
// (id is its JSON-RPC id) and get a GET (nil: 405).
func handServer(t *testing.T, call func(w http.ResponseWriter, r *http.Request, id string), get http.HandlerFunc) string {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && get != nil {
			get(w, r)
			return
		}
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		body, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(body, &m)
		w.Header().Set("Mcp-Session-Id", "s1")
		switch m.Method {
		case "initialize":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"hand","version":"1"}}}`, m.ID)
		case "tools/list":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"poll","inputSchema":{"type":"object"}}]}}`, m.ID)
		case "tools/call":
			call(w, r, string(m.ID))
		default:
			if len(m.ID) == 0 { // a notification
				w.WriteHeader(http.StatusAccepted)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`, m.ID)
		}
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// answer is an event carrying the result "text" for the call id.
func answer(id, text string) string {
	return fmt.Sprintf("data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[{\"type\":\"text\",\"text\":%q}]}}\n\n", id, text)
}

// TestHTTPCallResumesItsStream: a server that ends the stream of a tools/call before
// the answer, having given its events ids (SEP-1699 polling), is asked for the rest with
// Last-Event-ID, and the call gets its answer.
func TestHTTPCallResumesItsStream(t *testing.T) {
	var mu sync.Mutex
	var resumedFrom, resumeSession, pending string
	var closedByCall bool
	callCtx := ctxT(t)
	url := handServer(t, func(w http.ResponseWriter, _ *http.Request, id string) {
		mu.Lock()
		pending = id
		mu.Unlock()
		// A priming event with an id and a short retry, then the end of the stream.
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "id: e1\nretry: 10\ndata: \n\n")
	}, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		resumedFrom, resumeSession = r.Header.Get("Last-Event-ID"), r.Header.Get("Mcp-Session-Id")
		id := pending
		mu.Unlock()
		if resumedFrom == "" {
			w.WriteHeader(http.StatusMethodNotAllowed) // no standalone stream
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "id: e2\n"+answer(id, "resumed"))
		// A GET stream stays open after the answer, as the MCP conformance suite's
		// server keeps it: the call must not wait for its end.
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		mu.Lock()
		closedByCall = callCtx.Err() == nil
		mu.Unlock()
	})
	p := newPool(t, map[string]mcpwire.ServerConfig{"s": {Type: "http", URL: url}}, nil)
	out, err := p.Call(callCtx, "poll", nil)
	if err != nil || string(out) != `"resumed"` {
		t.Fatalf("result %s, %v; want the resumed answer", out, err)
	}
	eventually(t, "the GET stream closed by the call, not by its deadline", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return closedByCall
	})
	mu.Lock()
	defer mu.Unlock()
	if resumedFrom != "e1" || resumeSession != "s1" {
		t.Errorf("resumed from %q in session %q, want e1 in s1", resumedFrom, resumeSession)
	}
	if !strings.HasPrefix(pending, `"toolbus-`) {
		t.Errorf("the call's id is %s, not toolbus's own", pending)
	}
}

// TestHTTPCallDoesNotWaitForItsStream: a server that keeps the stream of a tools/call
// open after the answer (the spec says it SHOULD close it) does not hold the call.
func TestHTTPCallDoesNotWaitForItsStream(t *testing.T) {
	mcpwire.SetFinishWait(t, time.Hour) // the stream's rest is read for as long as it takes
	released := make(chan struct{})
	url := handServer(t, func(w http.ResponseWriter, r *http.Request, id string) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, answer(id, "done"))
		w.(http.Flusher).Flush()
		select {
		case <-released: // the call returned: end the stream
		case <-r.Context().Done():
		}
	}, nil)
	p := newPool(t, map[string]mcpwire.ServerConfig{"s": {Type: "http", URL: url}}, nil)
	ctx := ctxT(t)
	out, err := p.Call(ctx, "poll", nil)
	close(released)
	if err != nil || string(out) != `"done"` {
		t.Fatalf("result %s, %v", out, err)
	}
	if ctx.Err() != nil {
		t.Fatal("the call returned only when its time ran out: it waited for the stream's end")
	}
}
