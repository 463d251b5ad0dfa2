package frontdoor

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/toolbus/toolbus/pkg/messages"
)

// relay answers a conversation's elicitation questions and sampling requests (a
// backend's, configured "elicitation"/"sampling": "ask", which toolbus puts to the
// conversation's orchestrator) by putting them to the MCP client of its session, while
// calls of the conversation run in this door.
type relay struct {
	calls int
	subs  []*nats.Subscription
}

// relayTo starts relaying conv's questions to session's client, for what the client
// declared it can answer (the elicitation and sampling capabilities), and returns what
// ends it. Calls of one conversation share one relay.
func (d *Door) relayTo(conv string, session *mcp.ServerSession) (release func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r := d.relays[conv]
	if r == nil {
		r = &relay{}
		d.relays[conv] = r
		var caps *mcp.ClientCapabilities
		if p := session.InitializeParams(); p != nil {
			caps = p.Capabilities
		}
		if caps != nil && caps.Elicitation != nil {
			if sub, err := d.client.OnElicit(conv, func(ctx context.Context, q messages.ElicitRequest) messages.ElicitResponse {
				return elicit(ctx, session, q)
			}); err == nil {
				r.subs = append(r.subs, sub)
			}
		}
		if caps != nil && caps.Sampling != nil {
			if sub, err := d.client.OnSample(conv, func(ctx context.Context, q messages.SampleRequest) messages.SampleResponse {
				return sample(ctx, session, q)
			}); err == nil {
				r.subs = append(r.subs, sub)
			}
		}
	}
	r.calls++
	return func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if r.calls--; r.calls == 0 {
			for _, s := range r.subs {
				_ = s.Unsubscribe()
			}
			delete(d.relays, conv)
		}
	}
}

// elicit puts a backend's question to the client; a client that cannot answer cancels.
func elicit(ctx context.Context, session *mcp.ServerSession, q messages.ElicitRequest) messages.ElicitResponse {
	p := &mcp.ElicitParams{Message: q.Message, Mode: q.Mode, URL: q.URL}
	if len(q.RequestedSchema) > 0 {
		p.RequestedSchema = q.RequestedSchema
	}
	res, err := session.Elicit(ctx, p)
	if err != nil || res == nil {
		return messages.ElicitResponse{Action: "cancel"}
	}
	return messages.ElicitResponse{Action: res.Action, Content: res.Content}
}

// sample puts a backend's request for a completion to the client; its refusal or
// failure is the backend's answer.
func sample(ctx context.Context, session *mcp.ServerSession, q messages.SampleRequest) messages.SampleResponse {
	p := &mcp.CreateMessageParams{SystemPrompt: q.SystemPrompt, MaxTokens: q.MaxTokens, Temperature: q.Temperature, StopSequences: q.StopSequences}
	if err := json.Unmarshal(q.Messages, &p.Messages); err != nil {
		return messages.SampleResponse{Error: "the request's messages: " + err.Error()}
	}
	if len(q.ModelPreferences) > 0 {
		_ = json.Unmarshal(q.ModelPreferences, &p.ModelPreferences)
	}
	if len(q.Metadata) > 0 {
		p.Metadata = q.Metadata
	}
	res, err := session.CreateMessage(ctx, p)
	if err != nil {
		return messages.SampleResponse{Error: "the MCP client refused: " + err.Error()}
	}
	content, err := json.Marshal(res.Content)
	if err != nil {
		return messages.SampleResponse{Error: err.Error()}
	}
	return messages.SampleResponse{Role: string(res.Role), Content: content, Model: res.Model, StopReason: res.StopReason}
}
