// Package toolbus is toolbus's composition root: it builds the pipeline's services —
// parser, executor, formatter, health daemon — from Go values and runs any subset of
// them on one NATS connection. Every toolbus binary (`toolbus run`, `serve`, `bench`,
// the per-service binaries) starts through [Start], and so does a Go program that embeds
// toolbus with its own tools.
//
// # Where NATS comes from
//
// [Options.Conn] is a connection the caller owns; else [Options.NATSURL] is dialled
// (with [Options.NATSOptions]); else an embedded nats-server with JetStream is started
// in the process ([Options.Embedded]) and the services reach it in process. With an
// embedded server the streams, consumers and buckets are provisioned at start; against
// a connection or URL they are only checked, unless [Options.Provision] says otherwise
// (a service's NATS user need not be allowed to change them; `toolbus provision` makes
// them once).
//
// # What runs
//
// [Options.Config] is the parsed configuration ([config.Load] reads a file, or build
// the struct in Go); [Options.Tools] are the program's own Go tools and
// [Options.Backends] its own executor backends, beside everything the configuration
// turns on (built-in tools, a tools folder, the engineering calculators, MCP servers).
// [Options.Services] picks the services; by default all four. A program offering its
// tools to a cluster runs only [Executor].
//
// # Nothing process-wide unless asked
//
// Library code here installs no signal handler and changes no process attribute.
// [Options.Harden] makes the process non-dumpable when an executor starts (the
// binaries set it: tools and stdio servers run as the same user must not read the
// process's environment); [Toolbus.Reload] re-reads the configuration file at once
// (the binaries call it on SIGHUP). Child processes run under a reaper only in a
// binary whose main calls [reaper.Main] first.
//
// # Example
//
//	func main() {
//		reaper.Main(&reaper.Options{Notify: signal.Notify}) // tools and stdio servers die with their call
//		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
//		defer stop()
//		cfg, err := config.Load("toolbus.json")
//		...
//		reg := localtools.New()
//		localtools.AddFunc(reg, messages.ToolInfo{Name: "convert_temperature", ReadOnly: true}, convert)
//		tb, err := toolbus.Start(ctx, toolbus.Options{Config: cfg, Tools: reg})
//		...
//		defer tb.Close()
//		err = tb.WaitForTools(ctx) // the MCP servers' tools, for calls without a marker
//		out, err := tb.Client().Ask(ctx, "conv-1", modelText, nil)
//	}
package toolbus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/toolbus/toolbus/pkg/mcpwire/oauth"
	"log/slog"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/executor"
	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/ops"
	"github.com/toolbus/toolbus/pkg/parser"
	"github.com/toolbus/toolbus/pkg/redact"
	"github.com/toolbus/toolbus/pkg/telemetry"
)

// The services [Options.Services] may name.
const (
	Parser    = "parser"
	Executor  = "executor"
	Formatter = "formatter"
	Healthd   = "healthd"
)

// AllServices returns every service, in the order of the flow.
func AllServices() []string { return []string{Parser, Executor, Formatter, Healthd} }

// Options configure [Start]. The zero value runs every service on an embedded NATS with
// the default configuration.
type Options struct {
	// Config is the configuration; nil means the defaults. Relative folders in it are
	// relative to Config.Source, the file it was read from.
	Config *config.Config
	// Tools are the program's own Go tools, joined to the built-ins and the tools folder
	// the configuration turns on. Only executors run them. Tools added through
	// Tools.Server(name) are that in-process server's, called and allow-listed as an MCP
	// server's are ("calc__add", "mcp__calc__add", "calc::add"); the configuration's
	// top-level allowedTools and blockedTools cover them as every other tool.
	Tools *localtools.Registry
	// Backends are the program's own executor backends, consulted after the local tools
	// and the engineering calculators and before the MCP servers' own tools (explicit
	// routes to MCP servers come first).
	Backends []executor.Backend

	// Conn is a NATS connection the caller owns (Close leaves it open); nil: NATSURL.
	Conn *nats.Conn
	// NATSURL connects to a NATS server; with Conn nil and NATSURL empty an embedded
	// server is started.
	NATSURL string
	// NATSOptions are added to the connection's options when Start connects.
	NATSOptions []nats.Option
	// Embedded configures the embedded server (port, store folder); nil: a random port
	// and a temporary folder.
	Embedded *bus.EmbeddedOptions
	// EmbeddedOverTCP connects to the embedded server over its loopback port instead of
	// in process (to measure the socket, as `toolbus bench` does without --in-process).
	EmbeddedOverTCP bool
	// Provision creates or updates the streams, consumers and buckets at start on a Conn
	// or NATSURL too. Without it they are only checked there (waiting, and saying what
	// is missing); an embedded server's are always provisioned.
	Provision bool
	// Topology of streams and buckets; the zero value means the configuration's.
	Topology bus.Topology

	// Services to run; empty means [AllServices].
	Services []string
	// Replicas of each stage in this process (executors, parsers, formatters). Default 1.
	Replicas int

	// Ops, when set, serves /healthz, /readyz and /metrics on Ops.Addr and registers each
	// replica with the NATS service framework (nats micro ls / info / stats); the
	// metrics are then recorded in Prometheus form unless MeterProvider is set.
	Ops *OpsOptions
	// MeterProvider records metrics; nil records none (or Ops's, when Ops is set).
	MeterProvider metric.MeterProvider
	// TracerProvider records spans; nil means the global provider (see pkg/telemetry).
	TracerProvider trace.TracerProvider
	// Logger defaults to discarding.
	Logger *slog.Logger

	// Tokens keeps the OAuth grants of http servers; nil: the toolbus_auth bucket, sealed
	// with TokenKey (pkg/tokens).
	Tokens oauth.TokenStore
	// TokenKey seals the grants in the bucket (32 bytes; the binaries read it from
	// TOOLBUS_TOKEN_KEY). Without it, a server that requires a login is answered
	// server_unavailable, naming `toolbus auth login`.
	TokenKey []byte
	// Login, when set, lets the executor run a user's login for a server that requires
	// one (`toolbus run`, attended); nil: such a server needs `toolbus auth login`.
	Login func(server string, cfg oauth.Config) (*oauth.Login, error)

	// Harden makes the process non-dumpable when an executor starts: the tools and
	// stdio servers it runs as the same user can then neither read its
	// /proc/<pid>/environ (NATS credentials, tokens) nor attach to it. It changes the
	// whole process, so only a program that asks gets it; the toolbus binaries do.
	Harden bool
}

// OpsOptions configure the operations endpoints of [Options.Ops].
type OpsOptions struct {
	// Addr of /healthz, /readyz and /metrics; empty: no HTTP server (the NATS service
	// registrations still happen).
	Addr string
	// AnyPortIfTaken listens on a free port when Addr's is taken.
	AnyPortIfTaken bool
	// Service names the process in its metrics' resource (service.name); default
	// "toolbus".
	Service string
}

// ErrOps wraps a failure to start the operations endpoints (an address taken).
var ErrOps = errors.New("toolbus: ops endpoints")

// Toolbus is a running toolbus: its services, their NATS connection, and the embedded
// server when there is one.
type Toolbus struct {
	cfg      *config.Config
	catalog  *parser.Catalog // the parser's, when this process runs one
	services []string
	backends []string // the names of Options.Backends, whose tools WaitForTools waits for too
	nc       *nats.Conn
	ownConn  bool
	server   func()
	url      string // the embedded server's client URL
	client   *client.Client
	reload   trigger

	wg   sync.WaitGroup
	stop context.CancelFunc
	mu   sync.Mutex
	errs []error
}

// Start connects (or starts an embedded server), provisions or checks the streams and
// buckets, and starts the services. They run until ctx is done or Close is called;
// [Toolbus.Wait] waits for them.
func Start(ctx context.Context, o Options) (*Toolbus, error) {
	if o.Config == nil {
		o.Config = &config.Config{}
	}
	if len(o.Services) == 0 {
		o.Services = AllServices()
	}
	if o.Replicas <= 0 {
		o.Replicas = 1
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	for _, name := range o.Services {
		if !slices.Contains(AllServices(), name) {
			return nil, fmt.Errorf("unknown service %q (want %v)", name, AllServices())
		}
	}
	tb := &Toolbus{cfg: o.Config, catalog: parser.NewCatalog(), services: o.Services, server: func() {}}
	for _, b := range o.Backends {
		// Each in-process backend keeps its tools in the catalog under its name.
		taken := []string{"local", "mcp"}
		if config.On(o.Config.Engineering.Enabled) {
			taken = append(taken, "engineering")
		}
		_, server := o.Config.MCPServers[b.Name()]
		if name := b.Name(); name == "" || server || slices.Contains(taken, name) || slices.Contains(tb.backends, name) {
			return nil, fmt.Errorf("toolbus: a backend named %q: the name is empty or taken (another backend's, a configured server's)", name)
		}
		tb.backends = append(tb.backends, b.Name())
	}
	if err := tb.connect(o); err != nil {
		return nil, err
	}
	runCtx, stop := context.WithCancel(ctx)
	tb.stop = stop
	err := tb.start(ctx, runCtx, o)
	if err == nil {
		tb.client, err = client.New(tb.nc)
	}
	if err != nil {
		stop()
		tb.wg.Wait()
		tb.closeConn()
		return nil, err
	}
	return tb, nil
}

// connect takes the caller's connection, dials NATSURL, or starts the embedded server.
func (tb *Toolbus) connect(o Options) error {
	if o.Conn != nil {
		tb.nc = o.Conn
		return nil
	}
	url := o.NATSURL
	opts := append([]nats.Option{nats.Name("toolbus"), bus.UserInbox(url)}, o.NATSOptions...)
	if url == "" {
		eo := bus.EmbeddedOptions{}
		if o.Embedded != nil {
			eo = *o.Embedded
		}
		srv, stop, err := bus.StartEmbedded(eo)
		if err != nil {
			return fmt.Errorf("toolbus: embedded NATS: %w", err)
		}
		tb.server, tb.url = stop, srv.ClientURL()
		if o.EmbeddedOverTCP {
			url = srv.ClientURL()
		} else {
			opts = append(opts, nats.InProcessServer(srv))
		}
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		tb.server()
		// The error may quote the URL, and with it a password.
		return errors.New((*redact.Redactor)(nil).String(fmt.Sprintf("toolbus: connect to %s: %v", cmp.Or(url, "the embedded server"), err)))
	}
	tb.nc, tb.ownConn = nc, true
	return nil
}

func (tb *Toolbus) closeConn() {
	if tb.ownConn {
		tb.nc.Close()
	}
	tb.server()
}

// start provisions the streams and buckets and starts the services: the ops
// endpoints first, then each service's runs, which end with runCtx.
func (tb *Toolbus) start(ctx, runCtx context.Context, o Options) error {
	var opsSrv *ops.Server
	if o.Ops != nil {
		srv, mp, err := startOps(runCtx, tb.nc, o.Ops, o.Logger)
		if err != nil {
			return err
		}
		opsSrv = srv
		tb.wg.Add(1)
		go func() {
			defer tb.wg.Done()
			if err := srv.Run(runCtx); err != nil {
				o.Logger.Error("ops server stopped", "err", err)
			}
		}()
		if o.MeterProvider == nil {
			o.MeterProvider = mp
		}
	}
	// Every log line of the services masks the configuration's secrets; the executor
	// follows reloads (Redact.Set).
	secrets := &redact.Current{}
	secrets.Set(o.Config.Redactor())
	o.Logger = slog.New(redact.Handler(o.Logger.Handler(), secrets))
	for _, key := range o.Config.Ignored {
		o.Logger.Info("config: a key toolbus does not use, left alone (another MCP client's setting?)", "key", key, "file", o.Config.Source)
	}
	// Another client's keys that change what it does, which toolbus does otherwise (or
	// not at all): each a warning at start, never silence.
	o.Config.LogWarnings(o.Logger)
	js, err := jetstream.New(tb.nc)
	if err != nil {
		return err
	}
	if reflect.ValueOf(o.Topology).IsZero() {
		o.Topology = o.Config.Topology()
	} else if o.Topology.Tenants == nil {
		o.Topology.Tenants = o.Config.Topology().Tenants // the tenants are the configuration's
	}
	checkOnly := (o.Conn != nil || o.NATSURL != "") && !o.Provision
	if err := provision(ctx, js, o.Topology, checkOnly, o.Logger); err != nil {
		return err
	}
	w := &wiring{nc: tb.nc, js: js, o: o, secrets: secrets, catalog: tb.catalog, ops: opsSrv,
		metrics: telemetry.NewMetrics(o.MeterProvider), reload: &tb.reload}
	for _, name := range o.Services {
		bctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		runs, err := w.build(bctx, name)
		cancel()
		if err != nil {
			return err
		}
		for _, run := range runs {
			tb.wg.Add(1)
			go func() {
				defer tb.wg.Done()
				if err := run(runCtx); err != nil {
					if runCtx.Err() != nil && errors.Is(err, context.Canceled) {
						return // stopped as asked: not a failure
					}
					o.Logger.Error("service stopped", "service", name, "err", err)
					tb.mu.Lock()
					tb.errs = append(tb.errs, fmt.Errorf("%s: %w", name, err))
					tb.mu.Unlock()
				}
			}()
		}
		o.Logger.Info("ready", "service", name, "replicas", o.Replicas)
	}
	return nil
}

// WaitForTools waits until the parser of this process knows the tools of every
// backend of the configuration and of [Options.Backends] (its MCP servers list theirs after they start), so that
// calls written without a marker — bare JSON, a pythonic list after a sentence — are
// recognised from the first response; or until ctx is done, when it names the backends
// still missing. A backend whose tools the allow- and block-lists all refuse has listed
// them all the same (none), and is not waited for any longer. Without a parser in this
// process it returns at once.
func (tb *Toolbus) WaitForTools(ctx context.Context) error {
	if !slices.Contains(tb.services, Parser) {
		return nil
	}
	wait := time.Duration(math.MaxInt64)
	if d, ok := ctx.Deadline(); ok {
		wait = time.Until(d)
	}
	if missing := WaitForCatalog(ctx, tb.catalog, tb.cfg, wait, tb.backends...); len(missing) > 0 {
		return &MissingToolsError{Backends: missing, Err: context.Cause(ctx)}
	}
	return nil
}

// MissingToolsError is [Toolbus.WaitForTools]'s error: the backends whose tools the
// parser did not know in time.
type MissingToolsError struct {
	Backends []string
	Err      error
}

func (e *MissingToolsError) Error() string {
	return fmt.Sprintf("toolbus: %s did not list their tools: %v", strings.Join(e.Backends, ", "), e.Err)
}

func (e *MissingToolsError) Unwrap() error { return e.Err }

// Client is a client on toolbus's own connection, to submit model responses and read
// their outputs.
func (tb *Toolbus) Client() *client.Client { return tb.client }

// Conn is toolbus's NATS connection.
func (tb *Toolbus) Conn() *nats.Conn { return tb.nc }

// ServerURL is the embedded server's client URL, for orchestrators in other processes;
// empty without an embedded server.
func (tb *Toolbus) ServerURL() string { return tb.url }

// Reload makes every service that follows the configuration file (executor, healthd)
// read it again now, whether or not it changed; the binaries call it on SIGHUP.
func (tb *Toolbus) Reload() { tb.reload.fire() }

// Wait blocks until every service has stopped (ctx done, or Close) and returns their
// errors; a stop that was asked for is not one.
func (tb *Toolbus) Wait() error {
	tb.wg.Wait()
	tb.stop()
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return errors.Join(tb.errs...)
}

// Close stops the services, waits for them, and closes the connection Start made and
// the embedded server.
func (tb *Toolbus) Close() error {
	tb.stop()
	err := tb.Wait()
	tb.closeConn()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

// trigger wakes every waiter at once, each time it fires.
type trigger struct {
	mu sync.Mutex
	ch chan struct{}
}

// wait returns a channel closed at the next fire.
func (t *trigger) wait() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ch == nil {
		t.ch = make(chan struct{})
	}
	return t.ch
}

func (t *trigger) fire() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ch != nil {
		close(t.ch)
		t.ch = nil
	}
}
