package mcpwire

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The elicitation policies of ServerConfig.Elicitation.
const (
	ElicitDecline  = "decline"
	ElicitDefaults = "defaults"
	ElicitAsk      = "ask"
)

// AskFunc puts a server's elicitation request to whoever made the call (toolbus: the
// conversation's orchestrator), within ctx (the call's time), and returns the answer.
type AskFunc func(ctx context.Context, server, asker string, req *mcp.ElicitParams) (*mcp.ElicitResult, error)

// inflight is a call under way on a server, for the "ask" policy: a request that comes
// in the middle of a call carries nothing that names the call, so the server's calls
// under way say whom to ask.
type inflight struct {
	ctx   context.Context
	asker string
}

// track records a call under way on s until the returned func is called.
func (s *server) track(ctx context.Context) func() {
	if s.cfg.Elicitation != ElicitAsk {
		return func() {}
	}
	asker := conversationOf(ctx)
	c := &inflight{ctx: ctx, asker: asker}
	s.mu.Lock()
	if s.inflight == nil {
		s.inflight = map[*inflight]struct{}{}
	}
	s.inflight[c] = struct{}{}
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		delete(s.inflight, c)
		s.mu.Unlock()
	}
}

// ask answers a server's elicitation request under the policy "ask": it goes to the
// one asker whose calls are under way on the server, within that call's time — on a
// conversation's own session, to that conversation; with calls of several askers at once
// on a shared session (toolbus cannot tell whose request it is), with none, or when
// asking fails, it is declined.
func (s *server) ask(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	s.mu.Lock()
	// A request on a conversation's own session is that conversation's question.
	owner := ""
	if req != nil && req.Session != nil {
		for conv, c := range s.convs.open {
			if ms, ok := c.sess.(*mcpSession); ok && ms.cs == req.Session {
				owner = conv
				break
			}
		}
	}
	var call *inflight
	several := false
	for c := range s.inflight {
		switch {
		case owner != "" && c.asker != owner:
		case call == nil:
			call = c
		case c.asker != call.asker:
			several = true
		}
	}
	s.mu.Unlock()
	decline := &mcp.ElicitResult{Action: "decline"}
	switch {
	case call == nil || call.asker == "" || s.pool.opts.Ask == nil:
		s.log.Info("elicitation: nobody to ask; declined")
		return decline, nil
	case several:
		s.log.Info("elicitation: calls of several conversations are under way on the server; declined, as toolbus cannot tell whose question it is")
		return decline, nil
	}
	res, err := s.pool.opts.Ask(call.ctx, s.name, call.asker, req.Params)
	if err != nil || res == nil {
		s.log.Info("elicitation: no answer; declined", "err", err)
		return decline, nil
	}
	return res, nil
}

// elicitationPolicy is the client's elicitation handler under policy: none for
// decline (the client then does not offer elicitation, and the SDK refuses a request
// that comes anyway), else one that accepts with the requested schema's defaults when
// every required field has one and declines otherwise.
func elicitationPolicy(policy string) func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	if policy != ElicitDefaults {
		return nil
	}
	return func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		if req.Params.Mode != "url" && req.Params.URL == "" {
			if content, ok := schemaDefaults(req.Params.RequestedSchema); ok {
				return &mcp.ElicitResult{Action: "accept", Content: content}, nil
			}
		}
		return &mcp.ElicitResult{Action: "decline"}, nil
	}
}

// schemaDefaults returns the defaults of the properties of a requested schema (a flat
// object, as elicitation allows); ok is false when a required property has none.
func schemaDefaults(schema any) (map[string]any, bool) {
	b, err := json.Marshal(schema)
	if err != nil {
		return nil, false
	}
	var s struct {
		Required   []string                   `json:"required"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(b, &s) != nil {
		return nil, false
	}
	content := map[string]any{}
	for name, raw := range s.Properties {
		var p struct {
			Default any `json:"default"`
		}
		if json.Unmarshal(raw, &p) == nil && p.Default != nil {
			content[name] = p.Default
		}
	}
	for _, name := range s.Required {
		if _, ok := content[name]; !ok {
			return nil, false
		}
	}
	return content, true
}
