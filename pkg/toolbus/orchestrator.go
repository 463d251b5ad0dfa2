package toolbus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/mcpwire"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/redact"
)

// askConversation puts a request of a server to the conversation's orchestrator on
// subject (a server's question, a sampling request) and returns the answer's body, within
// ctx (the call's time). The answer comes on a subject of the conversation's own (which
// only its orchestrator may publish on), not on an inbox: an orchestrator needs no right
// to reply to inboxes, where it could forge the services' JetStream acks.
func askConversation(ctx context.Context, nc *nats.Conn, subject, conversation string, body []byte) ([]byte, error) {
	answers, err := nc.SubscribeSync(messages.AnswerSubject(conversation, nuid.Next()))
	if err != nil {
		return nil, err
	}
	defer answers.Unsubscribe()
	ask := &nats.Msg{Subject: subject, Reply: answers.Subject, Data: body, Header: nats.Header{}}
	ask.Header.Set(messages.HeaderConversation, conversation)
	if err := nc.PublishMsg(ask); err != nil {
		return nil, err
	}
	msg, err := answers.NextMsgWithContext(ctx)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, errors.New("the orchestrator did not answer within the call's time")
		}
		return nil, err
	}
	return msg.Data, nil
}

// askModel puts a server's sampling request to the conversation's orchestrator: a NATS
// request on toolbus.sample.<conversation> (messages.SampleRequest), answered with a
// model's completion (messages.SampleResponse) within the call's time.
func askModel(nc *nats.Conn) mcpwire.SampleFunc {
	return func(ctx context.Context, server, conversation string, p *mcp.CreateMessageParams) (*mcp.CreateMessageResult, error) {
		req := messages.SampleRequest{Conversation: conversation, Server: server, SystemPrompt: p.SystemPrompt, MaxTokens: p.MaxTokens,
			Temperature: p.Temperature, StopSequences: p.StopSequences}
		var err error
		if req.Messages, err = json.Marshal(p.Messages); err != nil {
			return nil, err
		}
		if p.ModelPreferences != nil {
			req.ModelPreferences, _ = json.Marshal(p.ModelPreferences)
		}
		if p.Metadata != nil {
			req.Metadata, _ = json.Marshal(p.Metadata)
		}
		if d, ok := ctx.Deadline(); ok {
			req.Deadline = d
		}
		body, err := json.Marshal(req)
		if err != nil {
			return nil, err
		}
		answer, err := askConversation(ctx, nc, messages.SampleSubject(conversation), conversation, body)
		if err != nil {
			return nil, err
		}
		return readCompletion(answer)
	}
}

// readCompletion reads the orchestrator's answer to a sampling request: a completion, or
// its refusal, as an error.
func readCompletion(body []byte) (*mcp.CreateMessageResult, error) {
	var resp messages.SampleResponse
	if err := json.Unmarshal(body, &resp); err != nil {
		return nil, fmt.Errorf("the orchestrator's answer: %w", err)
	}
	if resp.Error != "" {
		return nil, fmt.Errorf("the orchestrator refused: %s", messages.EchoError(resp.Error))
	}
	role := resp.Role
	switch role {
	case "":
		role = "assistant"
	case "assistant", "user":
	default:
		return nil, fmt.Errorf("the orchestrator answered the role %q (want assistant or user)", messages.EchoName(role))
	}
	// The content is read as the go-sdk reads a CreateMessageResult: one text, image or
	// audio block.
	wire, err := json.Marshal(struct {
		Content    json.RawMessage `json:"content"`
		Model      string          `json:"model"`
		Role       string          `json:"role"`
		StopReason string          `json:"stopReason,omitempty"`
	}{resp.Content, resp.Model, role, resp.StopReason})
	if err != nil || len(resp.Content) == 0 {
		return nil, errors.New("the orchestrator's answer has no content")
	}
	var res mcp.CreateMessageResult
	if err := json.Unmarshal(wire, &res); err != nil || res.Content == nil {
		return nil, fmt.Errorf("the orchestrator's content is not an MCP text, image or audio block: %v", err)
	}
	return &res, nil
}

// publishLog publishes what an MCP server logs while a call runs on it on the
// conversation's progress subject, marked with the call's id (messages.HeaderLogOf), the
// server's secrets masked: best effort, as the notifications themselves are.
func publishLog(nc *nats.Conn, secrets *redact.Current, log *slog.Logger) mcpwire.LogFunc {
	return func(ctx context.Context, l messages.CallLog) {
		if messages.ValidateConversation(l.Conversation) != nil {
			return
		}
		masked := secrets.For(l.Server).String(string(l.Data))
		if masked != string(l.Data) {
			if !json.Valid([]byte(masked)) { // a mask that cut into the JSON: kept as text
				b, _ := json.Marshal(masked)
				masked = string(b)
			}
			l.Data = json.RawMessage(masked)
		}
		notify(ctx, nc, log, l.Conversation, messages.HeaderLogOf, l.CallID, l, "a server's log message")
	}
}

// publishUpdated publishes the update of a resource a conversation subscribed to on the
// conversation's progress subject, marked with the server's name (best effort).
func publishUpdated(nc *nats.Conn, log *slog.Logger) mcpwire.UpdatedFunc {
	return func(ctx context.Context, u messages.ResourceUpdated) {
		if messages.ValidateConversation(u.Conversation) != nil {
			return
		}
		notify(ctx, nc, log, u.Conversation, messages.HeaderResourceUpdated, u.Server, u, "a resource's update")
	}
}

// notify publishes v on conversation's progress subject, marked header: value, with the
// trace of ctx — best effort, as the notifications it carries are: what cannot be
// published is logged (what names it) and dropped.
func notify(ctx context.Context, nc *nats.Conn, log *slog.Logger, conversation, header, value string, v any, what string) {
	body, err := json.Marshal(v)
	if err != nil {
		return
	}
	m := &nats.Msg{Subject: messages.ProgressSubject(conversation), Data: body, Header: nats.Header{}}
	m.Header.Set(messages.HeaderConversation, conversation)
	m.Header.Set(header, value)
	bus.InjectTrace(ctx, m.Header)
	if err := nc.PublishMsg(m); err != nil {
		log.Debug(what+" not published", "of", value, "err", err)
	}
}
