package mcpwire_test

import (
	"encoding/json"
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
