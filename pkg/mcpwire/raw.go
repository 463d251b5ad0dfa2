package mcpwire

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"
)

// Requests the go-sdk does not send (tasks/get, tasks/result, tasks/cancel, a tools/call
// with a task) go out on the session's own connection: on streamable HTTP as toolbus's
// own POSTs (directCalls.request), on every other transport through [watchedConn], which
// writes them beside the SDK's messages and takes their answers out of what the SDK reads.

// rawRequester sends one JSON-RPC request in a session and returns its result; an error
// answer is a *jsonrpc.Error.
type rawRequester interface {
	request(ctx context.Context, method string, params any) (json.RawMessage, error)
}

// watching is a transport whose connection is a [watchedConn]: every transport but
// streamable HTTP, whose connection the SDK must see as its own (it starts the
// notification stream through an unexported method, which a wrapper would hide).
type watching struct {
	mcp.Transport
	tasks *taskTools
	conn  *watchedConn // the last connection made
}

func (w *watching) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := w.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	w.conn = &watchedConn{Connection: conn, tasks: w.tasks, waiting: map[string]chan *jsonrpc.Response{}, closed: make(chan struct{})}
	return w.conn, nil
}

// watchedConn is a session's connection, as the go-sdk makes it, watched: it names each
// tools/call's JSON-RPC id on the span of its call as it writes it (Write gets the call's
// context), reads the server's answers for tools that run as MCP tasks (tasks.go), and
// sends requests of toolbus's own (request), whose answers it keeps from the SDK.
type watchedConn struct {
	mcp.Connection
	tasks *taskTools

	nextID  atomic.Int64
	mu      sync.Mutex
	waiting map[string]chan *jsonrpc.Response // by id, of requests under way
	closed  chan struct{}                     // closed when reading failed: no answer comes
	readErr error
}

func (c *watchedConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if err != nil {
			c.mu.Lock()
			if c.readErr == nil {
				c.readErr = err
				close(c.closed)
			}
			c.mu.Unlock()
			return msg, err
		}
		resp, ok := msg.(*jsonrpc.Response)
		if !ok {
			return msg, nil
		}
		if id, mine := resp.ID.Raw().(string); mine && strings.HasPrefix(id, rawIDPrefix) {
			c.mu.Lock()
			ch := c.waiting[id]
			delete(c.waiting, id)
			c.mu.Unlock()
			if ch != nil {
				ch <- resp
			}
			continue // an answer the SDK never asked for
		}
		if len(resp.Result) > 0 {
			c.tasks.observe(resp.Result)
		}
		return msg, nil
	}
}

func (c *watchedConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && req.Method == methodToolsCall && req.IsCall() {
		if span := trace.SpanFromContext(ctx); span.IsRecording() {
			span.SetAttributes(attrRequestID.String(strings.Trim(fmt.Sprint(req.ID.Raw()), `"`)))
		}
	}
	return c.Connection.Write(ctx, msg)
}

// rawIDPrefix starts the ids of toolbus's own requests: strings, where the SDK's are
// numbers, so the two never meet.
const rawIDPrefix = "toolbus-"

func (c *watchedConn) request(ctx context.Context, method string, params any) (json.RawMessage, error) {
	p, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	key := rawIDPrefix + strconv.FormatInt(c.nextID.Add(1), 10)
	id, err := jsonrpc.MakeID(key)
	if err != nil {
		return nil, err
	}
	ch := make(chan *jsonrpc.Response, 1)
	c.mu.Lock()
	if c.readErr != nil {
		c.mu.Unlock()
		return nil, fmt.Errorf("%w: %s: the connection is closed: %w", errRejected, method, c.readErr)
	}
	c.waiting[key] = ch
	c.mu.Unlock()
	forget := func() {
		c.mu.Lock()
		delete(c.waiting, key)
		c.mu.Unlock()
	}
	if err := c.Connection.Write(ctx, &jsonrpc.Request{ID: id, Method: method, Params: p}); err != nil {
		forget()
		return nil, fmt.Errorf("%w: %s: %w", errConnection, method, err)
	}
	select {
	case resp := <-ch:
		if resp.Error != nil {
			return nil, resp.Error
		}
		return resp.Result, nil
	case <-c.closed:
		forget()
		return nil, fmt.Errorf("%w: %s: %w", errConnection, method, c.readErr)
	case <-ctx.Done():
		forget()
		// As the SDK does for its own requests: the server may stop the work.
		note := &jsonrpc.Request{Method: "notifications/cancelled", Params: json.RawMessage(`{"requestId":` + strconv.Quote(key) + `,"reason":"context canceled"}`)}
		go func() {
			wctx, cancel := context.WithTimeout(context.Background(), terminateGrace)
			defer cancel()
			_ = c.Connection.Write(wctx, note)
		}()
		return nil, ctx.Err()
	}
}
