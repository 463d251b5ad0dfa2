package mcpwire

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolbus/toolbus/pkg/messages"
	"go.opentelemetry.io/otel/trace"
)

// maxResponseBytes bounds the body of one plain JSON-RPC response.
const maxResponseBytes = 32 << 20

// rpcSession speaks plain JSON-RPC 2.0 over HTTP POST, as in-house services that predate
// MCP do: one request per POST, methods tools/list and tools/call, no session, no
// notifications. It is stateless, so it never dies; each failure is reported per call.
type rpcSession struct {
	url    string
	client *http.Client
	nextID atomic.Int64
	// life is done when the session is closed or the pool is; it cancels the requests
	// under way.
	life   context.Context
	cancel context.CancelFunc
}

func newRPCSession(ctx context.Context, url string, client *http.Client) *rpcSession {
	s := &rpcSession{url: url, client: client}
	s.life, s.cancel = context.WithCancel(ctx)
	return s
}

type rpcRequest struct {
	JSONRPC string `json:"jsonrpc"`
	ID      int64  `json:"id"`
	Method  string `json:"method"`
	Params  any    `json:"params,omitempty"`
}

type rpcResponse struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *jsonrpc.Error  `json:"error"`
}

// call posts one request and returns its result.
func (s *rpcSession) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	outer := ctx
	ctx, stop := boundTo(ctx, s.life)
	defer stop()
	res, err := s.post(ctx, method, params)
	if err != nil && outer.Err() == nil && s.life.Err() != nil {
		return nil, fmt.Errorf("%w: the session was closed during the call", errConnection)
	}
	return res, err
}

func (s *rpcSession) post(ctx context.Context, method string, params any) (json.RawMessage, error) {
	id := s.nextID.Add(1)
	if span := trace.SpanFromContext(ctx); method == methodToolsCall && span.IsRecording() {
		span.SetAttributes(attrRequestID.String(strconv.FormatInt(id, 10)))
	}
	body, err := json.Marshal(rpcRequest{JSONRPC: "2.0", ID: id, Method: method, Params: params})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return nil, fmt.Errorf("%w: reading the response: %w", errConnection, err)
	}
	var r rpcResponse
	if jerr := json.Unmarshal(data, &r); jerr == nil && r.Error != nil {
		return nil, r.Error
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		// The credentials the configuration gives it (or none) are refused: no retry
		// helps until someone changes them.
		return nil, misconfigured(&StatusError{Status: resp.StatusCode, Err: errors.New(strings.TrimSpace(string(data[:min(len(data), 200)])))})
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusBadGateway ||
		resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusGatewayTimeout:
		// A proxy or an overloaded server turned the request away before it ran.
		return nil, fmt.Errorf("%w: HTTP %s", errRejected, resp.Status)
	case resp.StatusCode >= 500 && resp.StatusCode != http.StatusNotImplemented && resp.StatusCode != http.StatusHTTPVersionNotSupported:
		// The server failed while handling the request, which may or may not have run:
		// transient, retried for calls safe to repeat, outcome_unknown for the others.
		return nil, fmt.Errorf("%w: HTTP %s", errConnection, resp.Status)
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return nil, &jsonrpc.Error{Code: -32000, Message: "HTTP " + resp.Status}
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, &jsonrpc.Error{Code: -32700, Message: fmt.Sprintf("the response is not JSON-RPC: %v", err)}
	}
	if got := strings.TrimSpace(string(r.ID)); got != strconv.FormatInt(id, 10) && got != `"`+strconv.FormatInt(id, 10)+`"` {
		// Another request's answer (a proxy mixing replies up): not this call's result.
		return nil, fmt.Errorf("%w: the reply's id is %s, the request's %d", errConnection, got, id)
	}
	return r.Result, nil
}

func (s *rpcSession) listTools(ctx context.Context) ([]*mcp.Tool, error) {
	var tools []*mcp.Tool
	cursor := ""
	for page := 0; page < maxPages; page++ {
		var params any
		if cursor != "" {
			params = map[string]string{"cursor": cursor}
		}
		raw, err := s.call(ctx, "tools/list", params)
		if err != nil {
			return nil, err
		}
		var res struct {
			Tools      []*mcp.Tool `json:"tools"`
			NextCursor string      `json:"nextCursor"`
		}
		if err := json.Unmarshal(raw, &res); err != nil {
			return nil, &jsonrpc.Error{Code: -32700, Message: fmt.Sprintf("tools/list: %v", err)}
		}
		tools = append(tools, res.Tools...)
		if cursor = res.NextCursor; cursor == "" {
			return tools, nil
		}
	}
	return tools, nil
}

// callTool accepts either an MCP CallToolResult or, as older services answer, any JSON
// value as the result itself.
func (s *rpcSession) callTool(ctx context.Context, name string, args json.RawMessage) (*mcp.CallToolResult, error) {
	params := map[string]any{"name": name, "arguments": args}
	if meta := traceMeta(ctx); meta != nil {
		params["_meta"] = meta
	}
	raw, err := s.call(ctx, "tools/call", params)
	if err != nil {
		return nil, err
	}
	if looksLikeCallToolResult(raw) {
		var res mcp.CallToolResult
		if err := json.Unmarshal(raw, &res); err == nil {
			return &res, nil
		}
	}
	if len(raw) == 0 {
		raw = json.RawMessage("null")
	}
	return &mcp.CallToolResult{StructuredContent: raw}, nil
}

// looksLikeCallToolResult reports whether raw is an object shaped like an MCP result: a
// "content" array, possibly with "isError" and "structuredContent", and nothing else but
// "_meta".
func looksLikeCallToolResult(raw json.RawMessage) bool {
	obj, err := messages.DecodeMembers(raw)
	if err != nil {
		return false
	}
	content, ok := obj["content"]
	if !ok || len(content) == 0 || content[0] != '[' {
		return false
	}
	for k := range obj {
		switch k {
		case "content", "isError", "structuredContent", "_meta":
		default:
			return false
		}
	}
	return true
}

// done never closes: without a connection, nothing ends a session but close.
func (s *rpcSession) ping(context.Context) error { return errNoPing }

func (s *rpcSession) done() <-chan struct{} { return nil }

func (s *rpcSession) describe() (string, string) { return "", "" }

func (s *rpcSession) close() error {
	s.cancel()
	return nil
}
