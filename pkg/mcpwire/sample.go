package mcpwire

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolbus/toolbus/pkg/messages"
)

// The sampling policies of ServerConfig.Sampling.
const (
	SampleDeny = "deny"
	SampleAsk  = "ask"
)

// SampleFunc puts a server's sampling/createMessage request to whoever made the call
// (toolbus: the conversation's orchestrator), within ctx (the call's time), and returns
// the model's completion.
type SampleFunc func(ctx context.Context, server, asker string, req *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error)

// codeRefused is the JSON-RPC error code of a sampling request refused (MCP's "user
// rejected sampling request").
const codeRefused = -1

// sample answers a server's sampling request under the policy "ask": it goes to the
// conversation of the call it came in ([server.caller]) within that call's time; with
// none to ask, or no answer, the server is told it was refused.
func (s *server) sample(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	var cs *mcp.ClientSession
	if req != nil {
		cs = req.Session
	}
	call, why := s.caller(ctx, cs, false)
	refuse := func(why string) error {
		s.log.Info("sampling: refused: " + why)
		return &jsonrpc.Error{Code: codeRefused, Message: "toolbus refused the sampling request: " + why}
	}
	switch {
	case call == nil:
		return nil, refuse(why)
	case s.pool.opts.Sample == nil || req == nil || req.Params == nil:
		return nil, refuse("nobody answers sampling requests")
	}
	res, err := s.pool.opts.Sample(call.ctx, s.name, call.asker, req.Params)
	if err != nil {
		return nil, refuse(err.Error())
	}
	if res == nil || res.Content == nil {
		return nil, refuse("the orchestrator answered without a completion")
	}
	return res, nil
}

// LogFunc receives a server's log message (notifications/message) that came during a
// call made with [WithCall], with the context of the call ([Options.Log]).
type LogFunc func(ctx context.Context, l messages.CallLog)

// logged passes a server's notifications/message on to Options.Log when it came during
// a call ([server.caller]); one that no call under way can be said to have caused is
// left to the debug log.
func (s *server) logged(ctx context.Context, cs *mcp.ClientSession, p *mcp.LoggingMessageParams) {
	listen := s.pool.opts.Log
	if listen == nil || p == nil {
		return
	}
	call, why := s.caller(ctx, cs, true)
	if call == nil || call.call == "" {
		s.log.Debug("a log message of the server, of no call", "level", p.Level, "why", why)
		return
	}
	data, err := json.Marshal(p.Data)
	if err != nil {
		return
	}
	listen(call.ctx, messages.CallLog{CallID: call.call, Conversation: call.asker, Server: s.name, Tool: call.tool,
		Level: string(p.Level), Logger: p.Logger, Data: data})
}
