package mcpwire

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolbus/toolbus/pkg/messages"
	"golang.org/x/oauth2"
)

// directCalls sends tools/call on an established streamable HTTP session as one POST of
// toolbus's own and reads the answer with encoding/json. The go-sdk reads every message
// through a decoder with a fresh 32 KiB buffer, four times per tools/call (the request's
// _meta for a header, the message, the result, its content): about 128 KiB of garbage
// and most of the CPU of a remote call. Everything else — initialize, tools/list, the
// standalone stream, DELETE on close — stays with the SDK's session, whose id and
// protocol version the calls carry.
//
// It speaks the session protocols (2024-11-05 through 2025-11-25), as the SDK does:
// headers Mcp-Session-Id and Mcp-Protocol-Version, the answer as application/json or as
// an event stream that may carry the server's own requests (answered from [peer], as
// the SDK's handlers would), its notifications (tools/list_changed is passed on) and a
// resumable stream (resumed with Last-Event-ID, as the SDK does). Sessions of a later
// protocol keep the SDK's calls (per-request _meta, standard headers).
type directCalls struct {
	url     string
	client  *http.Client
	oauth   auth.OAuthHandler
	session string // Mcp-Session-Id; empty for a stateless server
	version string // the negotiated protocol version
	peer    *peer
	cs      *mcp.ClientSession // for the requests handed to the elicitation handler
	// maxMessage bounds one message of the answer (ServerConfig.MaxMessageBytes).
	maxMessage int
	nextID     atomic.Int64
}

// directProtocol reports whether toolbus sends tools/call itself in a session of this
// protocol version (see [directCalls]).
func directProtocol(version string) bool {
	switch version {
	case "2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25":
		return true
	}
	return false
}

// SSE resumption, as the SDK does it: up to maxResumes reconnects, the first after the
// server's retry delay or a second, each later one 1.5 times longer.
const (
	maxResumes  = 5
	resumeDelay = time.Second
)

// errInputRequired: the server answered a multi-round-trip result (SEP-2322), which
// asks for the call to be sent again with the client's answers; the SDK's client does
// that, so the call goes to it.
var errInputRequired = errors.New("the server asks for input, as protocol 2026-07-28 does")

// wireMessage is a JSON-RPC message of the answer.
type wireMessage struct {
	ID     json.RawMessage
	Method string
	Params json.RawMessage
	Result json.RawMessage
	Error  *jsonrpc.Error
}

// decodeMessage reads a JSON-RPC message as the SDK does: members by their exact names
// (encoding/json would match "ID" or "Result" too).
func decodeMessage(data []byte) (*wireMessage, error) {
	obj, err := messages.DecodeMembers(data)
	if err != nil {
		return nil, err
	}
	m := &wireMessage{ID: obj["id"], Params: obj["params"], Result: obj["result"]}
	if raw, ok := obj["method"]; ok {
		if m.Method, err = messages.DecodeString(raw); err != nil {
			return nil, fmt.Errorf("method: %w", err)
		}
	}
	if raw, ok := obj["error"]; ok && !isNull(raw) {
		e, err := messages.DecodeMembers(raw)
		if err != nil {
			return nil, fmt.Errorf("error: %w", err)
		}
		m.Error = &jsonrpc.Error{Data: e["data"]}
		if err := json.Unmarshal(e["code"], &m.Error.Code); err != nil {
			return nil, fmt.Errorf("error code: %w", err)
		}
		if raw, ok := e["message"]; ok {
			if m.Error.Message, err = messages.DecodeString(raw); err != nil {
				return nil, fmt.Errorf("error message: %w", err)
			}
		}
	}
	return m, nil
}

func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || bytes.Equal(raw, []byte("null"))
}

// callTool sends tools/call and returns its result. Errors are classified as the SDK's
// are ([neverSent], [brokeConnection]): a JSON-RPC error answer is a *jsonrpc.Error.
func (d *directCalls) callTool(ctx context.Context, name string, args json.RawMessage, meta mcp.Meta) (*mcp.CallToolResult, error) {
	// String ids never meet the SDK's numeric ones in the same session.
	id := `"toolbus-` + strconv.FormatInt(d.nextID.Add(1), 10) + `"`
	body, err := encodeCall(id, name, args, meta)
	if err != nil {
		return nil, err
	}
	res, err := d.roundTrip(ctx, id, methodToolsCall, body)
	if err != nil {
		return nil, err
	}
	if res.Error != nil {
		return nil, res.Error
	}
	return decodeCallResult(res.Result)
}

// request sends any request of the session (rawRequester): the tasks' methods, a
// tools/call with a task.
func (d *directCalls) request(ctx context.Context, method string, params any) (json.RawMessage, error) {
	id := `"toolbus-` + strconv.FormatInt(d.nextID.Add(1), 10) + `"`
	p, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	m, _ := json.Marshal(method)
	body := make([]byte, 0, len(p)+len(id)+len(m)+48)
	body = append(body, `{"jsonrpc":"2.0","id":`...)
	body = append(body, id...)
	body = append(body, `,"method":`...)
	body = append(body, m...)
	body = append(body, `,"params":`...)
	body = append(append(body, p...), '}')
	res, err := d.roundTrip(ctx, id, method, body)
	if err != nil {
		return nil, err
	}
	if res.Error != nil {
		return nil, res.Error
	}
	return res.Result, nil
}

// roundTrip posts the request id (body) and reads its answer: a JSON body, or an event
// stream on which the server's own requests are answered and its notifications passed on.
func (d *directCalls) roundTrip(ctx context.Context, id, method string, body []byte) (_ *wireMessage, err error) {
	defer func() {
		if err != nil && ctx.Err() != nil {
			d.cancelled(id)
			err = ctx.Err()
		}
	}()
	// The request outlives the call by the end of its body, read after the answer so
	// that the connection serves the next call: cancelling it when the caller's context
	// ends (as callers do once a call returns) would close the connection instead. It
	// is cancelled with ctx only while the call waits for its answer.
	reqCtx, cancelReq := context.WithCancel(context.WithoutCancel(ctx))
	unwatch := context.AfterFunc(ctx, cancelReq)
	resp, err := d.post(reqCtx, body)
	if err != nil {
		unwatch()
		cancelReq()
		return nil, err
	}
	streamed := false
	defer func() {
		unwatch()
		end := func() { finish(resp); cancelReq() }
		if streamed {
			// A server may keep the stream open after the answer (it SHOULD close
			// it): the call does not wait for its end.
			go end()
		} else {
			end()
		}
	}()
	if err := d.check(resp); err != nil {
		return nil, err
	}
	media, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	var res *wireMessage
	switch media {
	case "application/json":
		data, err := readLimited(resp.Body, d.maxMessage)
		if err != nil {
			return nil, d.readFailed(ctx, err)
		}
		m, err := decodeMessage(data)
		if err != nil || m.Method != "" || string(m.ID) != id {
			return nil, fmt.Errorf("%w: the answer to %s is not its JSON-RPC response", errConnection, method)
		}
		res = m
	case "text/event-stream":
		streamed = true
		if res, err = d.stream(ctx, id, resp); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("%w: the answer to %s has content type %q", errConnection, method, resp.Header.Get("Content-Type"))
	}
	return res, nil
}

// encodeCall writes the tools/call request of id.
func encodeCall(id, name string, args json.RawMessage, meta mcp.Meta) ([]byte, error) {
	params := struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments,omitempty"`
		Meta      mcp.Meta        `json:"_meta,omitempty"`
	}{name, args, meta}
	p, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(p)+len(id)+64)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"method":"tools/call","params":`...)
	b = append(b, p...)
	return append(b, '}'), nil
}

// post sends one message of the session, authorizing once more when the server asks
// for it, as the SDK's transport does.
func (d *directCalls) post(ctx context.Context, body []byte) (*http.Response, error) {
	send := func() (*http.Request, *http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url, bytes.NewReader(body))
		if err != nil {
			return nil, nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if err := d.headers(ctx, req); err != nil {
			return nil, nil, err
		}
		resp, err := d.client.Do(req)
		if err != nil {
			// As the SDK reads it, a request that got no HTTP answer did not reach the
			// server; a dial failure proves it ([neverSent]), anything else may not.
			return nil, nil, fmt.Errorf("%w: %w", errConnection, err)
		}
		return req, resp, nil
	}
	req, resp, err := send()
	if err != nil {
		return nil, err
	}
	if (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) && d.oauth != nil {
		if err := d.oauth.Authorize(ctx, req, resp); err != nil {
			drain(resp)
			return nil, fmt.Errorf("%w: authorization: %w", errRejected, err)
		}
		drain(resp)
		_, resp, err = send()
	}
	return resp, err
}

// headers sets the session's headers and the OAuth token on req.
func (d *directCalls) headers(ctx context.Context, req *http.Request) error {
	if d.oauth != nil {
		ts, err := d.oauth.TokenSource(ctx)
		if err != nil {
			return fmt.Errorf("%w: %w", errRejected, err)
		}
		if ts != nil {
			token, err := ts.Token()
			var retrieve *oauth2.RetrieveError
			switch {
			case err == nil && token != nil:
				req.Header.Set("Authorization", "Bearer "+token.AccessToken)
			case err != nil && !(errors.As(err, &retrieve) && retrieve.ErrorCode == "invalid_grant"):
				// An invalid grant goes without a token: the 401 starts authorization.
				return fmt.Errorf("%w: %w", errRejected, err)
			}
		}
	}
	req.Header.Set("Mcp-Protocol-Version", d.version)
	if d.session != "" {
		req.Header.Set("Mcp-Session-Id", d.session)
	}
	return nil
}

// check classifies an answer that is not 2xx, as the SDK's transport does.
func (d *directCalls) check(resp *http.Response) error {
	code := resp.StatusCode
	switch {
	case code >= 200 && code <= 299 && code != http.StatusAccepted:
		return nil
	case code == http.StatusTooManyRequests || code == http.StatusBadGateway ||
		code == http.StatusServiceUnavailable || code == http.StatusGatewayTimeout:
		return fmt.Errorf("%w: HTTP %s", errRejected, resp.Status)
	case code == http.StatusAccepted:
		return fmt.Errorf("%w: HTTP %s to tools/call, which needs an answer", errConnection, resp.Status)
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if m, err := decodeMessage(data); err == nil && m.Error != nil {
		return m.Error // the server's own answer (a 400 with the request's id, say)
	}
	if code == http.StatusNotFound && d.session != "" {
		return fmt.Errorf("sending tools/call in session %s: %w", d.session, mcp.ErrSessionMissing)
	}
	return fmt.Errorf("sending tools/call: %s", http.StatusText(code))
}

// stream reads an event stream until the response of id, answering the server's
// requests and passing on its notifications on the way, and resuming the stream when
// the server ends it early with an event id.
func (d *directCalls) stream(ctx context.Context, id string, resp *http.Response) (*wireMessage, error) {
	for resumes := 0; ; resumes++ {
		res, last, retry, err := d.events(ctx, id, resp.Body)
		if res != nil || err != nil {
			return res, err
		}
		if last == "" {
			return nil, fmt.Errorf("%w: the server ended the stream of tools/call without an answer", errConnection)
		}
		if resumes == maxResumes {
			return nil, fmt.Errorf("%w: the stream of tools/call ended %d times without an answer", errConnection, resumes+1)
		}
		delay := time.Duration(float64(resumeDelay) * math.Pow(1.5, float64(resumes)))
		if retry > 0 && resumes == 0 {
			delay = retry
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		// The stream read so far ended; callTool closes the first, a deferred Close
		// each resumed one (a GET stream may stay open after the answer: closed, not
		// read to its end).
		if resp, err = d.resume(ctx, last); err != nil {
			return nil, err
		}
		defer resp.Body.Close()
	}
}

// resume asks for the rest of a stream after its event last.
func (d *directCalls) resume(ctx context.Context, last string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.url, nil)
	if err != nil {
		return nil, err
	}
	if err := d.headers(ctx, req); err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", last)
	resp, err := d.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: resuming the stream of tools/call: %w", errConnection, err)
	}
	if resp.StatusCode != http.StatusOK {
		drain(resp)
		return nil, fmt.Errorf("%w: resuming the stream of tools/call: HTTP %s", errConnection, resp.Status)
	}
	return resp, nil
}

// events reads one event stream: the response of id when it came, else the last event
// id and retry delay the stream gave before it ended.
func (d *directCalls) events(ctx context.Context, id string, body io.Reader) (res *wireMessage, last string, retry time.Duration, err error) {
	r := readers.Get().(*bufio.Reader)
	r.Reset(body)
	defer func() {
		r.Reset(nil)
		readers.Put(r)
	}()
	var data []byte
	event := ""
	for {
		line, err := readLine(r, d.maxMessage)
		if err == io.EOF && len(line) == 0 {
			return nil, last, retry, nil
		}
		if err != nil && err != io.EOF {
			if ctx.Err() == nil && last != "" {
				return nil, last, retry, nil // resumable, as a stream the server ended
			}
			return nil, "", 0, d.readFailed(ctx, err)
		}
		if len(line) > 0 {
			field, value, _ := bytes.Cut(line, []byte(":"))
			value = bytes.TrimPrefix(value, []byte(" "))
			switch string(field) {
			case "event":
				event = string(value)
			case "data":
				if data != nil {
					data = append(data, '\n')
				}
				data = append(data, value...)
				if d.maxMessage > 0 && len(data) > d.maxMessage {
					return nil, "", 0, fmt.Errorf("%w: a message of the answer is over %d bytes", errConnection, d.maxMessage)
				}
			case "id":
				last = string(value)
			case "retry":
				if ms, perr := strconv.Atoi(string(value)); perr == nil {
					retry = time.Duration(ms) * time.Millisecond
				}
			}
			if err == nil {
				continue
			}
		}
		// A blank line (or the end of the stream) dispatches the event.
		if len(data) > 0 && (event == "" || event == "message") {
			m, jerr := decodeMessage(data)
			if jerr != nil {
				return nil, "", 0, fmt.Errorf("%w: an event of the answer is not JSON-RPC: %v", errConnection, jerr)
			}
			switch {
			case m.Method != "" && !isNull(m.ID):
				if aerr := d.answer(ctx, m); aerr != nil {
					return nil, "", 0, aerr
				}
			case m.Method != "":
				d.notified(ctx, m.Method, m.Params)
			case string(m.ID) == id:
				return m, "", 0, nil
			}
		}
		data, event = nil, ""
		if err == io.EOF {
			return nil, last, retry, nil
		}
	}
}

// readFailed is the error of an answer that broke off: the context's when it ended
// (the server is told in callTool), else a broken connection (the tool may have run).
func (d *directCalls) readFailed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("%w: reading the answer to tools/call: %w", errConnection, err)
}

// cancelled tells the server that toolbus no longer waits for the request id, as the
// SDK does when a call's context ends.
func (d *directCalls) cancelled(id string) {
	body := []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + id + `,"reason":"context canceled"}}`)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), terminateGrace)
		defer cancel()
		if resp, err := d.post(ctx, body); err == nil {
			finish(resp)
		}
	}()
}

// answer replies to a request the server sent in the stream, as the SDK's client would
// with the same handlers.
func (d *directCalls) answer(ctx context.Context, m *wireMessage) error {
	result, rerr := d.peer.answer(ctx, d.cs, m.Method, m.Params)
	reply := struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  any             `json:"result,omitempty"`
		Error   *jsonrpc.Error  `json:"error,omitempty"`
	}{JSONRPC: "2.0", ID: m.ID, Result: result, Error: rerr}
	body, err := json.Marshal(reply)
	if err != nil {
		return err
	}
	resp, err := d.post(ctx, body)
	if err != nil {
		return err
	}
	finish(resp)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("%w: the server refused the answer to its %s: HTTP %s", errConnection, m.Method, resp.Status)
	}
	return nil
}

func (d *directCalls) notified(ctx context.Context, method string, params json.RawMessage) {
	switch {
	case (method == "notifications/tools/list_changed" || method == "notifications/resources/list_changed" ||
		method == "notifications/prompts/list_changed") && d.peer.listChanged != nil:
		d.peer.listChanged()
	case method == "notifications/message" && d.peer.log != nil:
		var p mcp.LoggingMessageParams
		if json.Unmarshal(params, &p) == nil {
			d.peer.log(ctx, &mcp.LoggingMessageRequest{Session: d.cs, Params: &p})
		}
	case method == "notifications/progress" && d.peer.progress != nil:
		var p mcp.ProgressNotificationParams
		if json.Unmarshal(params, &p) == nil {
			d.peer.progress(context.Background(), &mcp.ProgressNotificationClientRequest{Params: &p})
		}
	}
}

// decodeCallResult reads a CallToolResult. Text blocks are read here; a result with any
// other kind of block is read by the SDK's own decoder.
func decodeCallResult(raw json.RawMessage) (*mcp.CallToolResult, error) {
	var content []json.RawMessage
	res := &mcp.CallToolResult{}
	var resultType string
	obj, err := messages.DecodeMembers(raw)
	if err == nil && !isNull(obj["content"]) {
		err = json.Unmarshal(obj["content"], &content)
	}
	if err == nil && !isNull(obj["isError"]) {
		err = json.Unmarshal(obj["isError"], &res.IsError)
	}
	if err == nil && !isNull(obj["resultType"]) {
		resultType, err = messages.DecodeString(obj["resultType"])
	}
	if err != nil {
		return nil, &jsonrpc.Error{Code: codeParseError, Message: fmt.Sprintf("tools/call: the result is not a CallToolResult: %v", err)}
	}
	if resultType == "input_required" {
		return nil, errInputRequired
	}
	res.Content = make([]mcp.Content, 0, len(content))
	for _, block := range content {
		c, err := messages.DecodeMembers(block)
		var kind, text string
		if err == nil {
			kind, err = messages.DecodeString(c["type"])
		}
		if err == nil && kind == "text" {
			text, err = messages.DecodeString(c["text"])
		}
		if err != nil || kind != "text" {
			var full mcp.CallToolResult
			if err := json.Unmarshal(raw, &full); err != nil {
				return nil, &jsonrpc.Error{Code: codeParseError, Message: fmt.Sprintf("tools/call: the result is not a CallToolResult: %v", err)}
			}
			return &full, nil
		}
		res.Content = append(res.Content, &mcp.TextContent{Text: text})
	}
	// Kept as written: the SDK reads it into an any, which sorts its keys and rounds its
	// numbers to float64 (an id of 19 digits loses its last ones).
	if sc := obj["structuredContent"]; !isNull(sc) {
		res.StructuredContent = json.RawMessage(bytes.TrimSpace(sc))
	}
	return res, nil
}

// finishWait bounds how long the end of an answer's body is read after the answer, in
// nanoseconds; zero means a second (a variable for the tests).
var finishWait atomic.Int64

// finish ends a response: what is left of its body (the end of an event stream, as a
// rule) is read so that the connection serves the next call, for at most finishWait,
// and the body is closed.
func finish(resp *http.Response) {
	wait := time.Duration(finishWait.Load())
	if wait == 0 {
		wait = time.Second
	}
	t := time.AfterFunc(wait, func() { resp.Body.Close() })
	drain(resp)
	t.Stop()
}

// readers are the buffers event streams are read through.
var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4096) }}

// readLine reads one line without its end (LF or CRLF), at most max bytes (0: no bound).
// A line that fits r's buffer is returned in place, valid until the next read.
func readLine(r *bufio.Reader, max int) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if err != bufio.ErrBufferFull {
		return bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r")), err
	}
	line = append([]byte(nil), line...)
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if max > 0 && len(line) > max {
			return nil, fmt.Errorf("a line of the answer is over %d bytes", max)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		return line, err
	}
}

// readLimited reads a whole body of at most max bytes (0: no bound).
func readLimited(r io.Reader, max int) ([]byte, error) {
	if max <= 0 {
		return io.ReadAll(r)
	}
	data, err := io.ReadAll(io.LimitReader(r, int64(max)+1))
	if err == nil && len(data) > max {
		return nil, fmt.Errorf("the answer is over %d bytes", max)
	}
	return data, err
}

// peer is what toolbus answers a server's own requests with — the roots, the
// elicitation and sampling handlers it declared — and does on its notifications.
type peer struct {
	roots       []*mcp.Root
	elicit      func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error)
	sample      func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error)
	log         func(context.Context, *mcp.LoggingMessageRequest)
	listChanged func()
	progress    func(context.Context, *mcp.ProgressNotificationClientRequest)
}

// answer is the reply to the server's request method: ping, roots/list,
// elicitation/create and sampling/createMessage as declared; any other method is not
// found.
func (p *peer) answer(ctx context.Context, cs *mcp.ClientSession, method string, params json.RawMessage) (any, *jsonrpc.Error) {
	switch {
	case method == "ping":
		return struct{}{}, nil
	case method == "roots/list" && len(p.roots) > 0:
		return &mcp.ListRootsResult{Roots: p.roots}, nil
	case method == "elicitation/create" && p.elicit != nil:
		var ep mcp.ElicitParams
		if err := json.Unmarshal(params, &ep); err != nil {
			return nil, &jsonrpc.Error{Code: codeInvalidParams, Message: err.Error()}
		}
		res, err := p.elicit(ctx, &mcp.ElicitRequest{Session: cs, Params: &ep})
		if err != nil {
			return nil, rpcError(err)
		}
		return res, nil
	case method == "sampling/createMessage" && p.sample != nil:
		var sp mcp.CreateMessageParams
		if err := json.Unmarshal(params, &sp); err != nil {
			return nil, &jsonrpc.Error{Code: codeInvalidParams, Message: err.Error()}
		}
		res, err := p.sample(ctx, &mcp.CreateMessageRequest{Session: cs, Params: &sp})
		if err != nil {
			return nil, rpcError(err)
		}
		return res, nil
	}
	return nil, &jsonrpc.Error{Code: codeMethodNotFound, Message: fmt.Sprintf("method %q not found", method)}
}

// rpcError is err as the JSON-RPC error a server is answered with.
func rpcError(err error) *jsonrpc.Error {
	var werr *jsonrpc.Error
	if errors.As(err, &werr) {
		return werr
	}
	return &jsonrpc.Error{Code: -32603, Message: err.Error()}
}

// drain reads what is left of a small body (up to 64 KiB) and closes it, so that its
// connection serves the next request.
func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
}
