package toolbus

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"github.com/toolbus/toolbus/pkg/affinity"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/catalog"
	"github.com/toolbus/toolbus/pkg/claims"
	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/deadletter"
	"github.com/toolbus/toolbus/pkg/engineering"
	engbackend "github.com/toolbus/toolbus/pkg/engineering/backend"
	"github.com/toolbus/toolbus/pkg/executor"
	"github.com/toolbus/toolbus/pkg/formatter"
	"github.com/toolbus/toolbus/pkg/healthd"
	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/mcpwire"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/ops"
	"github.com/toolbus/toolbus/pkg/order"
	"github.com/toolbus/toolbus/pkg/parser"
	"github.com/toolbus/toolbus/pkg/policy"
	"github.com/toolbus/toolbus/pkg/redact"
	"github.com/toolbus/toolbus/pkg/results"
	"github.com/toolbus/toolbus/pkg/telemetry"
	"github.com/toolbus/toolbus/pkg/tokens"
	"github.com/toolbus/toolbus/pkg/toolcall"
	"go.opentelemetry.io/otel/attribute"
)

// provision creates or updates the streams and buckets (checkOnly: checks that they
// exist as they should, see bus.Check), waiting with backoff, and saying what it waits
// for, while JetStream cannot answer yet — NATS still starting or not reachable, a fresh
// cluster without a meta leader — or, checking, while something is not provisioned yet.
// An error that waiting cannot cure (a permission, a stream with other settings) ends it
// at once.
func provision(ctx context.Context, js jetstream.JetStream, topo bus.Topology, checkOnly bool, log *slog.Logger) error {
	wait := 250 * time.Millisecond
	for attempt := 1; ; attempt++ {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		var err error
		if checkOnly {
			err = bus.Check(pctx, js, topo)
		} else {
			err = bus.Provision(pctx, js, topo)
		}
		cancel()
		if err == nil {
			if attempt > 1 {
				log.Info("JetStream answered; streams and buckets provisioned", "attempts", attempt)
			}
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w (while waiting: %v)", ctx.Err(), err)
		}
		var api *jetstream.APIError
		if (!errors.Is(err, bus.ErrNotProvisioned) && errors.As(err, &api) && api.Code != 503) || errors.Is(err, nats.ErrPermissionViolation) {
			return err
		}
		if errors.Is(err, bus.ErrNotProvisioned) {
			log.Warn("waiting for the streams and buckets to be provisioned", "attempt", attempt, "err", err)
		} else {
			log.Warn("waiting for JetStream", "attempt", attempt, "err", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (while waiting: %v)", ctx.Err(), err)
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

type runFunc func(context.Context) error

// queueGauges reports each stage's queue at every scrape while leading says so: messages
// not yet delivered and delivered but not yet acknowledged (delivery stops when that
// reaches MaxAckPending). One process of the cluster reports them (the leading
// healthd, whose NATS user may read every stage's consumer), so that a sum over
// processes counts each queue once and no other service asks for what it may not read.
func queueGauges(m *telemetry.Metrics, js jetstream.JetStream, topo bus.Topology, leading func() bool) error {
	type queue struct{ stream, consumer string }
	var queues []queue // every tenant's too
	for stream, c := range topo.Consumers() {
		queues = append(queues, queue{stream, c.Durable})
	}
	slices.SortFunc(queues, func(a, b queue) int { return strings.Compare(a.stream, b.stream) })
	infos := func(ctx context.Context, f func(q queue, info *jetstream.ConsumerInfo)) {
		if !leading() {
			return
		}
		// A scrape must not hang on a slow server: all the lookups get 2s.
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		for _, q := range queues {
			c, err := js.Consumer(ctx, q.stream, q.consumer)
			if err != nil {
				continue
			}
			if info, err := c.Info(ctx); err == nil {
				f(q, info)
			}
		}
	}
	attrs := func(q queue) []attribute.KeyValue {
		return []attribute.KeyValue{attribute.String("stream", q.stream), attribute.String("consumer", q.consumer)}
	}
	if err := m.Gauge("toolbus.consumer.pending", "messages waiting for a stage", func(ctx context.Context, record func(int64, ...attribute.KeyValue)) {
		infos(ctx, func(q queue, info *jetstream.ConsumerInfo) { record(int64(info.NumPending), attrs(q)...) })
	}); err != nil {
		return err
	}
	if err := m.Gauge("toolbus.consumer.ack_pending", "messages a stage is working on; delivery stops at MaxAckPending", func(ctx context.Context, record func(int64, ...attribute.KeyValue)) {
		infos(ctx, func(q queue, info *jetstream.ConsumerInfo) { record(int64(info.NumAckPending), attrs(q)...) })
	}); err != nil {
		return err
	}
	// The console records each redrive in the dead-letter stream, on subjects of their
	// own (messages.RedriveSubject): those are the operator's work, not dead letters.
	return m.Gauge("toolbus.dead_letters", "dead letters in the dead-letter stream (TOOLBUS_DEAD, without the console's records of redrives): what could not be answered, kept for inspection", func(ctx context.Context, record func(int64, ...attribute.KeyValue)) {
		if !leading() {
			return
		}
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		st, err := js.Stream(ctx, messages.StreamDead)
		if err != nil {
			return
		}
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(messages.AllRedrives))
		if err != nil {
			return
		}
		n := info.State.Msgs
		for _, records := range info.State.Subjects {
			n -= min(n, records)
		}
		record(int64(n))
	})
}

// wiring is what every service is built from: the connection, the options, and the
// pieces Start made once for all of them.
type wiring struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	o       Options
	secrets *redact.Current // the configuration's secrets, masked in logs, errors and traces
	catalog *parser.Catalog
	ops     *ops.Server
	metrics *telemetry.Metrics
	reload  *trigger
	// streams is the stream state the parser and the formatter of this process share, so
	// that their updates of one response take turns (order.NewStreamStore).
	streams *order.StreamStore
}

// streamStore returns the process's stream state, kept in gather.
func (w *wiring) streamStore(gather jetstream.KeyValue) order.StreamStore {
	if w.streams == nil {
		s := order.NewStreamStore(gather)
		w.streams = &s
	}
	return *w.streams
}

// build makes one service's runs.
func (w *wiring) build(ctx context.Context, name string) ([]runFunc, error) {
	nc, js, o, metrics := w.nc, w.js, w.o, w.metrics
	log := o.Logger.With("service", name)
	tracer := telemetry.Tracer(o.TracerProvider)
	var runs []runFunc
	// stage registers one replica with ops and returns its stats middleware.
	stage := func() (func(bus.Handler) bus.Handler, func(time.Duration, error), error) {
		if w.ops == nil {
			return nil, nil, nil
		}
		st, err := w.ops.AddStage(name, "toolbus "+name)
		if err != nil {
			return nil, nil, err
		}
		return st.Wrap, st.Observe, nil
	}
	switch name {
	case Parser:
		catalog := w.catalog
		kv, err := js.KeyValue(ctx, messages.BucketCatalog)
		if err != nil {
			return nil, fmt.Errorf("parser: catalog bucket: %w", err)
		}
		runs = append(runs, func(ctx context.Context) error { return catalog.Follow(ctx, kv, log) })
		gather, err := js.KeyValue(ctx, messages.BucketGather)
		if err != nil {
			return nil, fmt.Errorf("parser: gather bucket: %w", err)
		}
		p := ParserStage(o.Config, catalog)
		p.Serves, p.Tracer = o.Topology.Serves, tracer
		p.Plans = order.Store{KV: gather}
		p.Texts, p.Streams = parser.NewTextStore(gather), w.streamStore(gather)
		for range o.Replicas {
			mw, _, err := stage()
			if err != nil {
				return nil, err
			}
			// Each tenant's responses come on queues of its own.
			for _, tenant := range o.Topology.TenantNames() {
				runs = append(runs, runStage(js, messages.ResponseStream(tenant), messages.ConsumerParser, p.Parse, false,
					bus.RunOptions{Concurrency: 16, Prefetch: stagePrefetch, SpanName: "parse", Tracer: tracer, Middleware: mw, Metrics: metrics, Logger: log}),
					runStage(js, messages.ChunkStream(tenant), messages.ConsumerParser, p.Chunk, false,
						bus.RunOptions{Concurrency: 16, Prefetch: stagePrefetch, SpanName: "parse chunk", Untraced: true, Tracer: tracer, Middleware: mw, Metrics: metrics, Logger: log}))
			}
		}
	case Executor:
		// The executor runs tools and servers as children of the same user: they must not
		// read its environment through /proc.
		if o.Harden {
			if err := harden(); err != nil {
				log.Warn("executor: cannot make the process non-dumpable; its children may read its environment", "err", err)
			}
		}
		kv, err := js.KeyValue(ctx, messages.BucketSessions)
		if err != nil {
			return nil, fmt.Errorf("executor: sessions bucket: %w", err)
		}
		catalogKV, err := js.KeyValue(ctx, messages.BucketCatalog)
		if err != nil {
			return nil, fmt.Errorf("executor: catalog bucket: %w", err)
		}
		calls, err := js.KeyValue(ctx, messages.BucketCalls)
		if err != nil {
			return nil, fmt.Errorf("executor: calls bucket: %w", err)
		}
		store := o.Tokens
		if store == nil {
			if store, err = tokens.Open(ctx, js, o.TokenKey); err != nil {
				return nil, fmt.Errorf("executor: %w", err)
			}
		}
		if err := requireTokenKey(ctx, o.Config, store, true, log); err != nil {
			return nil, fmt.Errorf("executor: %w", err)
		}
		pool, err := NewPool(o.Config, mcpwire.Options{Logger: log, MeterProvider: o.MeterProvider, Tokens: store, Login: o.Login, Ask: askOrchestrator(nc),
			Progress: publishProgress(nc, log), Sample: askModel(nc), Log: publishLog(nc, w.secrets, log), Updated: publishUpdated(nc, log),
			OnCatalog: func(server string, tools []mcpwire.Tool) { mirrorCatalog(catalogKV, server, tools, log) }})
		if err != nil {
			return nil, err
		}
		// The tools each server listed last, from before this executor started: a server
		// down now is still known by them.
		pool.Remember(func(server string) []catalog.Tool { return lastListed(ctx, catalogKV, server, log) })
		sessions := &engbackend.CachedSessions{KVSessions: engbackend.KVSessions{KV: kv}, Logger: log}
		exec, err := NewExecutor(o.Config, o.Tools, sessions, pool, o.Backends...)
		if err != nil {
			pool.Close()
			return nil, err
		}
		runs = append(runs, sessions.Follow, followGrants(store, pool, log))
		exec.Tracer, exec.Metrics, exec.Redact = tracer, metrics, w.secrets
		// The breaker opens on this executor's own call failures, never on a probe's
		// opinion: healthd's statuses are for operators and alerts.
		gate := executor.NewBreaker(&executor.BreakerOptions{Logger: log})
		if w.ops != nil {
			w.ops.SetBreakers(gate.Open)
			w.ops.SetSessions(func() map[string]int {
				out := map[string]int{}
				for server, convs := range pool.Sessions() {
					out[server] = len(convs)
				}
				return out
			})
		}
		exec.Gate = gate
		// Limits are counted in a bucket shared by every replica; without it (a deployment
		// not provisioned again since limits came) configured limits cannot hold.
		if limitsKV, err := js.KeyValue(ctx, messages.BucketLimits); err == nil {
			exec.Limits = &policy.Limiter{KV: limitsKV}
			exec.Limits.Set(o.Config.Limits)
		} else if len(o.Config.Limits) > 0 {
			pool.Close()
			return nil, fmt.Errorf("executor: limits are configured but the %s bucket is missing (provision the streams again): %w", messages.BucketLimits, err)
		}
		// A call a rule asks a person to approve waits in the approvals bucket, shared by
		// every replica; each follows it, to refuse what nobody decided in time and to
		// send decided calls again.
		if approvalsKV, err := js.KeyValue(ctx, messages.BucketApprovals); err == nil {
			exec.Approvals = &policy.Approvals{KV: approvalsKV, Logger: log}
			exec.Announce = announceApproval(nc, log)
			runs = append(runs, func(ctx context.Context) error { return exec.Approvals.Follow(ctx, requeueApproved(js)) })
			// People decide by asking the executors (messages.DecideSubject), which
			// alone write the bucket: the subject names the deciding NATS user.
			// Subscribed (and flushed) while the executor is set up: a decision made the
			// moment a call is announced finds it answering.
			sub, err := exec.Approvals.Serve(nc, o.Topology.TenantNames())
			if err == nil {
				err = nc.Flush()
			}
			if err != nil {
				pool.Close()
				return nil, fmt.Errorf("executor: answering decisions: %w", err)
			}
			runs = append(runs, func(ctx context.Context) error {
				<-ctx.Done()
				return sub.Unsubscribe()
			})
		}
		// Each executor's breaker is its own: the gauge is per process (take the max).
		if err := metrics.Gauge("toolbus.breaker.open", "1 while this executor's circuit breaker refuses calls to the server, 0 while it lets them through, by server",
			func(_ context.Context, record func(int64, ...attribute.KeyValue)) {
				for server, open := range gate.Refusing() {
					v := int64(0)
					if open {
						v = 1
					}
					record(v, attribute.String("server", server))
				}
			}); err != nil {
			return nil, err
		}
		// The in-process tools join the catalog too, for the parser and `toolbus tools`,
		// and the executor follows its configuration file.
		mirrorInProcess(catalogKV, exec.Router, pool, log)
		if o.Config.Source != "" {
			runs = append(runs, watchPool(o.Config, pool, w.reload.wait, func(next *config.Config) {
				w.secrets.Set(next.Redactor())
				exec.Router.SetLists(TopLists(next))
				// The rules and limits take effect for the next call; next compiled them
				// already (config.Parse), so this cannot fail.
				if rules, err := policy.Compile(next.Policy.Rules); err == nil {
					if rules.Revision() != exec.Policy.Load().Revision() {
						log.Info("policy reloaded", "rules", rules.Len(), "policy", rules.Revision())
					}
					exec.Policy.Store(rules)
				}
				if exec.Limits != nil {
					exec.Limits.Set(next.Limits)
				} else if len(next.Limits) > 0 {
					log.Warn("limits are configured but the bucket is missing: provision the streams again and restart", "bucket", messages.BucketLimits)
				}
				mirrorInProcess(catalogKV, exec.Router, pool, log)
			}, log))
		}
		// The pool's servers (child processes among them) start with the service, not at
		// the first call, so that their tools join the catalog the parser recognises
		// calls by; they live as long as the service.
		// On a stop, the calls under way (pulled, or forwarded here by other replicas)
		// finish on their sessions first: the pool closes after the stage's runners and
		// the forwarded calls' server returned.
		var calling sync.WaitGroup
		runs = append(runs, func(ctx context.Context) error {
			_ = pool.Connect(ctx) // a server that fails is logged, reported and tried again
			<-ctx.Done()
			calling.Wait()
			return pool.Close()
		})
		during := func(run runFunc) runFunc {
			calling.Add(1)
			return func(ctx context.Context) error {
				defer calling.Done()
				return run(ctx)
			}
		}
		kept := results.NewStore(js)
		owner := "executor-" + nuid.Next()
		// healthd judges the servers by this executor's live sessions, the ones that
		// serve their calls (pkg/healthd AnswerProbes): answered from now on, before a
		// healthd of this process probes for the first time.
		pool.Start()
		stopProbes, err := healthd.ServeProbes(nc, owner, pool, log)
		if err != nil {
			pool.Close()
			return nil, err
		}
		runs = append(runs, func(ctx context.Context) error { <-ctx.Done(); stopProbes(); return nil })
		// The calls of a conversation to a conversation-scoped server reach the replica
		// that holds the conversation's session (pkg/affinity); this executor's replicas
		// share one pool, so they are one holder.
		var owners *affinity.Owners
		if ownersKV, err := js.KeyValue(ctx, messages.BucketOwners); err == nil {
			owners = &affinity.Owners{KV: ownersKV, Conn: nc, Self: owner, Logger: log}
		} else {
			log.Warn("executor: no sessions owners bucket (provision the streams again): calls of conversation-scoped servers are run by whichever replica pulls them",
				"bucket", messages.BucketOwners, "err", err)
		}
		for i := range o.Replicas {
			mw, _, err := stage()
			if err != nil {
				stopProbes()
				pool.Close()
				return nil, err
			}
			st := &executor.Stage{Exec: exec, Claims: claims.KV{KV: calls, Owner: owner}, QuietTools: o.Config.Executor.QuietTools, Logger: log,
				MaxInlineResultBytes: min(cmp.Or(o.Config.Executor.MaxInlineResultBytes, executor.DefaultMaxInlineResultBytes), int(nc.MaxPayload())/4),
				Results:              kept, Owners: owners}
			if i == 0 && owners != nil {
				handle := bus.Decoded(executor.Decode, st.Execute)
				runs = append(runs, during(func(ctx context.Context) error {
					return owners.Serve(ctx, func(ctx context.Context, d *bus.Delivery) ([]bus.Outgoing, error) {
						ctx, span := bus.StartForwardedSpan(ctx, tracer, messages.ConsumerExecutor, d)
						defer span.End()
						return handle(ctx, d)
					})
				}))
			}
			runs = append(runs, during(runStage(js, messages.StreamCalls, messages.ConsumerExecutor, bus.Decoded(executor.Decode, st.Execute), true,
				bus.RunOptions{Concurrency: cmp.Or(o.Config.Executor.Concurrency, 16), Prefetch: executorPrefetch(o.Config.Executor.Prefetch), SpanName: "execute", Tracer: tracer, Middleware: mw, Metrics: metrics, Logger: log})))
			if i == 0 {
				dl := &deadletter.Stage{Messages: deadletter.Streams{JS: js}, Claims: claims.KV{KV: calls, Owner: owner}}
				runs = append(runs, runStage(js, messages.StreamAdvisories, messages.ConsumerDeadLetter, bus.Decoded(deadletter.Decode, dl.Handle), false,
					bus.RunOptions{SpanName: "dead-letter", Tracer: tracer, Logger: log}))
			}
		}
	case Formatter:
		gather, err := js.KeyValue(ctx, messages.BucketGather)
		if err != nil {
			return nil, fmt.Errorf("formatter: gather bucket: %w", err)
		}
		kept := results.NewStore(js)
		f := &formatter.Stage{Gather: formatter.NewKVGatherer(gather), Plans: order.Store{KV: gather}, Streams: w.streamStore(gather),
			Results: kept, MaxOutputBytes: int(nc.MaxPayload()) - 64<<10}
		for range o.Replicas {
			mw, _, err := stage()
			if err != nil {
				return nil, err
			}
			runs = append(runs, runStage(js, messages.StreamResults, messages.ConsumerFormatter, bus.Decoded(formatter.Decode, f.Format), false,
				bus.RunOptions{Concurrency: 16, Prefetch: stagePrefetch, SpanName: "format", Tracer: tracer, Middleware: mw, Metrics: metrics, Logger: log}))
		}
	case Healthd:
		_, observe, err := stage()
		if err != nil {
			return nil, err
		}
		store := o.Tokens
		if store == nil {
			if store, err = tokens.Open(ctx, js, o.TokenKey); err != nil {
				return nil, fmt.Errorf("healthd: %w", err)
			}
		}
		if err := requireTokenKey(ctx, o.Config, store, false, log); err != nil {
			return nil, fmt.Errorf("healthd: %w", err)
		}
		h, err := healthd.New(ctx, nc, js, o.Config, &healthd.Options{Observe: observe, Logger: log, Tokens: store,
			MeterProvider: o.MeterProvider, TracerProvider: o.TracerProvider})
		if err != nil {
			return nil, err
		}
		// The queues are the cluster's: the leading healthd reports them, once.
		if o.MeterProvider != nil {
			if err := queueGauges(metrics, js, o.Topology, h.Leading); err != nil {
				return nil, err
			}
		}
		runs = append(runs, h.Run)
		if o.Config.Source != "" {
			// healthd follows the configuration file as the executor does.
			runs = append(runs, func(ctx context.Context) error {
				return WatchConfig(ctx, o.Config.Source, func(next *config.Config) error { h.Apply(next); return nil }, w.reload.wait, log)
			})
		}
	default:
		return nil, fmt.Errorf("unknown service %q (want %v)", name, AllServices())
	}
	return runs, nil
}

// stagePrefetch is how many messages the parser and the formatter, whose handlers take
// microseconds, keep buffered ahead of their workers: enough for the pull iterator to
// ask for messages in large batches (16 reaches 0.7 of the bus's throughput, 128 all of
// it; see docs/performance.md).
const stagePrefetch = 128

// executorPrefetch is the executor's RunOptions.Prefetch for the configured value.
func executorPrefetch(configured int) int {
	switch {
	case configured < 0:
		return 0
	case configured == 0:
		return stagePrefetch
	}
	return configured
}

// runStage is the run of one replica of a stage: the stage runner on the stage's durable
// consumer. With heartbeat, a message is marked in progress every third of the
// consumer's AckWait while its handler runs (calls may take long).
func runStage(js jetstream.JetStream, stream, consumer string, h bus.Handler, heartbeat bool, o bus.RunOptions) runFunc {
	return func(ctx context.Context) error {
		c, err := js.Consumer(ctx, stream, consumer)
		if err != nil {
			return fmt.Errorf("%s: %w", consumer, err)
		}
		if heartbeat {
			o.Heartbeat = max(c.CachedInfo().Config.AckWait/3, 100*time.Millisecond)
		}
		return bus.Run(ctx, c, js, h, o)
	}
}

// WaitForCatalog waits up to wait until the parser's catalog holds the tools of every
// backend of cfg (its enabled MCP servers, the tools folder and the engineering suite)
// and of the extra backends named, and returns the backends that are still missing.
func WaitForCatalog(ctx context.Context, catalog *parser.Catalog, cfg *config.Config, wait time.Duration, extra ...string) []string {
	want := append([]string{"local"}, extra...)
	if config.On(cfg.Engineering.Enabled) {
		want = append(want, "engineering")
	}
	for name, s := range cfg.MCPServers {
		if s.IsEnabled() {
			want = append(want, name)
		}
	}
	sort.Strings(want)
	deadline := time.After(wait)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		want = slices.DeleteFunc(want, func(name string) bool { return catalog.Has(bus.Key(name)) })
		if len(want) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return want
		case <-deadline:
			return want
		case <-tick.C:
		}
	}
}

// ParserStage is the parser of a configuration reading the tools of catalog: its
// extraction limits and format pin, its routes and its ordering policy (the caller
// sets Plans, where the parser keeps the later segments of ordered responses).
func ParserStage(cfg *config.Config, catalog *parser.Catalog) *parser.Stage {
	format, _ := toolcall.ParseFormat(cfg.Parser.Format)
	reasoning, _ := toolcall.ParseReasoning(cfg.Parser.Reasoning) // validated when loaded
	extract := &toolcall.Options{Format: format, Reasoning: reasoning, MaxInputSize: cfg.Parser.MaxResponseBytes,
		MaxCalls: cfg.Parser.MaxCalls, MaxDepth: cfg.Parser.MaxDepth}
	var routed []string
	for name, server := range cfg.Routes {
		if server != nil {
			routed = append(routed, name)
		}
	}
	ordering, _ := cfg.Order() // validated when loaded
	p := &parser.Stage{Extract: extract, Catalog: catalog, Routed: routed, Order: ordering,
		StreamIdle: time.Duration(cfg.Parser.StreamIdleTimeout), MaxChunks: cfg.Parser.StreamMaxChunks,
		OutputFormat: cfg.Parser.OutputFormat}
	for name, t := range cfg.Tenants {
		if t.OutputFormat != "" {
			if p.TenantOutputFormats == nil {
				p.TenantOutputFormats = map[string]string{}
			}
			p.TenantOutputFormats[name] = t.OutputFormat
		}
	}
	p.Offers = ToolOffers(cfg)
	return p
}

// ToolOffers reports whether the configuration's policy leaves a tool of the catalog
// offered to a tenant's models — the parser's view, which the MCP front door lists
// (pkg/frontdoor); nil when there are no rules (every tool is).
func ToolOffers(cfg *config.Config) func(catalog.Tool, string) bool {
	if rules, err := policy.Compile(cfg.Policy.Rules); err == nil && rules != nil { // compiled when loaded
		return offers(cfg, rules)
	}
	return nil
}

// offers reports whether the rules leave a tool of the catalog offered to a tenant's
// models, seeing it as the executor's router does: an MCP server's tool by its server
// and its name there, an in-process backend's (the catalog's "local", "engineering")
// as a tool of no server.
func offers(cfg *config.Config, rules *policy.Policy) func(catalog.Tool, string) bool {
	return func(t catalog.Tool, tenant string) bool {
		ref := catalog.Ref{Server: t.Server, Tool: cmp.Or(t.Remote, t.Name)}
		if _, configured := cfg.MCPServers[t.Server]; !configured {
			ref = catalog.Ref{Tool: t.Name}
		}
		return rules.Offers(ref.Name(), ref.Server, ref.Tool, tenant)
	}
}

// NewPool returns the pool of the configuration's MCP servers: o with the
// configuration's routes and top-level allow- and block-lists.
func NewPool(cfg *config.Config, o mcpwire.Options) (*mcpwire.Pool, error) {
	o.Routes, o.AllowedTools, o.BlockedTools = cfg.Routes, cfg.AllowedTools, cfg.BlockedTools
	return mcpwire.NewPool(cfg.MCPServers, &o)
}

// mirrorCatalog keeps a server's tools in the catalog bucket for the parser, healthd and
// `toolbus tools`; a nil list (server removed) deletes the key.
func mirrorCatalog(kv jetstream.KeyValue, server string, tools []catalog.Tool, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	key := bus.Key(server)
	if tools == nil {
		if err := kv.Delete(ctx, key); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			log.Warn("catalog: delete", "server", server, "err", err)
		}
		return
	}
	body, err := json.Marshal(tools)
	if err == nil {
		_, err = kv.Put(ctx, key, body)
	}
	if err != nil {
		log.Warn("catalog: store", "server", server, "err", err)
	}
}

// lastListed reads the tools the catalog bucket holds for server (mirrorCatalog wrote
// them when it last listed its tools): none without a record, or with one unreadable.
func lastListed(ctx context.Context, kv jetstream.KeyValue, server string, log *slog.Logger) []catalog.Tool {
	e, err := kv.Get(ctx, bus.Key(server))
	if err != nil {
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			log.Warn("catalog: the tools a server listed last could not be read", "server", server, "err", err)
		}
		return nil
	}
	var tools []catalog.Tool
	if err := json.Unmarshal(e.Value(), &tools); err != nil {
		log.Warn("catalog: the tools a server listed last could not be read", "server", server, "err", err)
		return nil
	}
	return tools
}

// NewExecutor builds the executor of a configuration. Routing order: explicit routes to
// MCP servers, local tools, the engineering suite, the extra backends, then the MCP
// servers' own tools. The top-level allowedTools and blockedTools cover every one of them
// (executor.Router.SetLists; the pool applies them to its servers' tools too). The
// policy's rules are compiled into executor.Executor.Policy; its limits need a bucket
// and are set by the service (Start).
func NewExecutor(cfg *config.Config, local *localtools.Registry, sessions engineering.SessionStore, pool *mcpwire.Pool, extra ...executor.Backend) (*executor.Executor, error) {
	if local == nil {
		local = localtools.New()
	}
	for _, server := range local.Servers() {
		// A Go tool's server shares the names of the configuration's servers.
		if _, taken := cfg.MCPServers[server]; taken {
			return nil, fmt.Errorf("toolbus: Go tools are added under the server %q, which mcpServers configures too", server)
		}
	}
	base := ""
	if cfg.Source != "" {
		base = filepath.Dir(cfg.Source)
	}
	if err := localtools.Configure(local, cfg.Local, &localtools.Options{BaseDir: base}); err != nil {
		return nil, err
	}
	var backends []executor.Backend
	if pool != nil {
		backends = append(backends, executor.MCPBackend{Pool: pool, RoutedOnly: true})
	}
	backends = append(backends, executor.LocalBackend{Registry: local})
	if config.On(cfg.Engineering.Enabled) {
		suite := engineering.New(&engineering.Options{Sessions: sessions, Expose: cfg.Engineering.Expose})
		backends = append(backends, engbackend.New(suite))
	}
	backends = append(backends, extra...)
	if pool != nil {
		backends = append(backends, executor.MCPBackend{Pool: pool})
	}
	tools := map[string]time.Duration{}
	for name, d := range cfg.Executor.ToolTimeouts {
		tools[name] = time.Duration(d)
	}
	router := executor.NewRouter(backends...)
	router.SetLists(TopLists(cfg))
	rules, err := policy.Compile(cfg.Policy.Rules)
	if err != nil {
		return nil, fmt.Errorf("toolbus: policy.%w", err)
	}
	exec := &executor.Executor{
		Router:       router,
		Timeout:      time.Duration(cfg.Executor.Timeout),
		ToolTimeouts: tools,
	}
	exec.Policy.Store(rules)
	return exec, nil
}

// TopLists are the configuration's top-level allow- and block-lists, which cover every
// backend.
func TopLists(cfg *config.Config) catalog.Lists {
	return catalog.Lists{Allowed: cfg.AllowedTools, Blocked: cfg.BlockedTools}
}

// publishProgress publishes what an MCP server reports of a call under way on the
// conversation's progress subject (kept with the outputs), marked with the call's id
// (messages.HeaderProgressOf): best effort, as the notifications themselves are.
func publishProgress(nc *nats.Conn, log *slog.Logger) mcpwire.ProgressFunc {
	return func(ctx context.Context, p messages.CallProgress) {
		if messages.ValidateConversation(p.Conversation) != nil {
			return
		}
		notify(ctx, nc, log, p.Conversation, messages.HeaderProgressOf, p.CallID, p, "progress")
	}
}

// announceApproval publishes a call's approval request on its conversation's approvals
// subject, for whoever watches; the request is kept in the approvals bucket whether or
// not anybody does.
func announceApproval(nc *nats.Conn, log *slog.Logger) func(context.Context, messages.ApprovalRequest) {
	return func(ctx context.Context, req messages.ApprovalRequest) {
		body, err := json.Marshal(req)
		if err != nil {
			return
		}
		m := &nats.Msg{Subject: messages.ApprovalSubject(req.Conversation), Data: body, Header: nats.Header{}}
		m.Header.Set(messages.HeaderConversation, req.Conversation)
		bus.InjectTrace(ctx, m.Header)
		if err := nc.PublishMsg(m); err != nil {
			log.Warn("approval request not announced; it is listed by `toolbus approvals ls`", "approval", req.ID, "err", err)
		}
	}
}

// requeueApproved sends a decided call to the executors again, as the parser sent it.
func requeueApproved(js jetstream.JetStream) policy.Requeue {
	return func(ctx context.Context, rec messages.Approval, msgID string) error {
		call := rec.Call
		m := bus.Meta{ResponseID: call.ResponseID, Conversation: call.Conversation, MsgID: msgID, Index: call.Index, Count: call.Count, Next: call.Next}
		out, err := bus.JSON(messages.CallSubject(call.Conversation), m, call)
		if err != nil {
			return err
		}
		_, err = js.PublishMsg(ctx, &nats.Msg{Subject: out.Subject, Header: m.Header(), Data: out.Body})
		return err
	}
}

// askOrchestrator puts a server's elicitation request to the conversation's
// orchestrator: a NATS request on toolbus.elicit.<conversation>, answered within the
// call's time. Nobody listening declines at once.
func askOrchestrator(nc *nats.Conn) mcpwire.AskFunc {
	return func(ctx context.Context, server, conversation string, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
		req := messages.ElicitRequest{Conversation: conversation, Server: server, Message: p.Message, Mode: p.Mode, URL: p.URL}
		if p.RequestedSchema != nil {
			req.RequestedSchema, _ = json.Marshal(p.RequestedSchema)
		}
		if d, ok := ctx.Deadline(); ok {
			req.Deadline = d
		}
		body, err := json.Marshal(req)
		if err != nil {
			return nil, err
		}
		answer, err := askConversation(ctx, nc, messages.ElicitSubject(conversation), conversation, body)
		if err != nil {
			return nil, err
		}
		var resp messages.ElicitResponse
		if err := json.Unmarshal(answer, &resp); err != nil {
			return nil, fmt.Errorf("the orchestrator's answer: %w", err)
		}
		switch resp.Action {
		case "accept", "decline", "cancel":
		default:
			return nil, fmt.Errorf("the orchestrator answered %q (want accept, decline or cancel)", resp.Action)
		}
		return &mcp.ElicitResult{Action: resp.Action, Content: resp.Content}, nil
	}
}
