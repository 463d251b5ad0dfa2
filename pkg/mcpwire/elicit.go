package mcpwire

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
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

// inflight is a call under way on a server, for the "ask" policies and the server's log
// messages: a request or a notification that comes in the middle of a call carries
// nothing that names the call, so the server's calls under way say whose it is.
type inflight struct {
	ctx   context.Context
	asker string // the conversation
	call  string // the call's id (WithCall), when it has one
	tool  string // the tool's canonical name
	// ended: the call returned. A server's notification may be handed on just after its
	// call's result: the call is kept for progressGrace more, for its log messages only.
	ended atomic.Bool
}

// track records a call under way on s until the returned func is called, when anything
// needs to know it: a policy that asks, or someone listening to the server's log.
func (s *server) track(ctx context.Context, tool string) func() {
	if s.cfg.Elicitation != ElicitAsk && s.cfg.Sampling != SampleAsk && s.pool.opts.Log == nil {
		return func() {}
	}
	c := &inflight{ctx: ctx, asker: conversationOf(ctx), call: callOf(ctx), tool: tool}
	s.mu.Lock()
	if s.inflight == nil {
		s.inflight = map[*inflight]struct{}{}
	}
	s.inflight[c] = struct{}{}
	s.mu.Unlock()
	forget := func() {
		s.mu.Lock()
		delete(s.inflight, c)
		s.mu.Unlock()
	}
	return func() {
		c.ended.Store(true)
		if s.pool.opts.Log == nil {
			forget()
			return
		}
		time.AfterFunc(progressGrace, forget)
	}
}

// caller is the call under way whose request or notification came on the session cs of
// the server, in ctx (the handler's): the call of ctx itself when the request came on
// the call's own stream (toolbus's streamable HTTP calls); else on a conversation's own
// session, that conversation's call; else the one call under way, or that of the one
// conversation whose calls are. With calls of several conversations at once on a
// shared session (toolbus cannot tell whose it is), or none, it is nil, and why says
// so. Calls that returned a moment ago count only when late (a notification).
func (s *server) caller(ctx context.Context, cs *mcp.ClientSession, late bool) (call *inflight, why string) {
	if id := callOf(ctx); id != "" {
		s.mu.Lock()
		defer s.mu.Unlock()
		for c := range s.inflight {
			if c.call == id && (late || !c.ended.Load()) {
				return c, ""
			}
		}
	}
	s.mu.Lock()
	// A request on a conversation's own session is that conversation's.
	owner := ""
	if cs != nil {
		for conv, c := range s.convs.open {
			if ms, ok := c.sess.(*mcpSession); ok && ms.cs == cs {
				owner = conv
				break
			}
		}
	}
	several := false
	for c := range s.inflight {
		switch {
		case !late && c.ended.Load():
		case owner != "" && c.asker != owner:
		case call == nil:
			call = c
		case c.asker != call.asker:
			several = true
		}
	}
	s.mu.Unlock()
	switch {
	case call == nil || call.asker == "":
		return nil, "no call of a conversation is under way on the server"
	case several:
		return nil, "calls of several conversations are under way on the server, and toolbus cannot tell whose this is"
	}
	return call, ""
}

// ask answers a server's elicitation request under the policy "ask": it goes to the
// conversation of the call it came in ([server.caller]), within that call's time; with
// none to ask, or when asking fails, it is declined.
func (s *server) ask(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	var cs *mcp.ClientSession
	if req != nil {
		cs = req.Session
	}
	call, why := s.caller(ctx, cs, false)
	decline := &mcp.ElicitResult{Action: "decline"}
	switch {
	case call == nil:
		s.log.Info("elicitation: declined: " + why)
		return decline, nil
	case s.pool.opts.Ask == nil:
		s.log.Info("elicitation: nobody to ask; declined")
		return decline, nil
	}
	res, err := s.pool.opts.Ask(call.ctx, s.name, call.asker, req.Params)
	if err != nil || res == nil {
		s.log.Info("elicitation: no answer; declined", "err", err)
		return decline, nil
	}
	return res, nil
}

// checkedElicitation is handler with the checks the go-sdk's client makes around its
// elicitation handler: a form's requested schema must be an object schema and the
// content accepted must match it (its defaults then applied); a URL request has a URL
// and no schema. The SDK's sessions check so themselves; toolbus's own tools/call on a
// streamable HTTP session ([directCalls]) answers the server's requests with this, so
// that an answer the schema refuses is refused on every transport alike.
func checkedElicitation(handler func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error)) func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	if handler == nil {
		return nil
	}
	invalid := func(format string, a ...any) error {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(format, a...)}
	}
	return func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		p := req.Params
		switch p.Mode {
		case "url":
			if p.RequestedSchema != nil || p.URL == "" {
				return nil, invalid("a URL elicitation needs a URL and no requested schema")
			}
			return handler(ctx, req)
		case "", "form":
		default:
			return nil, invalid("unsupported elicitation mode: %q", p.Mode)
		}
		if p.URL != "" {
			return nil, invalid("URL must not be set for form elicitation")
		}
		var resolved *jsonschema.Resolved
		if p.RequestedSchema != nil {
			b, err := json.Marshal(p.RequestedSchema)
			var schema jsonschema.Schema
			if err == nil {
				err = json.Unmarshal(b, &schema)
			}
			if err == nil && schema.Type != "object" {
				err = fmt.Errorf("its type is %q, not object", schema.Type)
			}
			if err == nil {
				resolved, err = schema.Resolve(nil)
			}
			if err != nil {
				return nil, invalid("invalid requested schema: %v", err)
			}
		}
		res, err := handler(ctx, req)
		if err != nil || res == nil || res.Action != "accept" || resolved == nil || res.Content == nil {
			return res, err
		}
		if err := resolved.Validate(res.Content); err != nil {
			return nil, invalid("elicitation result content does not match requested schema: %v", err)
		}
		if err := resolved.ApplyDefaults(&res.Content); err != nil {
			return nil, invalid("failed to apply schema defaults to elicitation result: %v", err)
		}
		return res, nil
	}
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
