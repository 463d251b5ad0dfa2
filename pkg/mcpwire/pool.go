package mcpwire

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/toolbus/toolbus/pkg/mcpwire/oauth"
	"log/slog"
	"net/http"
	"reflect"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/toolbus/toolbus/pkg/catalog"
	"github.com/toolbus/toolbus/pkg/toolcall"
)

// Options configures a [Pool]. The zero value is valid.
type Options struct {
	// Routes map a tool name to the server that runs it; they win over everything else.
	// A nil server means the tool is not remote (it is local to toolbus).
	Routes map[string]*string
	// AllowedTools, when not empty, is a global allow-list over every server: tool
	// names, "server__tool", "mcp__server__tool" or "server::tool", with globs.
	// BlockedTools is the global block-list, read the same way. (toolbus's executor
	// applies the same top-level lists to its other backends too.)
	AllowedTools []string
	BlockedTools []string
	// ClientInfo is how toolbus introduces itself to servers. Default "toolbus".
	ClientInfo *mcp.Implementation
	// HTTPClient is the base client of http, sse and jsonrpc servers; headers from the
	// configuration are added to it. Default: a client with no timeout (streams are
	// long) whose transport keeps up to 256 idle connections per server (net/http's
	// default keeps 2: calls in flight beyond that would dial a new connection each).
	HTTPClient *http.Client
	// Dial, when set, may provide the transport of a server instead of its
	// configuration, for servers in the same process (mcp.NewInMemoryTransports). It is
	// called on every connection attempt; returning nil uses the configuration.
	Dial func(ctx context.Context, server string) (mcp.Transport, error)
	// OnCatalog is called, from the server's own goroutine, after a server's tools were
	// listed (on connect, on notifications/tools/list_changed and periodically), with
	// that server's visible tools; toolbus mirrors them into the catalog bucket. A
	// server that never listed any and cannot be used as configured ([ErrMisconfigured])
	// is told with an empty list, so that nobody waits for its tools.
	OnCatalog func(server string, tools []Tool)
	// Logger defaults to discarding.
	Logger *slog.Logger
	// Tokens keeps the OAuth grants of http servers (a login's token, refreshed by one
	// replica at a time); nil keeps them in memory, for this pool only.
	Tokens oauth.TokenStore
	// Login, when set, runs a user's authorization-code login for an http server that
	// requires one (`toolbus auth login`, `toolbus run`); it is called once per server,
	// on first need. Without it (a headless executor), such a server is unavailable
	// with [oauth.ErrNeedsLogin] until a grant turns up in Tokens.
	Login func(server string, cfg oauth.Config) (*oauth.Login, error)
	// Ask puts the elicitation requests of servers under the policy "ask" to whoever
	// made the call ([WithConversation]); nil declines them.
	Ask AskFunc
	// Progress receives the servers' notifications/progress about calls made with
	// [WithCall]; with it nil, toolbus asks no server for progress.
	Progress ProgressFunc
	// Sample puts the sampling requests of servers under the policy "ask" to whoever
	// made the call ([WithConversation]); nil refuses them.
	Sample SampleFunc
	// Log receives what servers log (notifications/message) while a call made with
	// [WithCall] runs on them; nil leaves it to the debug log.
	Log LogFunc
	// Updated receives the updates of the resources conversations subscribed to (the
	// resources_subscribe tools); nil drops them.
	Updated UpdatedFunc
	// MeterProvider records the mcp.client.operation.duration histogram; nil records
	// none. Spans need no option: a call's span is a child of the span in its context,
	// from that span's provider.
	MeterProvider metric.MeterProvider
}

// Pool holds one session per enabled server and the catalog of their tools. Sessions
// are opened lazily, on first use of the pool, every server in parallel; a session that
// fails is reopened with backoff, and a stdio server that exits is restarted. A Pool is
// safe for concurrent use.
type Pool struct {
	opts       Options
	progress   progressCalls // calls that asked their servers for progress
	log        *slog.Logger
	opDuration metric.Float64Histogram

	ctx    context.Context // lives until Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed atomic.Bool

	mu      sync.RWMutex
	servers map[string]*server // enabled servers
	routes  map[string]*string
	top     catalog.Lists // the top-level allow- and block-lists
	started bool
	running atomic.Bool // started, read without the lock

	// rebuildMu serializes catalog rebuilds, so that a slower one never replaces a
	// newer one.
	rebuildMu sync.Mutex
	catalog   atomic.Pointer[catalog.Catalog]
}

// NewPool returns a pool over servers, keyed by name; disabled servers are left out.
// It starts nothing: the first call that needs a server does.
func NewPool(servers map[string]ServerConfig, opts *Options) (*Pool, error) {
	p := &Pool{servers: map[string]*server{}}
	if opts != nil {
		p.opts = *opts
	}
	if p.opts.Logger == nil {
		p.opts.Logger = slog.New(slog.DiscardHandler)
	}
	if p.opts.HTTPClient == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 256
		p.opts.HTTPClient = &http.Client{Transport: t}
	}
	if p.opts.ClientInfo == nil {
		p.opts.ClientInfo = &mcp.Implementation{Name: "toolbus", Version: "0.1.0"}
	}
	p.log = p.opts.Logger
	p.opDuration = newOperationDuration(p.opts.MeterProvider)
	p.observeSessions(p.opts.MeterProvider)
	p.ctx, p.cancel = context.WithCancel(context.Background())
	if err := p.Update(servers, p.opts.Routes, p.opts.AllowedTools, p.opts.BlockedTools); err != nil {
		p.cancel()
		return nil, err
	}
	return p, nil
}

// Update applies a new configuration while the pool runs: servers that were added or
// changed are (re)connected, those removed or changed are closed (failing their calls
// under way), and those unchanged keep their sessions and calls. Routes and the global
// allow- and block-lists are replaced. Nothing changes when the configuration is invalid.
func (p *Pool) Update(servers map[string]ServerConfig, routes map[string]*string, allowedTools, blockedTools []string) error {
	names := make([]string, 0, len(servers))
	for name := range servers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if cfg := servers[name]; cfg.IsEnabled() {
			if err := cfg.Validate(); err != nil {
				return fmt.Errorf("mcpServers.%s.%w", name, err)
			}
		}
	}
	for tool, server := range routes {
		if _, ok := servers[derefOr(server, "")]; server != nil && !ok {
			return fmt.Errorf("routes.%s: no server called %q", tool, *server)
		}
	}

	p.mu.Lock()
	if p.closed.Load() {
		p.mu.Unlock()
		return ErrClosed
	}
	next := map[string]*server{}
	var stopped []*server
	for _, name := range names {
		cfg := servers[name]
		if !cfg.IsEnabled() {
			continue
		}
		old, ok := p.servers[name]
		if ok && reflect.DeepEqual(old.cfg, cfg) {
			next[name] = old
			continue
		}
		if ok {
			stopped = append(stopped, old)
		}
		next[name] = newServer(p, name, cfg)
		if p.started {
			p.start(next[name])
		}
	}
	for name, old := range p.servers {
		if _, ok := next[name]; !ok {
			stopped = append(stopped, old)
		}
	}
	p.servers, p.routes, p.top = next, routes, catalog.Lists{Allowed: allowedTools, Blocked: blockedTools}
	p.mu.Unlock()

	for _, s := range stopped {
		s.stop()
		if _, ok := next[s.name]; !ok && p.opts.OnCatalog != nil {
			p.opts.OnCatalog(s.name, nil)
		}
	}
	p.rebuild()
	return nil
}

// run starts every server's connection loop, once.
func (p *Pool) run() {
	if p.running.Load() {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started || p.closed.Load() {
		return
	}
	p.started = true
	p.running.Store(true)
	for _, s := range p.servers {
		p.start(s)
	}
}

// Start starts every server's connection loop now, without waiting for any: from its
// return, [Pool.Check] says a server is starting rather than not served.
func (p *Pool) Start() {
	if !p.closed.Load() {
		p.run()
	}
}

// start runs the connection loop of s; p.mu is held.
func (p *Pool) start(s *server) {
	s.started = true
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer close(s.exited)
		s.run(s.ctx)
	}()
}

// server returns the enabled server called name.
func (p *Pool) server(name string) (*server, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	s, ok := p.servers[name]
	return s, ok
}

// Connect starts the pool and waits until every server answered its first connection
// attempt, or ctx is done. It returns the servers that failed; the pool keeps trying
// them in the background either way.
func (p *Pool) Connect(ctx context.Context) error {
	if p.closed.Load() {
		return ErrClosed
	}
	p.run()
	var errs []error
	for _, s := range p.sorted() {
		name := s.name
		select {
		case <-s.tried:
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := s.lastErr(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// Catalog returns the current catalog, after waiting (up to ctx) for every server's
// first answer.
func (p *Pool) Catalog(ctx context.Context) *catalog.Catalog {
	_ = p.Connect(ctx)
	return p.catalog.Load()
}

// Tools lists the tools a model may call; see [Pool.Catalog].
func (p *Pool) Tools(ctx context.Context) []Tool { return p.Catalog(ctx).Tools() }

// Lookup resolves a tool name as [catalog.Catalog.Resolve] does. A name the servers listed so
// far resolve is answered at once; a name they do not know (or refuse) waits (up to
// ctx) only while a server that has not answered its first connection attempt could
// still list it, and is resolved again as each one answers. A server that never answers thus delays only
// the names nobody else has. A qualified name of a server that has not listed its tools
// yet, which the catalog answers with a guess, waits for that server's first attempt too.
func (p *Pool) Lookup(ctx context.Context, name string) (Tool, error) {
	if p.closed.Load() {
		return Tool{}, ErrClosed
	}
	p.run()
	for {
		// The servers still to answer, before the catalog is read: one that answered
		// stored its tools first, so a catalog read after is one that holds them. (Read
		// the other way round, a server that listed the name between the two reads left
		// it unknown.)
		var waiting []<-chan struct{}
		for _, s := range p.sorted() {
			if !isDone(s.tried) {
				waiting = append(waiting, s.tried)
			}
		}
		t, err := p.catalog.Load().Resolve(name)
		if err == nil && p.guessed(ctx, t) {
			continue // its server has listed its tools since: resolve the name again
		}
		if err == nil || errors.Is(err, ErrAmbiguous) {
			return t, err // more servers cannot make it less ambiguous
		}
		if len(waiting) == 0 || ctx.Err() != nil {
			return t, err
		}
		select {
		case <-anyDone(waiting):
		case <-ctx.Done():
		}
	}
}

// anyDone is closed when one of chans is.
func anyDone(chans []<-chan struct{}) <-chan struct{} {
	if len(chans) == 1 {
		return chans[0]
	}
	done := make(chan struct{})
	var once sync.Once
	for _, ch := range chans {
		go func() {
			select {
			case <-ch:
				once.Do(func() { close(done) })
			case <-done:
			}
		}()
	}
	return done
}

// Timeout returns the timeout configured for server, or 0 when it has none of its own.
func (p *Pool) Timeout(server string) time.Duration {
	if s, ok := p.server(server); ok {
		return time.Duration(s.cfg.Timeout)
	}
	return 0
}

// Route returns the server an explicit route sends name to. ok is false when name has
// no route; server is "" when the route sends it to the local tools.
func (p *Pool) Route(name string) (server string, ok bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	r, ok := p.routes[name]
	if !ok || r == nil {
		return "", ok
	}
	return *r, true
}

// Call runs the tool a model called name with args (a JSON object; empty means {}).
func (p *Pool) Call(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	t, err := p.Lookup(ctx, name)
	if err != nil {
		return nil, err
	}
	return p.CallTool(ctx, t, args)
}

// CallTool runs t, a tool of [Pool.Lookup] or the catalog, within its server's timeout.
// The result is the tool's structuredContent, else its text (JSON text as that value),
// else its content as text, which names its images, audio and embedded blobs: those
// reach a [KeptContent] given with [WithKeptContent]. Errors: a [*ToolError] when the server reported one,
// [ErrUnavailable] when the server could not be reached (the request never left),
// [ErrConnectionLost] when the connection broke during the call, and
// context.DeadlineExceeded when the time ran out.
func (p *Pool) CallTool(ctx context.Context, t Tool, args json.RawMessage) (json.RawMessage, error) {
	if p.closed.Load() {
		return nil, ErrClosed
	}
	s, ok := p.server(t.Server)
	if !ok {
		return nil, fmt.Errorf("%w: no server called %q", ErrUnknownTool, t.Server)
	}
	p.run()
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	if schema, ok := s.declared[t.Remote]; ok {
		checked, err := toolcall.CheckArguments(t.Name, schema, args)
		if err != nil {
			return nil, err // invalid_arguments: nothing was sent
		}
		args = checked
	}
	if s.turns != nil {
		// Its turn first: the server's time limit is for the call, not the wait.
		select {
		case s.turns <- struct{}{}:
			defer func() { <-s.turns }()
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %s: its %d calls at once (concurrency) were running until the call's time ran out: %w",
				ErrUnavailable, s.name, cap(s.turns), ctx.Err())
		}
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout())
	defer cancel()
	canonical := catalog.Ref{Server: s.name, Tool: t.Remote}.Name()
	defer s.track(ctx, canonical)()
	ctx, forget := s.pool.progress.begin(ctx, s.pool.opts.Progress, s.name, canonical)
	if s.pool.opts.Log != nil && callOf(ctx) != "" {
		ctx = withLogLevel(ctx, logLevel)
	}
	defer forget()
	// A conversation-scoped server runs the call in the conversation's own session.
	conv := conversationOf(ctx)
	if conv != "" && !s.scoped() {
		conv = ""
	}
	var unsent error // under WithOneRequest: the request that never left
	for attempt := 0; ; attempt++ {
		var sess session
		var err error
		release := func() {}
		if conv != "" {
			sess, release, err = s.conversationSession(ctx, conv)
		} else {
			sess, err = s.session(ctx)
		}
		if err != nil {
			return nil, err // a new session refused for good (a login needed) is the answer
		}
		if unsent != nil {
			// A new session stands: the caller sends the request again, as its next try.
			release()
			return nil, fmt.Errorf("%w: %s: %v", ErrUnavailable, s.name, unsent)
		}
		res, err := s.callTool(ctx, sess, t.Remote, args)
		release()
		if reached(err) {
			countSent(ctx)
		}
		if err == nil {
			valueOf := resultValue
			if t.Remote == remoteReadResource && s.feature(t.Remote) {
				valueOf = readValue
			}
			value, kept, notice, err := valueOf(s.name, t.Remote, res)
			if len(kept) > 0 || notice != "" {
				keep(ctx, kept, notice)
			}
			return value, err
		}
		if ctx.Err() != nil {
			// The time it had: the server's timeout, or the caller's shorter deadline.
			limit := s.cfg.CallTimeout()
			if d, ok := ctx.Deadline(); ok {
				limit = max(d.Sub(began), 0).Round(time.Millisecond) // 0: it had passed before the call began
			}
			return nil, fmt.Errorf("%s: %s: no result within %v: %w", s.name, t.Remote, limit, ctx.Err())
		}
		var werr *jsonrpc.Error
		if errors.As(err, &werr) && !transportCode(werr.Code) {
			return nil, &ToolError{Server: s.name, Tool: t.Remote, Code: werr.Code, Message: werr.Message}
		}
		if !brokeConnection(err) && !isDone(sess.done()) {
			return nil, fmt.Errorf("%s: %s: %w", s.name, t.Remote, err)
		}
		if conv != "" {
			s.dropConversation(conv, sess, err)
		} else {
			s.broken(sess, err)
		}
		once := oneRequest(ctx)
		switch {
		case attempt > 0 && neverSent(err):
			return nil, fmt.Errorf("%w: %s: %v", ErrUnavailable, s.name, err)
		case attempt > 0 || once && !neverSent(err) || !(neverSent(err) || t.Retryable()):
			return nil, fmt.Errorf("%w: %s: %s: %v", ErrConnectionLost, s.name, t.Remote, err)
		case once:
			// Sent once: a new session is opened (what it meets — a login needed — is
			// the answer), and the request is the caller's next try.
			unsent = err
		}
		// The request never reached the tool (an expired session, a restarted server),
		// or the tool does no harm when run twice: reconnect and send it once more.
	}
}

type sentKey struct{}

type oneRequestKey struct{}

// WithOneRequest returns ctx whose tool calls send their request once: a call whose
// session broke is answered with the error (ErrUnavailable when the request provably
// never left, ErrConnectionLost otherwise), the broken session dropped, rather than sent
// again on a new session. When it never left, a new session is opened first, and what
// that meets (a login needed) is the answer. The executor, which retries with backoff and counts each try
// as an attempt — in the result, its span and the retries metric —, calls so.
func WithOneRequest(ctx context.Context) context.Context {
	return context.WithValue(ctx, oneRequestKey{}, true)
}

func oneRequest(ctx context.Context) bool {
	once, _ := ctx.Value(oneRequestKey{}).(bool)
	return once
}

// WithSentCount returns ctx whose tool calls add to n each tools/call request that
// reached the server: one per call, and one more for each resend after a broken
// connection; one the server's HTTP layer turned away (a 503 from a proxy, an expired
// session) too. A request whose connection was refused is not counted.
func WithSentCount(ctx context.Context, n *atomic.Int32) context.Context {
	return context.WithValue(ctx, sentKey{}, n)
}

func countSent(ctx context.Context) {
	if n, ok := ctx.Value(sentKey{}).(*atomic.Int32); ok {
		n.Add(1)
	}
}

// MaxAttempts returns how many times a call of server's tools may be tried in all, the
// first included: its "retry.maxAttempts", or 0 when it sets none.
func (p *Pool) MaxAttempts(server string) int {
	if s, ok := p.server(server); ok && s.cfg.Retry != nil {
		return max(s.cfg.Retry.MaxAttempts, 0)
	}
	return 0
}

// Refresh lists a server's tools again now.
func (p *Pool) Refresh(ctx context.Context, server string) error {
	s, ok := p.server(server)
	if !ok {
		return fmt.Errorf("no server called %q", server)
	}
	p.run()
	sess, err := s.session(ctx)
	if err != nil {
		return err
	}
	return s.refresh(ctx, sess)
}

// Status is the state of one server's session.
type Status struct {
	Server    string
	Connected bool
	// Connects counts the sessions opened so far; more than one means reconnects.
	Connects int
	// Tools is the number of tools last listed, visible or not.
	Tools int
	// Err is the last failure to connect, or why the last session ended.
	Err error
}

// Status reports every enabled server, sorted by name. It does not start the pool.
func (p *Pool) Status() []Status {
	var out []Status
	for _, s := range p.sorted() {
		s.mu.Lock()
		out = append(out, Status{Server: s.name, Connected: s.sess != nil, Connects: s.connects, Tools: len(s.tools), Err: s.err})
		s.mu.Unlock()
	}
	return out
}

// Close ends every session and stops every stdio server, waiting for them to exit.
// Calls under way fail.
func (p *Pool) Close() error {
	p.mu.Lock()
	if !p.closed.CompareAndSwap(false, true) {
		p.mu.Unlock()
		return nil
	}
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	return nil
}

// sorted returns the enabled servers, sorted by name.
func (p *Pool) sorted() []*server {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := make([]*server, 0, len(p.servers))
	for _, s := range p.servers {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// Remember gives servers that have not listed their tools yet the tools they listed
// last (lastListed, by server: what OnCatalog was given, kept by the deployment — the
// catalog bucket; nil for none), so that after a restart a server that is down is known by its tools:
// a call of one is server_unavailable naming it, never unknown_tool. A server whose
// configuration declares its tools keeps those; its first listing replaces what is
// remembered.
func (p *Pool) Remember(lastListed func(server string) []Tool) {
	changed := false
	for _, s := range p.sorted() {
		if len(s.cfg.Tools) > 0 {
			continue
		}
		tools := lastListed(s.name)
		if len(tools) == 0 {
			continue
		}
		s.mu.Lock()
		if !s.listed {
			s.tools = make([]*mcp.Tool, 0, len(tools))
			for _, t := range tools {
				s.tools = append(s.tools, remembered(t))
			}
			changed = true
		}
		s.mu.Unlock()
	}
	if changed {
		p.rebuild()
	}
}

// rebuild swaps in a catalog made of every server's last tools.
func (p *Pool) rebuild() *catalog.Catalog {
	p.rebuildMu.Lock()
	defer p.rebuildMu.Unlock()
	p.mu.RLock()
	servers, routes, top := p.servers, p.routes, p.top
	p.mu.RUnlock()
	in := map[string]catalogInput{}
	for name, s := range servers {
		s.mu.Lock()
		in[name] = catalogInput{cfg: s.cfg, tools: s.tools, listed: s.listed}
		s.mu.Unlock()
	}
	c := newCatalog(in, routes, top)
	p.catalog.Store(c)
	return c
}

// server is the connection loop of one server and its state.
type server struct {
	name   string
	cfg    ServerConfig
	pool   *Pool
	log    *slog.Logger
	client *mcpClient
	// endpoint describes the connection in spans and metrics ([endpoint]).
	endpoint []attribute.KeyValue
	// measurements caches the attribute sets of the duration histogram, by tool and
	// error type: the server's own tools, a bounded set.
	measurements sync.Map
	// subs are the conversations subscribed to its resources, by session.
	subs subscriptions
	// taskModes are the tools the server runs as MCP tasks, as its last listing said
	// (tasks.go): every session of the server's calls them so.
	taskModes atomic.Pointer[map[string]string]
	// taskOnlyLogged names the task-only tools last logged, so that a refresh that finds
	// the same ones says nothing. Only the server's own goroutine lists.
	taskOnlyLogged string
	// declared holds the input schemas of the tools the configuration declares: a
	// call's arguments are checked against them before anything is sent.
	declared map[string]*jsonschema.Resolved
	// oauth authorizes an http server's requests, across its sessions; oc is it when it
	// is toolbus's own (not the client credentials grant).
	oauth    auth.OAuthHandler
	oc       *oauth.Client
	oauthErr error

	ctx     context.Context // ends when the server is removed or the pool closes
	cancel  context.CancelFunc
	exited  chan struct{} // closed when run returned
	started bool          // run was started; guarded by the pool's mu

	wake    chan struct{} // skips the wait before the next attempt
	changed chan struct{} // notifications/tools/list_changed arrived
	dropped chan struct{} // a call found the session broken
	tried   chan struct{} // closed after the first attempt

	mu       sync.Mutex
	sess     session       // the live session, or nil
	attempt  chan struct{} // closed when the next (or running) attempt ends
	err      error
	tools    []*mcp.Tool
	listed   bool
	connects int
	inflight map[*inflight]struct{} // calls under way, under the policy "ask"
	// answered is when (Unix nanoseconds) the server last answered a call, with a
	// result or a tool's own error ([Pool.Check]).
	answered atomic.Int64
	// unanswered is the last call whose connection failed before the server answered
	// it ([Pool.Check]).
	unanswered atomic.Pointer[callFailure]
	// convs are the conversations' own sessions, when the server is scoped so.
	convs conversations
	// knownStateless: a session of this http server had no session id, so under the
	// automatic scope its session is shared.
	knownStateless bool
	// turns holds a place for each call running, when the configuration bounds them
	// (ServerConfig.Concurrency); nil: no bound.
	turns chan struct{}
}

func newServer(p *Pool, name string, cfg ServerConfig) *server {
	s := &server{
		name: name, cfg: cfg, pool: p, endpoint: endpoint(name, cfg), declared: withFeatureSchemas(cfg.declaredSchemas()),
		log:     p.log.With("server", name),
		wake:    make(chan struct{}, 1),
		changed: make(chan struct{}, 1),
		dropped: make(chan struct{}, 1),
		tried:   make(chan struct{}),
		attempt: make(chan struct{}),
		exited:  make(chan struct{}),
	}
	// Tools the configuration declares are known from the start, whether or not the
	// server is ever reached: a call of one while it is down is server_unavailable,
	// naming it, never unknown_tool. (Its first listing replaces them, with the same.)
	for _, d := range cfg.Tools {
		s.tools = append(s.tools, d.tool())
	}
	if cfg.Concurrency > 0 {
		s.turns = make(chan struct{}, cfg.Concurrency)
	}
	s.ctx, s.cancel = context.WithCancel(p.ctx)
	if cfg.Transport() == TransportHTTP {
		s.oauth, s.oc, s.oauthErr = oauth.NewHandler(name, cfg.URL, cfg.OAuth, p.opts.Tokens, p.opts.Login, p.opts.HTTPClient)
	}
	var ask func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error)
	if cfg.Elicitation == ElicitAsk {
		ask = s.ask
	}
	// Sampling is offered only under the policy "ask": a server then lists its tools
	// that sample (server-everything's trigger-sampling-request).
	var sample func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error)
	if cfg.Sampling == SampleAsk {
		sample = s.sample
	}
	var logged func(context.Context, *mcp.LoggingMessageRequest)
	if p.opts.Log != nil {
		logged = func(ctx context.Context, req *mcp.LoggingMessageRequest) { s.logged(ctx, req.Session, req.Params) }
	}
	s.client = newClient(p.opts.ClientInfo, cfg, &mcp.ClientOptions{
		Logger: s.log, ElicitationHandler: ask, CreateMessageHandler: sample, LoggingMessageHandler: logged,
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			poke(s.changed)
		},
		// The feature tools' descriptions name resources and prompts (features.go): a
		// change of either lists them again, as a change of the tools does.
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) {
			poke(s.changed)
		},
		PromptListChangedHandler: func(context.Context, *mcp.PromptListChangedRequest) {
			poke(s.changed)
		},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			p.progress.notify(p.opts.Progress, req)
		},
		ResourceUpdatedHandler: func(ctx context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			s.updated(ctx, req.Session, req.Params.URI)
		},
	})
	return s
}

// stop ends the server's loop and waits for it: its session is closed and its child
// process gone.
func (s *server) stop() {
	s.cancel()
	s.pool.mu.RLock()
	started := s.started
	s.pool.mu.RUnlock()
	if started {
		<-s.exited
	} else {
		s.mu.Lock()
		s.err = ErrClosed
		s.mu.Unlock()
	}
}

func derefOr(s *string, def string) string {
	if s == nil {
		return def
	}
	return *s
}

func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// minHealthy is how long a session must last for the backoff to start over; a server
// that dies right after starting is restarted ever more slowly.
const minHealthy = 5 * time.Second

// run connects, serves the session until it ends, and reconnects, until ctx is done.
func (s *server) run(ctx context.Context) {
	b := s.cfg.Backoff()
	first, loggedLogin, loggedConfig := true, false, ""
	expired := make(chan struct{})
	go func() { defer close(expired); s.expireConversations(ctx) }()
	defer func() {
		<-expired // the conversations' sessions are closed too
		s.mu.Lock()
		s.err = ErrClosed
		close(s.attempt)
		s.mu.Unlock()
		if first {
			close(s.tried)
		}
	}()
	for ctx.Err() == nil {
		sess, err := s.connect(ctx)
		if errors.Is(err, ErrMisconfigured) && err.Error() != loggedConfig {
			// Said once, tried again rarely (below): only a change of the configuration
			// or of the server ends it. Its tools are listed as none meanwhile, before
			// anyone hears of the attempt, so that whoever waits for every server's
			// tools waits no more.
			s.log.Warn("the server cannot be used as configured; calls of its tools are answered server_unavailable at once", "err", err)
			loggedConfig = err.Error()
			s.unlisted()
		}
		s.finish(sess, err)
		if first {
			first = false
			close(s.tried)
		}
		next := b.NextBackOff()
		if err == nil {
			loggedLogin, loggedConfig = false, ""
			began := time.Now()
			s.serve(ctx, sess)
			s.end(sess)
			if time.Since(began) >= minHealthy {
				b.Reset()
				continue
			}
		} else if errors.Is(err, ErrMisconfigured) {
			next = max(next, b.MaxInterval) // told above
		} else if errors.Is(err, oauth.ErrNeedsLogin) {
			// Said once: trying again shows the same until someone logs in.
			if !loggedLogin {
				s.log.Warn("the server needs an OAuth login; calls of its tools are answered server_unavailable until then", "err", err)
				loggedLogin = true
			}
		} else if ctx.Err() == nil {
			s.log.Warn("cannot connect", "err", err)
		}
		wait := time.NewTimer(next)
		select {
		case <-ctx.Done():
		case <-wait.C:
		case <-s.wake:
		}
		wait.Stop()
	}
}

// connect opens a session and lists its tools.
func (s *server) connect(ctx context.Context) (session, error) {
	var t mcp.Transport
	if s.pool.opts.Dial != nil {
		var err error
		if t, err = s.pool.opts.Dial(ctx, s.name); err != nil {
			return nil, err
		}
	}
	if s.oauthErr != nil {
		return nil, s.oauthErr
	}
	sess, err := dial(ctx, s.name, s.cfg, s.client, t, s.pool.opts.HTTPClient, s.oauth, s.log, s.cfg.CallTimeout())
	if err != nil {
		if s.oc != nil && !errors.Is(err, oauth.ErrNeedsLogin) {
			if nl := s.oc.NeedsLogin(); nl != nil {
				err = fmt.Errorf("%w (%v)", nl, err)
			}
		}
		return nil, err
	}
	lctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout())
	defer cancel()
	if err := s.list(lctx, sess); err != nil {
		_ = sess.close()
		return nil, err
	}
	return sess, nil
}

// list fetches the session's tools into the catalog. A server that does not implement
// tools/list has none.
func (s *server) list(ctx context.Context, sess session) error {
	var tools []*mcp.Tool
	var err error
	if len(s.cfg.Tools) > 0 {
		// Declared in the configuration: the server is not asked.
		for _, d := range s.cfg.Tools {
			tools = append(tools, d.tool())
		}
	} else {
		tools, err = sess.listTools(ctx)
	}
	var werr *jsonrpc.Error
	if errors.As(err, &werr) && werr.Code == codeMethodNotFound {
		tools, err = nil, nil
	}
	if err != nil {
		return fmt.Errorf("tools/list: %w", err)
	}
	tools = s.offer(ctx, sess, tools)
	s.mu.Lock()
	s.tools, s.listed = tools, true
	s.mu.Unlock()
	s.publish(s.pool.rebuild())
	s.log.Debug("listed tools", "count", len(tools))
	if ms, ok := sess.(*mcpSession); ok {
		if names := ms.taskOnlyTools(); names != "" && names != s.taskOnlyLogged {
			s.taskOnlyLogged = names
			s.log.Warn("tools that can only be called as MCP tasks are not listed: this session cannot send task requests (a protocol toolbus does not speak itself)", "tools", names)
		}
	}
	return nil
}

func (s *server) refresh(ctx context.Context, sess session) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout())
	defer cancel()
	return s.list(ctx, sess)
}

// unlisted tells the catalog's watcher that the server has no tools, if it never
// listed any: a server that cannot be used as configured is not waited for.
func (s *server) unlisted() {
	s.mu.Lock()
	listed := s.listed
	s.mu.Unlock()
	if !listed {
		// Its declared or remembered tools, if any: still its tools while it is down.
		s.publish(s.pool.catalog.Load())
	}
}

// publish gives OnCatalog the server's tools in catalog c: empty, not nil, when it has
// none (or the lists leave none) — whoever waits for its tools (WaitForTools) waits no
// more.
func (s *server) publish(c *catalog.Catalog) {
	f := s.pool.opts.OnCatalog
	if f == nil {
		return
	}
	mine := []Tool{}
	for _, t := range c.Tools() {
		if t.Server == s.name {
			mine = append(mine, t)
		}
	}
	f(s.name, mine)
}

// finish records the outcome of an attempt and wakes the calls waiting for it.
func (s *server) finish(sess session, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sess, s.err = sess, err
	if sess != nil {
		s.connects++
		if id, _ := sess.describe(); id == "" && s.cfg.Transport() == TransportHTTP && !overSSE(sess) {
			s.knownStateless = true
		}
	}
	close(s.attempt)
	s.attempt = make(chan struct{})
}

// serve watches a live session until it ends, the pool closes or a call found it broken,
// refreshing the tools on list_changed and periodically.
func (s *server) serve(ctx context.Context, sess session) {
	tick := time.NewTicker(s.cfg.Refresh())
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sess.done():
			s.setErr(sess, errors.New("the session ended"))
			s.log.Info("session ended; reconnecting")
			return
		case <-s.dropped:
			if s.current() != sess {
				return
			}
		case <-s.changed:
			if err := s.refresh(ctx, sess); err != nil && brokeConnection(err) {
				s.setErr(sess, err)
				return
			}
		case <-tick.C:
			if err := s.refresh(ctx, sess); err != nil && brokeConnection(err) {
				s.setErr(sess, err)
				return
			}
		}
	}
}

// end closes a session that is over.
func (s *server) end(sess session) {
	s.mu.Lock()
	if s.sess == sess {
		s.sess = nil
	}
	s.mu.Unlock()
	if err := sess.close(); err != nil {
		s.log.Debug("closing the session", "err", err)
	}
}

func (s *server) current() session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sess
}

func (s *server) setErr(sess session, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess == sess {
		s.sess, s.err = nil, err
	}
}

func (s *server) lastErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess != nil {
		return nil
	}
	return s.err
}

// broken is how a call reports that sess failed under it.
func (s *server) broken(sess session, err error) {
	s.mu.Lock()
	mine := s.sess == sess
	if mine {
		s.sess, s.err = nil, err
	}
	s.mu.Unlock()
	if mine {
		s.log.Info("session broken; reconnecting", "err", err)
		poke(s.dropped)
	}
}

// session returns the live session, or waits for the next connection attempt (asking
// for it at once) and returns its outcome.
func (s *server) session(ctx context.Context) (session, error) {
	s.mu.Lock()
	if sess := s.sess; sess != nil && !isDone(sess.done()) {
		s.mu.Unlock()
		return sess, nil
	}
	if err := s.err; s.sess == nil && errors.Is(err, ErrMisconfigured) {
		// Connecting again now would fail the same way (and send the server another
		// refused request): answer with it; the server's loop tries again in a while.
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: %s: %w", ErrUnavailable, s.name, err)
	}
	next := s.attempt
	s.mu.Unlock()
	poke(s.wake)
	select {
	case <-next:
	case <-ctx.Done():
		// Nothing was sent: the request never left, whatever the call's tool does.
		return nil, fmt.Errorf("%w: %s: not connected within the call's time: %w", ErrUnavailable, s.name, ctx.Err())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess != nil {
		return s.sess, nil
	}
	if errors.Is(s.err, ErrClosed) {
		return nil, ErrClosed
	}
	return nil, fmt.Errorf("%w: %s: %w", ErrUnavailable, s.name, s.err)
}
