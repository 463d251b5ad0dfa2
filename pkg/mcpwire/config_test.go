package mcpwire_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/toolbus/toolbus/pkg/mcpwire"
)

func TestServerConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		json    string
		want    mcpwire.Transport
		wantErr bool
	}{
		{name: "stdio", json: `{"command":"npx","args":["-y","x"],"env":{"A":"1"},"cwd":"/tmp"}`, want: mcpwire.TransportStdio},
		{name: "http", json: `{"type":"http","url":"https://x.example/mcp","headers":{"A":"b"}}`, want: mcpwire.TransportHTTP},
		{name: "streamable-http spelling", json: `{"type":"streamable-http","url":"http://x/mcp"}`, want: mcpwire.TransportHTTP},
		{name: "url without type", json: `{"url":"http://x/mcp"}`, want: mcpwire.TransportHTTP},
		{name: "sse", json: `{"type":"sse","url":"http://x/sse"}`, want: mcpwire.TransportSSE},
		{name: "jsonrpc", json: `{"type":"jsonrpc","url":"http://x/rpc","timeout":"5s","retry":{"maxAttempts":5}}`, want: mcpwire.TransportJSONRPC},
		{name: "stdio without command", json: `{"type":"stdio"}`, wantErr: true},
		{name: "unknown type", json: `{"type":"carrier-pigeon","url":"http://x"}`, wantErr: true},
		{name: "bad url", json: `{"type":"sse","url":"ftp://x"}`, wantErr: true},
		{name: "negative timeout", json: `{"command":"x","timeout":-1}`, wantErr: true},
		{name: "bad glob", json: `{"command":"x","blockedTools":["["]}`, wantErr: true},
		{name: "bad prefix", json: `{"command":"x","prefix":"a b"}`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c mcpwire.ServerConfig
			if err := json.Unmarshal([]byte(tt.json), &c); err != nil {
				t.Fatal(err)
			}
			err := c.Validate()
			if (err != nil) != tt.wantErr {
				t.Fatalf("Validate() = %v, wantErr %v", err, tt.wantErr)
			}
			if err == nil && c.Transport() != tt.want {
				t.Errorf("Transport() = %q, want %q", c.Transport(), tt.want)
			}
		})
	}
}

func TestServerConfigDefaults(t *testing.T) {
	var c mcpwire.ServerConfig
	if c.CallTimeout() != 60*time.Second || c.MaxAttempts() != 3 || c.Refresh() != 5*time.Minute || !c.IsEnabled() {
		t.Errorf("defaults: timeout %v, attempts %d, refresh %v, enabled %v", c.CallTimeout(), c.MaxAttempts(), c.Refresh(), c.IsEnabled())
	}
	if err := json.Unmarshal([]byte(`{"timeout":2.5,"retry":{"initialInterval":"1s","maxInterval":"4s"},"enabled":false}`), &c); err != nil {
		t.Fatal(err)
	}
	if c.CallTimeout() != 2500*time.Millisecond || c.IsEnabled() {
		t.Errorf("timeout %v, enabled %v", c.CallTimeout(), c.IsEnabled())
	}
	b := c.Backoff()
	if b.InitialInterval != time.Second || b.MaxInterval != 4*time.Second || b.MaxElapsedTime != 0 {
		t.Errorf("backoff %+v", b)
	}
	// The JSON shape round-trips.
	out, _ := json.Marshal(c)
	var back mcpwire.ServerConfig
	if err := json.Unmarshal(out, &back); err != nil || back.CallTimeout() != c.CallTimeout() {
		t.Errorf("round trip of %s: %v", out, err)
	}
}

// The seed's way of naming a JSON-RPC service, and tools declared for a server that
// cannot list them.
func TestHostPortEndpointAndDeclaredTools(t *testing.T) {
	var c mcpwire.ServerConfig
	err := json.Unmarshal([]byte(`{"host": "tickets.internal", "port": 8000, "endpoint": "/mcp/v1",
	  "tools": [{"name": "create_ticket", "input_schema": {"type": "object", "required": ["title"]}},
	            {"name": "get_ticket_status", "parameters": {"type": "object"}},
	            {"name": "ping"}]}`), &c)
	if err != nil {
		t.Fatal(err)
	}
	if c.URL != "http://tickets.internal:8000/mcp/v1" || c.Transport() != mcpwire.TransportJSONRPC {
		t.Errorf("url %q, transport %q", c.URL, c.Transport())
	}
	if len(c.Tools) != 3 || string(c.Tools[0].InputSchema) != `{"type": "object", "required": ["title"]}` ||
		string(c.Tools[1].InputSchema) != `{"type": "object"}` || c.Tools[2].InputSchema != nil {
		t.Errorf("declared tools %+v", c.Tools)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct{ tools, want string }{
		{`[{"description": "no name"}]`, "needs a name"},
		{`[{"name": "a"}, {"name": "a"}]`, "declared twice"},
		{`[{"name": "a", "inputSchema": {"type": 7}}]`, "inputSchema"},
	} {
		var c mcpwire.ServerConfig
		if err := json.Unmarshal([]byte(`{"host": "h", "tools": `+bad.tools+`}`), &c); err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("tools %s: Validate = %v, want %q", bad.tools, err, bad.want)
		}
	}
	// An explicit url and type win.
	var h mcpwire.ServerConfig
	if err := json.Unmarshal([]byte(`{"type": "http", "url": "http://a/mcp", "host": "b"}`), &h); err != nil || h.URL != "http://a/mcp" || h.Transport() != mcpwire.TransportHTTP {
		t.Errorf("explicit url: %+v %v", h, err)
	}
}
