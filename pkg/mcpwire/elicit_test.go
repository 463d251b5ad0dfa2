package mcpwire_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolbus/toolbus/pkg/mcpwire"
	"github.com/toolbus/toolbus/pkg/mcpwire/oauth"
)

// elicitingServer has one tool, "book", that asks the client for a seat and a meal
// (schema) before it answers, and returns what the client said — when the client
// offers elicitation; otherwise it answers {"offered": false}, as a server should. It
// asks the way protocol 2026-07-28 has servers ask (SEP-2322): a result that requests
// input, and the call again with the answer.
func elicitingServer(schema map[string]any) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "eliciting"}, nil)
	s.AddTool(&mcp.Tool{Name: "book", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if caps := req.Session.InitializeParams().Capabilities; caps == nil || caps.Elicitation == nil {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"offered": false}`}}}, nil
		}
		if len(req.Params.InputResponses) == 0 {
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"seat": &mcp.ElicitParams{Message: "Which seat?", RequestedSchema: schema}}}, nil
		}
		b, _ := json.Marshal(req.Params.InputResponses["seat"])
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil
	})
	return s
}

// TestElicitationPolicy: under "decline" (the default) toolbus does not offer
// elicitation; under "defaults" a server that elicits mid-call is answered with the
// schema's defaults when every required field has one, and declined otherwise; the
// call completes every time.
func TestElicitationPolicy(t *testing.T) {
	withDefaults := map[string]any{"type": "object", "required": []any{"seat"}, "properties": map[string]any{
		"seat": map[string]any{"type": "string", "default": "aisle"},
		"meal": map[string]any{"type": "string", "default": "veg"},
	}}
	missingDefault := map[string]any{"type": "object", "required": []any{"seat", "name"}, "properties": map[string]any{
		"seat": map[string]any{"type": "string", "default": "aisle"},
		"name": map[string]any{"type": "string"},
	}}
	tests := []struct {
		name, policy string
		schema       map[string]any
		want         string
	}{
		{"default policy: not offered", "", withDefaults, `{"offered":false}`},
		{"decline: not offered", mcpwire.ElicitDecline, withDefaults, `{"offered":false}`},
		{"defaults", mcpwire.ElicitDefaults, withDefaults, `{"action":"accept","content":{"meal":"veg","seat":"aisle"}}`},
		{"defaults, a required field without one", mcpwire.ElicitDefaults, missingDefault, `{"action":"decline"}`},
	}
	for _, tt := range tests {
		for _, transport := range []string{"in memory", "streamable http"} {
			t.Run(tt.name+", "+transport, func(t *testing.T) {
				cfg, opts := placeholder, &mcpwire.Options{Dial: inMemory(elicitingServer(tt.schema))}
				var w *wire
				if transport == "streamable http" {
					// The server asks mid-call on the call's own stream (protocols
					// before 2026-07-28), which toolbus's own tools/call answers.
					cfg.Type, opts = "http", nil
					cfg.URL, w = serveHTTP(t, elicitingServer(tt.schema))
				}
				cfg.Elicitation = tt.policy
				p := newPool(t, map[string]mcpwire.ServerConfig{"air": cfg}, opts)
				out, err := p.Call(ctxT(t), "air__book", json.RawMessage(`{}`))
				if err != nil {
					t.Fatal(err)
				}
				var got, want any
				if json.Unmarshal(out, &got) != nil || json.Unmarshal([]byte(tt.want), &want) != nil || !reflect.DeepEqual(got, want) {
					t.Errorf("the server was answered %s, want %s", out, tt.want)
				}
				if w != nil {
					w.allDirect(t)
				}
			})
		}
	}
}

func TestElicitationPolicyValidated(t *testing.T) {
	for policy, ok := range map[string]bool{"": true, "decline": true, "defaults": true, "ask": true, "yes": false} {
		cfg := mcpwire.ServerConfig{Command: "x", Elicitation: policy}
		if err := cfg.Validate(); (err == nil) != ok {
			t.Errorf("elicitation %q: Validate() = %v", policy, err)
		}
	}
}

func TestOAuthConfigValidated(t *testing.T) {
	http := func(o *oauth.Config) mcpwire.ServerConfig {
		return mcpwire.ServerConfig{Type: "http", URL: "https://api.example/mcp", OAuth: o}
	}
	tests := []struct {
		name string
		cfg  mcpwire.ServerConfig
		ok   bool
	}{
		{"pre-registered client: authorization code by default", http(&oauth.Config{ClientID: "a", ClientSecret: "s"}), true},
		{"named grant", http(&oauth.Config{ClientID: "a", ClientSecret: "s", Grant: "client_credentials"}), true},
		{"client credentials without a secret", http(&oauth.Config{ClientID: "a", Grant: "client_credentials"}), false},
		{"client credentials without a client id", http(&oauth.Config{ClientSecret: "s", Grant: "client_credentials"}), false},
		{"a secret without a client id", http(&oauth.Config{ClientSecret: "s"}), false},
		{"authorization code, pre-registered", http(&oauth.Config{ClientID: "a", ClientSecret: "s", Grant: "authorization_code"}), true},
		{"Claude Code's entry", http(&oauth.Config{ClientID: "a", CallbackPort: 8080}), true},
		{"no client: dynamic registration", http(&oauth.Config{Scopes: []string{"read"}}), true},
		{"an unknown grant", http(&oauth.Config{Grant: "password"}), false},
		{"a port out of range", http(&oauth.Config{CallbackPort: 70000}), false},
		{"a metadata document over http", http(&oauth.Config{ClientMetadataURL: "http://toolbus.example/client.json"}), false},
		{"a metadata document", http(&oauth.Config{ClientMetadataURL: "https://toolbus.example/client.json"}), true},
		{"stdio server", mcpwire.ServerConfig{Command: "x", OAuth: &oauth.Config{ClientID: "a", ClientSecret: "s"}}, false},
	}
	for _, tt := range tests {
		if err := tt.cfg.Validate(); (err == nil) != tt.ok {
			t.Errorf("%s: Validate() = %v", tt.name, err)
		}
	}
}

// Under "ask", a question that comes on a conversation's own session goes to that
// conversation, even while another conversation's call is under way on the server (on a
// shared session toolbus could not tell whose question it is, and declines).
func TestElicitationAsksTheSessionsConversation(t *testing.T) {
	var arrived sync.WaitGroup
	arrived.Add(2)
	both := make(chan struct{})
	go func() { arrived.Wait(); close(both) }()
	s := mcp.NewServer(&mcp.Implementation{Name: "eliciting"}, nil)
	s.AddTool(&mcp.Tool{Name: "book", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if len(req.Params.InputResponses) == 0 {
			arrived.Done()
			select { // both conversations' calls are under way when either asks
			case <-both:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"seat": &mcp.ElicitParams{Message: "Which seat?",
				RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"seat": map[string]any{"type": "string"}}}}}}, nil
		}
		b, _ := json.Marshal(req.Params.InputResponses["seat"])
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil
	})
	cfg := placeholder
	cfg.Elicitation, cfg.Sessions = mcpwire.ElicitAsk, mcpwire.SessionsConversation
	p := newPool(t, map[string]mcpwire.ServerConfig{"air": cfg}, &mcpwire.Options{Dial: inMemory(s),
		Ask: func(_ context.Context, _, asker string, _ *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"seat": "seat of " + asker}}, nil
		}})
	var wg sync.WaitGroup
	for _, conv := range []string{"conv-a", "conv-b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := p.Call(mcpwire.WithConversation(ctxT(t), conv), "air__book", json.RawMessage(`{}`))
			if err != nil {
				t.Error(err)
				return
			}
			if want := `"seat of ` + conv + `"`; !strings.Contains(string(out), want) {
				t.Errorf("%s was answered %s, want its own conversation's answer %s", conv, out, want)
			}
		}()
	}
	wg.Wait()
}

// An answer the requested schema refuses is refused on every transport alike: the
// go-sdk's client checks it on its sessions (in memory, SSE), and toolbus's own
// tools/call on a streamable HTTP session checks it the same way — before, it passed
// the answer on unchecked. A matching answer goes through on each.
func TestElicitationAnswerCheckedOnEveryTransport(t *testing.T) {
	schema := map[string]any{"type": "object", "properties": map[string]any{"seat": map[string]any{"type": "string"}}}
	for _, answer := range []struct {
		content map[string]any
		ok      bool
	}{{map[string]any{"seat": 42}, false}, {map[string]any{"seat": "12A"}, true}} {
		for _, transport := range []string{"in memory", "streamable http", "sse"} {
			t.Run(fmt.Sprintf("%v, %s", answer.content["seat"], transport), func(t *testing.T) {
				// In memory, the session speaks 2026-07-28, whose servers ask by a result
				// that requests input; the others, a session protocol, whose servers ask
				// in the middle of the call.
				cfg, opts := placeholder, &mcpwire.Options{Dial: inMemory(elicitingServer(schema))}
				var w *wire
				switch transport {
				case "streamable http":
					cfg.Type, opts = "http", &mcpwire.Options{}
					cfg.URL, w = serveHTTP(t, askingServer(schema))
				case "sse":
					srv := askingServer(schema)
					ts := httptest.NewServer(mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return srv }, nil))
					t.Cleanup(ts.Close)
					cfg.Type, cfg.URL, opts = "sse", ts.URL, &mcpwire.Options{}
				}
				cfg.Elicitation = mcpwire.ElicitAsk
				opts.Ask = func(context.Context, string, string, *mcp.ElicitParams) (*mcp.ElicitResult, error) {
					return &mcp.ElicitResult{Action: "accept", Content: answer.content}, nil
				}
				p := newPool(t, map[string]mcpwire.ServerConfig{"air": cfg}, opts)
				out, err := p.Call(mcpwire.WithConversation(ctxT(t), "c"), "air__book", json.RawMessage(`{}`))
				passed := err == nil && strings.Contains(string(out), fmt.Sprint(answer.content["seat"]))
				if passed != answer.ok {
					t.Errorf("answer %v: the server got %s (%v); want it passed: %t", answer.content, out, err, answer.ok)
				}
				t.Logf("%s, %v", out, err)
				if w != nil {
					w.allDirect(t) // toolbus's own tools/call met the question
				}
			})
		}
	}
}

// askingServer has one tool, "book", that asks the client for a seat (schema) in the
// middle of the call, on the session — the way servers of the session protocols ask —
// and returns the answer, or the error it met.
func askingServer(schema map[string]any) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "asking"}, nil)
	s.AddTool(&mcp.Tool{Name: "book", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Which seat?", RequestedSchema: schema})
		if err != nil {
			return nil, err
		}
		b, _ := json.Marshal(res)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil
	})
	return s
}
