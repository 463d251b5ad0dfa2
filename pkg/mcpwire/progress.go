package mcpwire

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolbus/toolbus/pkg/messages"
)

// ProgressFunc receives a server's notifications/progress about a call made with
// [WithCall], with the context of the call ([Options.Progress]).
type ProgressFunc func(ctx context.Context, p messages.CallProgress)

type callKey struct{}

// WithCall returns ctx for a call with this id (messages.ToolCall.CallID): with
// [Options.Progress] set, the request asks the server for progress (a progressToken in
// its _meta) and what the server reports reaches Progress with the id.
func WithCall(ctx context.Context, callID string) context.Context {
	return context.WithValue(ctx, callKey{}, callID)
}

func callOf(ctx context.Context) string {
	id, _ := ctx.Value(callKey{}).(string)
	return id
}

type tokenKey struct{}

func progressTokenOf(ctx context.Context) string {
	t, _ := ctx.Value(tokenKey{}).(string)
	return t
}

// progressCalls are the calls under way that asked for progress, by their token.
type progressCalls struct {
	next  atomic.Uint64
	mu    sync.Mutex
	calls map[string]progressCall
}

type progressCall struct {
	ctx  context.Context
	base messages.CallProgress
}

// begin gives the call a progress token when someone listens and the call has an id;
// done forgets it, progressGrace later.
func (p *progressCalls) begin(ctx context.Context, listen ProgressFunc, server, tool string) (context.Context, func()) {
	id := callOf(ctx)
	if listen == nil || id == "" {
		return ctx, func() {}
	}
	token := "toolbus-" + strconv.FormatUint(p.next.Add(1), 10)
	ctx = context.WithValue(ctx, tokenKey{}, token)
	p.mu.Lock()
	if p.calls == nil {
		p.calls = map[string]progressCall{}
	}
	p.calls[token] = progressCall{ctx: ctx, base: messages.CallProgress{CallID: id, Conversation: conversationOf(ctx), Server: server, Tool: tool}}
	p.mu.Unlock()
	return ctx, func() {
		// A server sends its last step just before its result, and the SDK may hand
		// the notification on after the result: the token is forgotten a little
		// later, so that the last step is not lost.
		time.AfterFunc(progressGrace, func() {
			p.mu.Lock()
			delete(p.calls, token)
			p.mu.Unlock()
		})
	}
}

// progressGrace is how long a call's progress token is kept after the call returned.
const progressGrace = 2 * time.Second

// notify passes a notifications/progress on to listen, when its token is a call's under
// way; a late or unknown one is dropped.
func (p *progressCalls) notify(listen ProgressFunc, req *mcp.ProgressNotificationClientRequest) {
	if listen == nil || req == nil || req.Params == nil {
		return
	}
	token, ok := req.Params.ProgressToken.(string)
	if !ok {
		return
	}
	if c, ok := p.call(token); ok {
		msg := c.base
		msg.Progress, msg.Total, msg.Message = req.Params.Progress, req.Params.Total, req.Params.Message
		listen(c.ctx, msg)
	}
}

// call is the call under way that token names.
func (p *progressCalls) call(token string) (progressCall, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.calls[token]
	return c, ok
}

// report passes what a server says of a call's task under way (its status message, at
// each change: tasks.go) on to listen as the call's progress, step counting the changes.
func (p *progressCalls) report(ctx context.Context, listen ProgressFunc, step float64, message string) {
	token := progressTokenOf(ctx)
	if listen == nil || token == "" {
		return
	}
	if c, ok := p.call(token); ok {
		msg := c.base
		msg.Progress, msg.Message = step, message
		listen(c.ctx, msg)
	}
}
