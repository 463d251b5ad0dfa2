package mcpwire

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/reaper"
)

// maxPages bounds tools/list pagination against a server that never stops paging.
const maxPages = 1000

// How long a stdio server gets to exit after its stdin is closed, before SIGTERM.
const terminateGrace = 2 * time.Second

// session is one live connection to a server.
type session interface {
	listTools(ctx context.Context) ([]*mcp.Tool, error)
	callTool(ctx context.Context, name string, args json.RawMessage) (*mcp.CallToolResult, error)
	// describe gives the session's id and protocol version, when it has them.
	describe() (id, protocolVersion string)
	// ping checks the session without listing its tools (a server whose tools the
	// configuration declares is never asked for them): errNoPing when its protocol has
	// no ping (2026-07-28 and later, plain JSON-RPC).
	ping(ctx context.Context) error
	// done is closed when the connection ended, by either side.
	done() <-chan struct{}
	close() error
}

// Internal causes, classified by [neverSent].
var (
	// errRejected: the server turned the request away before running it.
	errRejected = errors.New("request rejected")
	// errConnection: the connection broke.
	errConnection = errors.New("connection failed")
)

// mcpSession is a go-sdk client session.
type mcpSession struct {
	cs   *mcp.ClientSession
	dead chan struct{}
	// life is done when the session is closed or the pool is; it cancels the calls
	// under way, which the SDK would otherwise wait for, and what the transport keeps
	// open (the SSE stream).
	life   context.Context
	cancel context.CancelFunc
	cmd    *child // the process of a stdio server
	// tasks are the tools the server lists as requiring MCP tasks, read off the raw
	// messages; listTools leaves them out (taskOnly names them). Listings may run at
	// once (the pool's refresh, a health probe over the session): listed guards taskOnly.
	tasks    *taskTools
	listed   sync.Mutex
	taskOnly []string
	// direct sends tools/call itself on a streamable HTTP session (nil: the SDK does).
	direct *directCalls
	// raw sends the requests the SDK does not (raw.go): direct, or the watched
	// connection of any other transport; nil when the session has neither (a streamable
	// HTTP session of a protocol toolbus does not speak itself).
	raw rawRequester
	// overSSE: the session is an HTTP+SSE connection, which keeps the server's state
	// for as long as it is open although it has no session id.
	overSSE bool
}

func (s *mcpSession) listTools(ctx context.Context) ([]*mcp.Tool, error) {
	if r := s.cs.InitializeResult(); r != nil && r.Capabilities != nil && r.Capabilities.Tools == nil {
		return nil, nil
	}
	var tools []*mcp.Tool
	cursor := ""
	for page := 0; page < maxPages; page++ {
		res, err := s.cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			return nil, err
		}
		tools = append(tools, res.Tools...)
		if cursor = res.NextCursor; cursor == "" {
			break
		}
	}
	var taskOnly []string
	callable := tools[:0]
	for _, t := range tools {
		if s.tasks.required(t.Name) && s.raw == nil {
			taskOnly = append(taskOnly, t.Name)
			continue
		}
		callable = append(callable, t)
	}
	s.listed.Lock()
	s.taskOnly = taskOnly
	s.listed.Unlock()
	return callable, nil
}

// taskOnlyTools names the tools the last listing left out because they can only be
// called as MCP tasks.
func (s *mcpSession) taskOnlyTools() string {
	s.listed.Lock()
	defer s.listed.Unlock()
	return strings.Join(s.taskOnly, ", ")
}

func (s *mcpSession) callTool(ctx context.Context, name string, args json.RawMessage) (*mcp.CallToolResult, error) {
	cctx, stop := boundTo(ctx, s.life)
	defer stop()
	var res *mcp.CallToolResult
	var err error
	if s.direct != nil {
		res, err = s.direct.callTool(cctx, name, args, traceMeta(ctx))
	}
	if s.direct == nil || errors.Is(err, errInputRequired) {
		res, err = s.cs.CallTool(cctx, &mcp.CallToolParams{Name: name, Arguments: args, Meta: traceMeta(ctx)})
	}
	if err != nil && ctx.Err() == nil && s.life.Err() != nil {
		return nil, fmt.Errorf("%w: the session was closed during the call", errConnection)
	}
	return res, err
}

// boundTo returns ctx, also cancelled when life is done.
func boundTo(ctx, life context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	unhook := context.AfterFunc(life, cancel)
	return ctx, func() { unhook(); cancel() }
}

func (s *mcpSession) ping(ctx context.Context) error {
	if _, version := s.describe(); !sessionProtocol(version) {
		return errNoPing
	}
	ctx, done := boundTo(ctx, s.life)
	defer done()
	return s.cs.Ping(ctx, nil)
}

// errNoPing: the session's protocol has no ping.
var errNoPing = errors.New("the protocol has no ping")

// sessionProtocol reports whether version is one of the session protocols (2024-11-05
// through 2025-11-25), which have ping; later ones have neither sessions nor ping.
func sessionProtocol(version string) bool { return directProtocol(version) }

func (s *mcpSession) done() <-chan struct{} { return s.dead }

func (s *mcpSession) describe() (string, string) {
	version := ""
	if r := s.cs.InitializeResult(); r != nil {
		version = r.ProtocolVersion
	}
	return s.cs.ID(), version
}

func (s *mcpSession) close() error {
	s.cancel()
	err := s.cs.Close()
	if s.cmd != nil {
		s.cmd.kill()
	}
	<-s.dead
	if s.cmd != nil && errors.As(err, new(*exec.ExitError)) {
		err = nil // a child that exited by signal or with a status is expected here
	}
	return err
}

// sseProtocol is the protocol version of HTTP+SSE sessions: the last that has the
// transport.
const sseProtocol = "2025-11-25"

// dial opens a session to the server named name. ctx bounds the whole session; the
// attempt itself is bounded by timeout.
func dial(ctx context.Context, name string, cfg ServerConfig, client *mcpClient, t mcp.Transport, httpClient *http.Client, oauth auth.OAuthHandler, log *slog.Logger, timeout time.Duration) (session, error) {
	if t == nil && cfg.Transport() == TransportJSONRPC {
		return newRPCSession(ctx, cfg.URL, withHeaders(httpClient, cfg.Headers)), nil
	}
	// Some transports keep the context of Connect for the session's lifetime (the SSE
	// GET stream), so the attempt's time limit is a timer rather than a deadline.
	sctx, cancel := context.WithCancel(ctx)
	var cmd *child
	var direct *directCalls
	tasks := &taskTools{}
	var refused atomic.Int32       // a 401 or 403 the server answered while connecting
	var notStreamable atomic.Int32 // another 4xx answer to a POST, when FallsBackToSSE
	if t == nil {
		switch cfg.Transport() {
		case TransportStdio:
			var err error
			if cmd, err = command(cfg, log); err != nil {
				cancel()
				return nil, misconfigured(err)
			}
			t = &stdioTransport{cmd: cmd, maxMessage: cfg.MaxMessageBytes, grace: terminateGrace, stray: func(line string) {
				log.Debug("stdio server printed a line that is not JSON-RPC; skipped", "server", name, "line", line)
			}}
		case TransportHTTP:
			hc := sessionBound(forgottenSessions(noteRefusals(withHeaders(observingTasks(httpClient, tasks), cfg.Headers), &refused)), sctx)
			if cfg.FallsBackToSSE() {
				hc = noteNotStreamable(hc, &notStreamable)
			}
			t = &mcp.StreamableClientTransport{Endpoint: cfg.URL, HTTPClient: hc, OAuthHandler: oauth}
			direct = &directCalls{url: cfg.URL, client: hc, oauth: oauth, peer: &client.peer, maxMessage: cfg.maxMessage()}
		case TransportSSE:
			t = &mcp.SSEClientTransport{Endpoint: cfg.URL, HTTPClient: sessionBound(noteRefusals(withHeaders(httpClient, cfg.Headers), &refused), sctx)}
		default:
			cancel()
			return nil, fmt.Errorf("unknown transport %q", cfg.Type)
		}
	}
	var watched *watching
	if _, streamable := t.(*mcp.StreamableClientTransport); !streamable {
		watched = &watching{Transport: t, tasks: tasks}
		t = watched
	}
	var opts *mcp.ClientSessionOptions
	if cfg.Transport() == TransportSSE {
		// The HTTP+SSE transport ends with the protocols that have it: its sessions speak
		// 2025-11-25 at the newest. Asking for that leaves the SDK no server/discover to
		// try first, which a go-sdk SSE server sometimes answers for protocols its
		// transport cannot serve (it reads its session's versions before setting them).
		opts = &mcp.ClientSessionOptions{ProtocolVersion: sseProtocol}
	}
	timer := time.AfterFunc(timeout, cancel)
	cs, err := client.Connect(sctx, t, opts)
	expired := !timer.Stop()
	if err != nil {
		cancel()
		if cmd != nil {
			cmd.kill()
		}
		if expired && ctx.Err() == nil {
			return nil, fmt.Errorf("no answer to initialize within %v: %w", timeout, context.DeadlineExceeded)
		}
		if status := notStreamable.Load(); status != 0 && ctx.Err() == nil {
			// The server does not take streamable HTTP's POST: as the MCP specification's
			// backwards compatibility section has clients do (and Claude Code and Cursor
			// do), try the HTTP+SSE transport at the same URL.
			sse := cfg
			sse.Type = string(TransportSSE)
			s, sseErr := dial(ctx, name, sse, client, nil, httpClient, nil, log, timeout)
			if sseErr != nil {
				return nil, fmt.Errorf("streamable HTTP: %w (HTTP %d); HTTP+SSE: %w", err, status, sseErr)
			}
			log.Debug("the server does not speak streamable HTTP; reached it over HTTP+SSE", "server", name, "status", status)
			return s, nil
		}
		if status := refused.Load(); status != 0 {
			err = &StatusError{Status: int(status), Static: len(cfg.Headers) > 0 && cfg.OAuth == nil, Err: err}
		}
		return nil, misconfigured(err)
	}
	s := &mcpSession{cs: cs, dead: make(chan struct{}), life: sctx, cancel: cancel, cmd: cmd, tasks: tasks, overSSE: cfg.Transport() == TransportSSE}
	if watched != nil && watched.conn != nil {
		s.raw = watched.conn
	}
	if r := cs.InitializeResult(); direct != nil && r != nil && directProtocol(r.ProtocolVersion) {
		direct.session, direct.version, direct.cs = cs.ID(), r.ProtocolVersion, cs
		s.direct, s.raw = direct, direct
	}
	if client.peer.log != nil {
		askForLogs(sctx, cs, timeout, log, name)
	}
	go func() {
		_ = cs.Wait()
		close(s.dead)
	}()
	return s, nil
}

// logLevel is the least severe of a server's log messages that toolbus asks for, when
// someone listens to them (Options.Log).
const logLevel mcp.LoggingLevel = "info"

type logLevelKey struct{}

// withLogLevel returns ctx whose requests ask the server for its log messages from level
// on.
func withLogLevel(ctx context.Context, level mcp.LoggingLevel) context.Context {
	return context.WithValue(ctx, logLevelKey{}, string(level))
}

func logLevelOf(ctx context.Context) string {
	l, _ := ctx.Value(logLevelKey{}).(string)
	return l
}

// askForLogs asks a server that has logging for its messages from logLevel on: servers
// such as the go-sdk's send none until the client sets a level. A server that refuses is
// left as it is.
func askForLogs(ctx context.Context, cs *mcp.ClientSession, timeout time.Duration, log *slog.Logger, name string) {
	if r := cs.InitializeResult(); r == nil || r.Capabilities == nil || r.Capabilities.Logging == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: logLevel}); err != nil {
		log.Debug("the server did not take a log level", "server", name, "err", err)
	}
}

// command builds the child process of a stdio server: a minimal environment
// ([serverEnv]), its own process group so that it and its children can be killed
// together, and stderr into the log.
func command(cfg ServerConfig, log *slog.Logger) (*child, error) {
	cmd := exec.Command(cfg.Command, cfg.Args...)
	cmd.Dir = cfg.Cwd
	cmd.Env = serverEnv(cfg, os.LookupEnv)
	cmd.Stderr = &logWriter{log: log}
	// A grandchild holding stderr open must not keep Wait from returning.
	cmd.WaitDelay = terminateGrace
	var limits reaper.Limits
	if cfg.Limits != nil {
		limits = *cfg.Limits
	}
	tree, err := reaper.ContainWith(cmd, limits.Or(reaper.DefaultServerLimits).Effective())
	if err != nil {
		return nil, err
	}
	return &child{Cmd: cmd, tree: tree}, nil
}

// child is a stdio server's process, run under a reaper: whatever it starts (an npx
// wrapper's real server, a daemon it forks off) ends with it, and all of it ends if
// toolbus dies.
type child struct {
	*exec.Cmd
	tree *reaper.Containment
}

// kill kills the server and every process it started.
func (c *child) kill() { c.tree.Kill() }

// DefaultEnv names the variables of toolbus's environment every stdio server gets, as
// the reference MCP clients pass them (the TypeScript SDK's getDefaultEnvironment):
// enough to find programs and a home, nothing of toolbus's own secrets.
func DefaultEnv() []string {
	if runtime.GOOS == "windows" {
		return []string{"APPDATA", "HOMEDRIVE", "HOMEPATH", "LOCALAPPDATA", "PATH", "PROCESSOR_ARCHITECTURE",
			"SYSTEMDRIVE", "SYSTEMROOT", "TEMP", "USERNAME", "USERPROFILE", "PROGRAMFILES"}
	}
	return []string{"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"}
}

// serverEnv is the environment of a stdio server: DefaultEnv and cfg.InheritEnv from
// toolbus's own (lookup), then cfg.Env, which wins.
func serverEnv(cfg ServerConfig, lookup func(string) (string, bool)) []string {
	var env []string
	for _, name := range slices.Concat(DefaultEnv(), cfg.InheritEnv) {
		if _, set := cfg.Env[name]; set {
			continue
		}
		if v, ok := lookup(name); ok && !strings.HasPrefix(v, "()") { // no exported shell functions
			env = append(env, name+"="+v)
		}
	}
	for k, v := range cfg.Env {
		env = append(env, k+"="+v)
	}
	return env
}

// logWriter logs a child's stderr at debug level, one record per write.
type logWriter struct{ log *slog.Logger }

func (w *logWriter) Write(p []byte) (int, error) {
	w.log.Debug("stderr", "text", string(p))
	return len(p), nil
}

// noteNotStreamable returns a client that records in status a 4xx answer to a POST other
// than a refusal of credentials (401, 403) or a request to slow down (429): what an
// HTTP+SSE server answers streamable HTTP's initialize (the go-sdk's error says only
// "Not Found" or "Method Not Allowed").
func noteNotStreamable(base *http.Client, status *atomic.Int32) *http.Client {
	return wrapTransport(base, func(rt http.RoundTripper) http.RoundTripper { return notStreamable{base: rt, status: status} })
}

type notStreamable struct {
	base   http.RoundTripper
	status *atomic.Int32
}

func (t notStreamable) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err == nil && r.Method == http.MethodPost && resp.StatusCode >= 400 && resp.StatusCode < 500 {
		switch resp.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden, http.StatusTooManyRequests:
		default:
			t.status.Store(int32(resp.StatusCode))
		}
	}
	return resp, err
}

// noteRefusals returns a client that records in status the last 401 or 403 a server
// answers: the go-sdk says only "Forbidden", and a refusal of the configured
// credentials is a failure no retry ends ([Misconfigured]).
func noteRefusals(base *http.Client, status *atomic.Int32) *http.Client {
	return wrapTransport(base, func(rt http.RoundTripper) http.RoundTripper { return refusals{base: rt, status: status} })
}

type refusals struct {
	base   http.RoundTripper
	status *atomic.Int32
}

func (t refusals) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err == nil && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) {
		t.status.Store(int32(resp.StatusCode))
	}
	return resp, err
}

// withHeaders returns a client that adds headers to every request.
func withHeaders(base *http.Client, headers map[string]string) *http.Client {
	return wrapTransport(base, func(rt http.RoundTripper) http.RoundTripper { return headerTransport{base: rt, headers: headers} })
}

// wrapTransport returns a copy of base (nil: a default client) whose transport is wrap
// of base's (nil: http.DefaultTransport).
func wrapTransport(base *http.Client, wrap func(http.RoundTripper) http.RoundTripper) *http.Client {
	if base == nil {
		base = &http.Client{}
	}
	c := *base
	rt := c.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	c.Transport = wrap(rt)
	return &c
}

type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(t.headers) == 0 && !trace.SpanContextFromContext(r.Context()).IsValid() {
		return t.base.RoundTrip(r) // nothing to add: no copy of the request
	}
	r = r.Clone(r.Context())
	for k, v := range t.headers {
		r.Header.Set(k, v)
	}
	// The call's trace goes on to the server: W3C traceparent (and tracestate) on every
	// request made in a traced context.
	traceContext.Inject(r.Context(), propagation.HeaderCarrier(r.Header))
	if span := trace.SpanFromContext(r.Context()); span.IsRecording() && r.Method == http.MethodPost && r.Body != nil {
		// The go-sdk keeps the JSON-RPC id to itself: read it off the request it sends
		// (the first maxPeek bytes; the body is sent whole).
		head, err := io.ReadAll(io.LimitReader(r.Body, maxPeek))
		if err != nil {
			r.Body.Close()
			return nil, err
		}
		nameRequestID(span, head)
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(head), r.Body), r.Body}
	}
	return t.base.RoundTrip(r)
}

// maxPeek bounds the request body a traced call reads for its JSON-RPC id.
const maxPeek = 1 << 20

// nameRequestID sets jsonrpc.request.id on span when body is a tools/call request.
func nameRequestID(span trace.Span, body []byte) {
	if !bytes.Contains(body, []byte(methodToolsCall)) {
		return
	}
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal(body, &req) == nil && req.Method == methodToolsCall && len(req.ID) > 0 {
		span.SetAttributes(attrRequestID.String(strings.Trim(string(req.ID), `"`)))
	}
}

// traceContext propagates W3C trace context to MCP servers.
var traceContext propagation.TraceContext

// traceMeta is the _meta of a request made in ctx: its traceparent and tracestate, as the
// MCP specification's trace context convention carries them, and the conversation the
// call is made for (messages.MetaConversation) and its tenant (messages.MetaTenant); nil
// with neither.
func traceMeta(ctx context.Context) mcp.Meta {
	carrier := propagation.MapCarrier{}
	traceContext.Inject(ctx, carrier)
	conv, token, level := conversationOf(ctx), progressTokenOf(ctx), logLevelOf(ctx)
	if len(carrier) == 0 && conv == "" && token == "" && level == "" {
		return nil
	}
	meta := make(mcp.Meta, len(carrier)+4)
	for k, v := range carrier {
		meta[k] = v
	}
	if token != "" {
		meta["progressToken"] = token
	}
	if level != "" {
		// Protocol 2026-07-28 has a request carry the level of the log messages wanted
		// of it (SEP-2575); the earlier ones ignore it and take logging/setLevel.
		meta[mcp.MetaKeyLogLevel] = level
	}
	if conv != "" {
		meta[messages.MetaConversation] = conv
		if tenant := messages.Tenant(conv); tenant != "" {
			meta[messages.MetaTenant] = tenant
		}
	}
	return meta
}

// sessionBound returns a client whose requests end when life does. The SDK waits for
// its requests when a session closes, and some it sends without a deadline (the answer
// to a server's own request, such as roots/list); a server that never answers one, as
// server-everything's SSE endpoint does for a session it already dropped, would
// otherwise keep Close waiting forever.
func sessionBound(base *http.Client, life context.Context) *http.Client {
	return wrapTransport(base, func(rt http.RoundTripper) http.RoundTripper { return lifeTransport{base: rt, life: life} })
}

type lifeTransport struct {
	base http.RoundTripper
	life context.Context
}

func (t lifeTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(r.Context())
	stop := func() bool { return false }
	if r.Method == http.MethodDelete {
		// The goodbye of a closing session: it goes out after life ended.
		ctx, cancel = context.WithTimeout(r.Context(), terminateGrace)
	} else {
		stop = context.AfterFunc(t.life, cancel)
	}
	resp, err := t.base.RoundTrip(r.WithContext(ctx))
	if err != nil {
		stop()
		cancel()
		return nil, err
	}
	// The body of a stream is read long after RoundTrip returned.
	resp.Body = &closeFunc{ReadCloser: resp.Body, after: func() { stop(); cancel() }}
	return resp, nil
}

type closeFunc struct {
	io.ReadCloser
	after func()
}

func (b *closeFunc) Close() error {
	err := b.ReadCloser.Close()
	b.after()
	return err
}

// forgottenSessions returns a client on which a POST in a session that the server no
// longer knows fails as rejected (see [neverSent]), so that the pool reconnects and
// sends the request once more. The spec says such a server answers 404, which the SDK
// understands; servers built on the TypeScript SDK's examples, server-everything among
// them, answer 400 with a JSON-RPC error without an id, which the SDK reports as a
// plain "Bad Request". A 400 that answers the request itself (a JSON-RPC response
// with its id) is passed on.
func forgottenSessions(base *http.Client) *http.Client {
	return wrapTransport(base, func(rt http.RoundTripper) http.RoundTripper { return sessionCheck{base: rt} })
}

type sessionCheck struct{ base http.RoundTripper }

func (t sessionCheck) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	id := r.Header.Get("Mcp-Session-Id")
	if err != nil || r.Method != http.MethodPost || id == "" || resp.StatusCode != http.StatusBadRequest {
		return resp, err
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if msg, err := jsonrpc.DecodeMessage(body); err == nil {
		if res, ok := msg.(*jsonrpc.Response); ok && res.ID.IsValid() {
			resp.Body = io.NopCloser(bytes.NewReader(body))
			return resp, nil
		}
	}
	return nil, fmt.Errorf("%w: HTTP %s in session %s: %s", errRejected, resp.Status, id, bytes.TrimSpace(body))
}

// transportCode reports whether a JSON-RPC error code is one the SDK uses for its own
// failures (client closing -32003, server closing -32004, rejected by the transport
// -32005) rather than one the server sent.
func transportCode(code int64) bool { return code <= -32003 && code >= codeRejected }

const codeRejected = -32005

// neverSent reports whether err proves that the request never reached the tool: the
// server could not be dialed, refused the session, or the HTTP layer turned the request
// away with a status and no JSON-RPC answer.
func neverSent(err error) bool {
	var op *net.OpError
	if errors.Is(err, mcp.ErrSessionMissing) || errors.Is(err, errRejected) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) ||
		(errors.As(err, &op) && op.Op == "dial") {
		return true
	}
	var werr *jsonrpc.Error
	return errors.As(err, &werr) && werr.Code == codeRejected && !ioFailure(err)
}

// reached reports whether a request that ended with err reached the server, whatever it
// answered: not when no connection could be made to send it on.
func reached(err error) bool {
	var op *net.OpError
	return err == nil || !(errors.Is(err, syscall.ECONNREFUSED) || (errors.As(err, &op) && op.Op == "dial"))
}

// brokeConnection reports whether err says the connection itself failed, as opposed to
// the server answering with an error.
func brokeConnection(err error) bool {
	return neverSent(err) || errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, errConnection) || ioFailure(err)
}

// ioFailure reports whether a read or write failed under the request.
func ioFailure(err error) bool {
	var netErr net.Error
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.As(err, &netErr)
}

func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// mcpClient is the SDK's client of one server, with what it answers the server's own
// requests for the calls toolbus sends itself ([directCalls]).
type mcpClient struct {
	*mcp.Client
	peer peer
}

// newClient is the MCP client of one server: its capabilities say only what toolbus
// can answer — roots only when the configuration gives some, and then these.
func newClient(info *mcp.Implementation, cfg ServerConfig, opts *mcp.ClientOptions) *mcpClient {
	o := mcp.ClientOptions{}
	if opts != nil {
		o = *opts
	}
	var p peer
	if h := o.ToolListChangedHandler; h != nil {
		p.listChanged = func() { h(context.Background(), nil) }
	}
	p.progress = o.ProgressNotificationHandler
	o.Capabilities = &mcp.ClientCapabilities{}
	if len(cfg.Roots) > 0 {
		o.Capabilities.RootsV2 = &mcp.RootCapabilities{}
	}
	// Elicitation is offered only under a policy that can accept: a server then lists
	// its tools that ask (server-everything's trigger-elicitation-request), which would
	// all be declined otherwise.
	if cfg.Elicitation != ElicitAsk || o.ElicitationHandler == nil {
		o.ElicitationHandler = elicitationPolicy(cfg.Elicitation)
	}
	p.elicit = checkedElicitation(o.ElicitationHandler)
	p.sample, p.log = o.CreateMessageHandler, o.LoggingMessageHandler
	c := mcp.NewClient(info, &o)
	for _, r := range cfg.Roots {
		p.roots = append(p.roots, &mcp.Root{URI: rootURI(r, cfg.Cwd), Name: filepath.Base(r)})
	}
	if len(p.roots) > 0 {
		c.AddRoots(p.roots...)
	}
	return &mcpClient{Client: c, peer: p}
}

// rootURI is the file:// URI of a configured root: a path, relative to cwd when it is
// not absolute, or a URI as written.
func rootURI(root, cwd string) string {
	if strings.Contains(root, "://") {
		return root
	}
	if !filepath.IsAbs(root) {
		if cwd == "" {
			cwd, _ = os.Getwd()
		}
		root = filepath.Join(cwd, root)
	}
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(filepath.Clean(root))}).String()
}

// overSSE reports whether sess is an HTTP+SSE connection: one an entry without a type
// fell back to.
func overSSE(sess session) bool {
	s, ok := sess.(*mcpSession)
	return ok && s.overSSE
}
