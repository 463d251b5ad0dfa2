package mcpwire_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolbus/toolbus/pkg/mcpwire"
)

// A url without a type that fell back to HTTP+SSE is checked as such: the live check
// says the session's transport is sse, where the configuration says http; a server
// configured as sse needs no saying.
func TestCheckSaysTheTransportFallenBackTo(t *testing.T) {
	ts := httptest.NewServer(mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return testServer() }, nil))
	t.Cleanup(ts.Close)
	p := newPool(t, map[string]mcpwire.ServerConfig{"cursor": {URL: ts.URL}, "typed": {Type: "sse", URL: ts.URL}}, nil)
	ctx := ctxT(t)
	if err := p.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	for server, want := range map[string]string{"cursor": "sse", "typed": ""} {
		r, live := p.Check(ctx, server, time.Now())
		if live != mcpwire.Checked || r.Err != nil || r.Transport != want {
			t.Errorf("%s: %+v (%v), want transport %q", server, r, live, want)
		}
	}
}
