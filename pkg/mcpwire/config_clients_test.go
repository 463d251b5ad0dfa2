package mcpwire_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolbus/toolbus/pkg/mcpwire"
)

// Entries as lollms writes them (lollms_client's remote_mcp binding: "server_url" and
// "auth_config", reached over streamable HTTP), and the other clients' spellings of
// url, type and the tool lists.

// A lollms entry reaches its server over streamable HTTP, sending its auth_config in
// the header lollms sends it in: the server sees the credential (issue 52: it logged
// auth=None, and toolbus refused the entry as a stdio server without a command).
func TestLollmsAuthConfigIsSent(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]string{} // the header each server got, by path
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return testServer() }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		switch r.URL.Path {
		case "/bearer":
			seen[r.URL.Path] = r.Header.Get("Authorization")
		case "/key":
			seen[r.URL.Path] = r.Header.Get("X-Api-Key")
		case "/named":
			seen[r.URL.Path] = r.Header.Get("X-Kb-Token")
		}
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	var servers map[string]mcpwire.ServerConfig
	if err := json.Unmarshal([]byte(`{
		"bearer": {"server_url": "`+ts.URL+`/bearer", "auth_config": {"type": "bearer", "token": "lollms-tok-123"}},
		"key":    {"server_url": "`+ts.URL+`/key", "auth_config": {"type": "api_key", "key": "lollms-key-456"}},
		"named":  {"server_url": "`+ts.URL+`/named", "auth_config": {"type": "api_key", "key": "lollms-key-789", "header_name": "X-KB-Token"}},
		"none":   {"server_url": "`+ts.URL+`/none", "auth_config": {}}}`), &servers); err != nil {
		t.Fatal(err)
	}
	for name, s := range servers {
		if err := s.Validate(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if s.Transport() != mcpwire.TransportHTTP || s.FallsBackToSSE() {
			t.Errorf("%s: transport %s, falls back to SSE %v; lollms speaks streamable HTTP only", name, s.Transport(), s.FallsBackToSSE())
		}
	}
	p := newPool(t, servers, nil)
	ctx := ctxT(t)
	for name := range servers {
		if out, err := p.Call(ctx, name+"__greet", nil); err != nil || string(out) != `"hello"` {
			t.Fatalf("%s__greet = %s, %v", name, out, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for path, want := range map[string]string{"/bearer": "Bearer lollms-tok-123", "/key": "lollms-key-456", "/named": "lollms-key-789"} {
		if seen[path] != want {
			t.Errorf("%s: the server got %q, want %q", path, seen[path], want)
		}
	}
}

// An auth_config toolbus cannot send as lollms does is an error naming it, never a
// server reached without its credential.
func TestLollmsAuthConfigRefused(t *testing.T) {
	for entry, want := range map[string]string{
		`{"server_url": "http://h/mcp", "auth_config": {"type": "oauth2", "token": "t-123456"}}`:                                    `auth_config.type: "oauth2" is not an auth_config type`,
		`{"server_url": "http://h/mcp", "auth_config": {"type": "bearer", "token": ""}}`:                                            `auth_config.token: a bearer auth_config needs a token`,
		`{"server_url": "http://h/mcp", "auth_config": {"type": "api_key"}}`:                                                        `auth_config.key: an api_key auth_config needs a key`,
		`{"server_url": "http://h/mcp", "auth_config": {"token": "t-123456"}}`:                                                      `auth_config.type: an auth_config with a credential needs a type`,
		`{"server_url": "http://h/mcp", "auth_config": {"type": "bearer", "token": "a"}, "headers": {"authorization": "Bearer b"}}`: `auth_config: headers already hold authorization`,
		`{"command": "x", "auth_config": {"type": "bearer", "token": "a"}}`:                                                         `auth_config: only a remote server`,
		`{"url": "http://a/mcp", "server_url": "http://b/mcp"}`:                                                                     `server_url: "http://b/mcp" is not the url given`,
		`{"type": "sse", "transportType": "stdio", "url": "http://a/sse"}`:                                                          `transportType: "stdio" is not the type given`,
	} {
		var c mcpwire.ServerConfig
		if err := json.Unmarshal([]byte(entry), &c); err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: Validate = %v, want %q", entry, err, want)
		}
	}
}

// Other clients' spellings: Windsurf's serverUrl (either HTTP transport, like a bare
// url), Gemini CLI's httpUrl (streamable HTTP) and includeTools/excludeTools, Cline's
// transportType, LangChain's transport, Roo Code's disabledTools.
func TestOtherClientsSpellings(t *testing.T) {
	var servers map[string]mcpwire.ServerConfig
	if err := json.Unmarshal([]byte(`{
		"windsurf": {"serverUrl": "https://w.example/mcp"},
		"gemini":   {"httpUrl": "https://g.example/mcp", "includeTools": ["a"], "excludeTools": ["b"]},
		"cline":    {"url": "https://c.example/sse", "transportType": "sse"},
		"langchain": {"url": "https://l.example/mcp", "transport": "streamable_http"},
		"roo":      {"command": "x", "disabledTools": ["c"], "blockedTools": ["d"]}}`), &servers); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]mcpwire.Transport{"windsurf": mcpwire.TransportHTTP, "gemini": mcpwire.TransportHTTP,
		"cline": mcpwire.TransportSSE, "langchain": mcpwire.TransportHTTP, "roo": mcpwire.TransportStdio} {
		s := servers[name]
		if err := s.Validate(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if s.Transport() != want {
			t.Errorf("%s: transport %s, want %s", name, s.Transport(), want)
		}
	}
	if !servers["windsurf"].FallsBackToSSE() || servers["gemini"].FallsBackToSSE() {
		t.Errorf("fallback to SSE: windsurf %v (want true), gemini %v (want false)", servers["windsurf"].FallsBackToSSE(), servers["gemini"].FallsBackToSSE())
	}
	if g := servers["gemini"]; strings.Join(g.AllowedTools, ",") != "a" || strings.Join(g.BlockedTools, ",") != "b" {
		t.Errorf("gemini lists: %q, %q", g.AllowedTools, g.BlockedTools)
	}
	if r := servers["roo"]; strings.Join(r.BlockedTools, ",") != "d,c" {
		t.Errorf("roo blocked: %q", r.BlockedTools)
	}
}
