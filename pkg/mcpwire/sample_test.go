package mcpwire_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolbus/toolbus/pkg/mcpwire"
	"github.com/toolbus/toolbus/pkg/messages"
)

// samplingServer has one tool, "summarize", that asks its client for a model's
// completion mid-call (sampling/createMessage) and answers with it — when the client
// offers sampling; otherwise it answers "no sampling", as a server should. Before it
// asks, it logs a line (notifications/message).
func samplingServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "sampling"}, &mcp.ServerOptions{Capabilities: &mcp.ServerCapabilities{Logging: &mcp.LoggingCapabilities{}, Tools: &mcp.ToolCapabilities{}}})
	s.AddTool(&mcp.Tool{Name: "summarize", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "summarizer", Data: map[string]any{"step": "asking"}})
		if caps := req.Session.InitializeParams().Capabilities; caps == nil || caps.Sampling == nil {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "no sampling"}}}, nil
		}
		// Asked the way protocol 2026-07-28 has servers ask (SEP-2322), a result that
		// requests input; the go-sdk server sends it mid-call on earlier protocols.
		resp, ok := req.Params.InputResponses["summary"].(*mcp.CreateMessageWithToolsResult)
		if !ok {
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"summary": &mcp.CreateMessageParams{MaxTokens: 50, SystemPrompt: "be brief",
				Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "summarize toolbus"}}}}}}, nil
		}
		text := ""
		if len(resp.Content) == 1 {
			if tc, ok := resp.Content[0].(*mcp.TextContent); ok {
				text = tc.Text
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: resp.Model + ": " + text}}}, nil
	})
	return s
}

// Under "deny" (the default) toolbus does not offer sampling; under "ask" a server's
// sampling request in the middle of a call goes to the call's conversation
// (Options.Sample) and its answer back to the server, in memory and over streamable
// HTTP (toolbus's own tools/call, where the request comes on the call's stream); a
// refusal reaches the server as an error. What the server logs during the call reaches
// Options.Log with the call's id.
func TestSamplingPolicy(t *testing.T) {
	tests := []struct {
		name, policy string
		answer       func() (*mcp.CreateMessageResult, error)
		want         string
		wantErr      bool
	}{
		{name: "default: not offered", want: `"no sampling"`},
		{name: "deny: not offered", policy: mcpwire.SampleDeny, want: `"no sampling"`},
		{name: "ask", policy: mcpwire.SampleAsk, want: `"model-x: toolbus runs tool calls"`,
			answer: func() (*mcp.CreateMessageResult, error) {
				return &mcp.CreateMessageResult{Model: "model-x", Role: "assistant", Content: &mcp.TextContent{Text: "toolbus runs tool calls"}}, nil
			}},
		{name: "ask, refused", policy: mcpwire.SampleAsk, wantErr: true,
			answer: func() (*mcp.CreateMessageResult, error) { return nil, errors.New("no model here") }},
	}
	for _, tt := range tests {
		for _, transport := range []string{"in memory", "streamable http"} {
			t.Run(tt.name+", "+transport, func(t *testing.T) {
				var mu sync.Mutex
				var asked []string
				var asks []*mcp.CreateMessageParams
				var logs []messages.CallLog
				cfg, opts := placeholder, &mcpwire.Options{Dial: inMemory(samplingServer())}
				var w *wire
				if transport == "streamable http" {
					cfg.Type, opts = "http", &mcpwire.Options{}
					cfg.URL, w = serveHTTP(t, samplingServer())
				}
				cfg.Sampling = tt.policy
				opts.Sample = func(_ context.Context, server, asker string, req *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
					mu.Lock()
					asked, asks = append(asked, server+"/"+asker), append(asks, req)
					mu.Unlock()
					return tt.answer()
				}
				opts.Log = func(_ context.Context, l messages.CallLog) {
					mu.Lock()
					logs = append(logs, l)
					mu.Unlock()
				}
				p := newPool(t, map[string]mcpwire.ServerConfig{"notes": cfg}, opts)
				ctx := mcpwire.WithCall(mcpwire.WithConversation(ctxT(t), "c1"), "c1/r1/0")
				out, err := p.Call(ctx, "notes__summarize", json.RawMessage(`{}`))
				if tt.wantErr {
					if err == nil {
						t.Fatalf("%s; want the refusal's error", out)
					}
				} else if err != nil || string(out) != tt.want {
					t.Fatalf("%s, %v; want %s", out, err, tt.want)
				}
				eventually(t, "the server's log line", func() bool {
					mu.Lock()
					defer mu.Unlock()
					return len(logs) > 0
				})
				mu.Lock()
				defer mu.Unlock()
				if tt.answer != nil {
					if len(asked) != 1 || asked[0] != "notes/c1" || asks[0].MaxTokens != 50 || asks[0].SystemPrompt != "be brief" ||
						len(asks[0].Messages) != 1 || asks[0].Messages[0].Content.(*mcp.TextContent).Text != "summarize toolbus" {
						t.Errorf("asked %v: %+v", asked, asks)
					}
				} else if len(asked) != 0 {
					t.Errorf("asked %v under %q", asked, tt.policy)
				}
				want := messages.CallLog{CallID: "c1/r1/0", Conversation: "c1", Server: "notes", Tool: "notes__summarize", Level: "info", Logger: "summarizer", Data: json.RawMessage(`{"step":"asking"}`)}
				// One line per round of the call (the server's handler runs again with the
				// completion on 2026-07-28).
				for _, l := range logs {
					if l.CallID != want.CallID || l.Tool != want.Tool || l.Level != want.Level || l.Logger != want.Logger ||
						string(l.Data) != string(want.Data) || l.Conversation != want.Conversation || l.Server != want.Server {
						t.Errorf("log %+v, want %+v", l, want)
					}
				}
				if w != nil {
					w.allDirect(t)
				}
			})
		}
	}
}

func TestSamplingPolicyValidated(t *testing.T) {
	for policy, ok := range map[string]bool{"": true, "deny": true, "ask": true, "allow": false} {
		cfg := mcpwire.ServerConfig{Command: "x", Sampling: policy}
		if err := cfg.Validate(); (err == nil) != ok {
			t.Errorf("sampling %q: Validate() = %v", policy, err)
		}
	}
}
