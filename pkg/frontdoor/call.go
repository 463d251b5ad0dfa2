package frontdoor

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/messages"
)

// MetaRequestID is the _meta key where the door puts the JSON-RPC id of a tools/call
// before the go-sdk reads it (the SDK does not hand the id to a tool's handler).
const MetaRequestID = "toolbus/request-id"

// HeaderConversation, on a streamable HTTP request, names the conversation of its calls
// instead of the MCP session: calls of several sessions then share one conversation (its
// order, its servers' sessions). The tenant of the caller's token is put before it.
const HeaderConversation = "Toolbus-Conversation"

// ResponseID is the id of the response a tools/call becomes: made from the MCP session,
// the JSON-RPC request id (its JSON), and the tool and arguments (as they came), so
// that a client's retry of the request is the same response, which the pipeline runs
// once — and a request that uses an id of the session again for another call (a client
// resuming the session with its ids counting from 0 again) is another response, run and
// answered as its own, never with the earlier call's result.
func ResponseID(session string, requestID json.RawMessage, tool string, args json.RawMessage) string {
	h := sha256.New()
	for _, part := range [][]byte{[]byte(session), requestID, []byte(tool), args} {
		h.Write(part)
		h.Write([]byte{0})
	}
	return "mcp-" + hex.EncodeToString(h.Sum(nil)[:12])
}

// boundSession is a session id bound to the caller (its token's user): 26 letters and
// digits.
func boundSession(user, session string) string {
	sum := sha256.Sum256([]byte(user + "\x00" + session))
	return strings.ToUpper(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:])[:26])
}

// Conversation is the conversation of an MCP session's calls for tenant: "mcp-<session>"
// (or the caller's named one), after "<tenant>." for a tenant.
func Conversation(tenant, session, named string) (string, error) {
	conv := named
	if conv == "" {
		if session == "" {
			return "", fmt.Errorf("the MCP session has no id")
		}
		conv = "mcp-" + session
	}
	if tenant != "" && !strings.HasPrefix(conv, tenant+".") {
		conv = tenant + "." + conv
	}
	if tenant == "" && messages.Tenant(conv) != "" {
		return "", fmt.Errorf("conversation %q names a tenant, and the caller is none's", conv)
	}
	if err := messages.ValidateConversation(conv); err != nil {
		return "", err
	}
	return conv, nil
}

// toolUse is the response a tools/call becomes: one Anthropic tool_use block, whose
// input is the client's arguments as they came (JSON is not parsed loosely there).
func toolUse(id, name string, args json.RawMessage) (string, error) {
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	b, err := json.Marshal([]struct {
		Type  string          `json:"type"`
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	}{{"tool_use", id, name, args}})
	return string(b), err
}

// flight is a call under way in this door, which a retry of its request arriving
// meanwhile waits for instead of asking again.
type flight struct {
	done chan struct{}
	out  *messages.Output
	err  error
}

// handler is the tools/call handler of tenant's tools.
func (d *Door) handler(tenant string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return d.call(ctx, tenant, req)
	}
}

func (d *Door) call(ctx context.Context, tenant string, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	conv, session, err := d.conversation(tenant, req.Session, req.Extra)
	if err != nil {
		return failed(messages.CodeInvalidArguments, err.Error()), nil
	}
	reqID := requestID(req.Params.Meta)
	if reqID == nil {
		// A transport the door did not wrap: every call is its own response.
		return failed(messages.CodeInternal, "the front door did not see the request's id (a transport not made by frontdoor)"), nil
	}
	args := req.Params.Arguments
	if len(args) > 0 && !json.Valid(args) {
		return failed(messages.CodeInvalidArguments, "the arguments are not JSON"), nil
	}
	id := ResponseID(session, reqID, req.Params.Name, args)
	ctx, cancel := context.WithTimeout(ctx, d.o.CallTimeout)
	defer cancel()
	release := d.relayTo(conv, req.Session)
	defer release()
	stop := d.watch(ctx, req.Session, req.Params.GetProgressToken(), conv, id)
	defer stop()
	r, err := d.run(ctx, conv, id, req.Params.Name, args)
	if err != nil {
		return nil, err
	}
	if r == nil {
		return failed(messages.CodeInternal, "the pipeline answered without the call's result"), nil
	}
	return Result(ctx, d.client, *r)
}

// conversation is the conversation of a request of session (with the HTTP request's
// extra: its token and headers), and the session id as it names the request's
// responses.
func (d *Door) conversation(tenant string, ss *mcp.ServerSession, extra *mcp.RequestExtra) (conv, session string, err error) {
	session = ss.ID()
	if extra != nil && extra.TokenInfo != nil && extra.TokenInfo.UserID != "" && session != "" {
		// A session id another replica issued is taken as given (Handler adopts it), so
		// what it names is bound to the caller's token: the same id under another
		// token is another conversation, and another response id.
		session = boundSession(extra.TokenInfo.UserID, session)
	}
	var named string
	if extra != nil && extra.Header != nil {
		named = extra.Header.Get(HeaderConversation)
	}
	conv, err = Conversation(tenant, session, named)
	return conv, session, err
}

// run calls tool with args through the pipeline as response id of conv and returns its
// result (nil when the output holds none but a refusal of a response with another
// count of calls).
func (d *Door) run(ctx context.Context, conv, id, tool string, args json.RawMessage) (*messages.OutputResult, error) {
	text, err := toolUse("toolu_"+id, tool, args)
	if err != nil {
		return nil, err
	}
	out, err := d.ask(ctx, conv, id, text)
	if err != nil {
		d.o.Logger.Info("mcp call unanswered", "conversation", conv, "response_id", id, "err", err)
		return nil, fmt.Errorf("toolbus: %w", err)
	}
	if len(out.Results) != 1 {
		d.o.Logger.Warn("mcp call answered with another count of results", "conversation", conv, "response_id", id, "kind", out.Kind, "results", len(out.Results))
		return nil, nil
	}
	r := out.Results[0]
	if d.o.Logger.Enabled(ctx, slog.LevelDebug) {
		code := ""
		if r.Error != nil {
			code = string(r.Error.Code)
		}
		d.o.Logger.Debug("mcp call", "conversation", conv, "response_id", id, "tool", r.Tool, "success", r.Success, "error_code", code)
	}
	return &r, nil
}

// ask submits the response and waits for its output; a retry arriving while the first
// is under way in this door waits for the first.
func (d *Door) ask(ctx context.Context, conv, id, text string) (*messages.Output, error) {
	key := messages.ScopedID(conv, id)
	d.mu.Lock()
	f, running := d.flights[key]
	if !running {
		f = &flight{done: make(chan struct{})}
		d.flights[key] = f
	}
	d.mu.Unlock()
	if running {
		select {
		case <-f.done:
			if f.err == nil {
				return f.out, nil
			}
			// The first gave up (its client went away): ask for ourselves.
			return d.client.Ask(ctx, conv, text, &client.SubmitOptions{ResponseID: id, Format: "anthropic"})
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	f.out, f.err = d.client.Ask(ctx, conv, text, &client.SubmitOptions{ResponseID: id, Format: "anthropic"})
	d.mu.Lock()
	delete(d.flights, key)
	d.mu.Unlock()
	close(f.done)
	return f.out, f.err
}

// requestID is the JSON of the request id the door put in _meta.
func requestID(meta mcp.Meta) json.RawMessage {
	v, ok := meta[MetaRequestID]
	if !ok || v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

// watch tells the client, in progress notifications for token (when it gave one), that
// its call waits for a person's approval and what the call's server reports of its
// progress, and passes on what the server logs while the call runs (notifications/message,
// at the level the client set), until the returned func is called.
func (d *Door) watch(ctx context.Context, session *mcp.ServerSession, token any, conv, responseID string) (stop func()) {
	callID := messages.CallID(conv, responseID, 0)
	var mu sync.Mutex
	var progress float64
	notify := func(msg string, total float64) {
		mu.Lock()
		defer mu.Unlock()
		progress++
		_ = session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: progress, Total: total, Message: msg})
	}
	var subs []interface{ Unsubscribe() error }
	if sub, err := d.client.OnCallLog(conv, func(l messages.CallLog) {
		if l.CallID == callID {
			_ = session.Log(ctx, &mcp.LoggingMessageParams{Level: mcp.LoggingLevel(l.Level), Logger: l.Logger, Data: l.Data})
		}
	}); err == nil {
		subs = append(subs, sub)
	}
	stop = func() {
		for _, s := range subs {
			_ = s.Unsubscribe()
		}
	}
	if token == nil {
		return stop
	}
	if sub, err := d.client.OnApproval(conv, func(r messages.ApprovalRequest) {
		if r.ResponseID == responseID {
			notify(fmt.Sprintf("waiting for approval: rule %q asks a person to decide (toolbus approve %s), until %s", r.Rule, r.ID, r.Deadline.UTC().Format("15:04:05 MST")), 0)
		}
	}); err == nil {
		subs = append(subs, sub)
	}
	if sub, err := d.client.OnCallProgress(conv, func(p messages.CallProgress) {
		if p.CallID == callID {
			notify(p.Message, p.Total)
		}
	}); err == nil {
		subs = append(subs, sub)
	}
	return stop
}
