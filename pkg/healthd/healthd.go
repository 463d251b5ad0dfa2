package healthd

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/toolbus/toolbus/pkg/mcpwire/oauth"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/redact"
)

// Defaults of [Options].
const (
	DefaultTimeout   = 5 * time.Second
	DefaultThreshold = 3
	DefaultLeaseTTL  = 10 * time.Second
)

// Options configures a [Service]. The zero value means the defaults.
type Options struct {
	// Interval between two probes of one server. Default: the configuration's, 15s.
	Interval time.Duration
	// Timeout of one probe. Default 5s.
	Timeout time.Duration
	// Threshold is the number of consecutive failed probes after which a server is
	// down. Default 3.
	Threshold int
	// LeaseTTL is how long the leader's lease lasts unless renewed; it is renewed every
	// third of it. A replica takes over when the leader has not renewed for this long.
	// Default 10s.
	LeaseTTL time.Duration
	// ID names this replica in the lease and in the statuses it writes. Default:
	// host name, process id and a random suffix.
	ID string
	// Targets replaces the targets of the configuration (tests).
	Targets []Target
	// HTTPClient is the base client of HTTP probes; see [TargetOptions].
	HTTPClient *http.Client
	// Tokens holds the OAuth grants of http servers; see [TargetOptions].
	Tokens oauth.TokenStore
	// Observe, when set, is told the duration and error of every probe (ops stats).
	Observe func(time.Duration, error)
	// TracerProvider records a span per probe; nil means the global provider.
	TracerProvider trace.TracerProvider
	// MeterProvider records toolbus.server.up and toolbus.server.probe.duration while
	// this replica leads; nil records none.
	MeterProvider metric.MeterProvider
	// Now stamps the statuses. Default time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Service is the health daemon: one replica of it, of which the leader probes.
type Service struct {
	nc      *nats.Conn
	kv      jetstream.KeyValue
	opts    Options
	targets []Target
	lease   *lease
	log     *slog.Logger
	// secrets masks the configuration's secrets in the statuses it stores.
	secrets redact.Current

	metrics metrics

	mu   sync.Mutex
	busy map[string]bool // targets whose last probe has not returned yet
	// states is each target's state as this replica last stored it, for the metrics.
	states map[string]messages.HealthState
	// changed is signalled by [Service.Apply]: the leader probes the new targets.
	changed chan struct{}
}

// New returns a health daemon for the targets of cfg ([Targets]).
func New(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, cfg *config.Config, opts *Options) (*Service, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if cfg == nil {
		cfg = &config.Config{}
	}
	if o.Interval <= 0 {
		o.Interval = cfg.HealthInterval()
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Threshold <= 0 {
		o.Threshold = DefaultThreshold
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	if o.ID == "" {
		o.ID = bus.InstanceID()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	kv, err := js.KeyValue(ctx, messages.BucketHealth)
	if err != nil {
		return nil, fmt.Errorf("healthd: %w", err)
	}
	targets := o.Targets
	if targets == nil {
		targets = Targets(cfg, &TargetOptions{HTTPClient: o.HTTPClient, RequestTimeout: o.Timeout, Tokens: o.Tokens, Conn: nc})
	}
	s := &Service{
		nc: nc, kv: kv, opts: o, targets: targets,
		lease: &lease{kv: kv, id: o.ID, ttl: o.LeaseTTL},
		log:   o.Logger.With("replica", o.ID),
		busy:  map[string]bool{}, changed: make(chan struct{}, 1), states: map[string]messages.HealthState{},
	}
	s.secrets.Set(cfg.Redactor())
	if s.metrics, err = newMetrics(o.MeterProvider, s.eachState); err != nil {
		return nil, fmt.Errorf("healthd: metrics: %w", err)
	}
	return s, nil
}

// eachState yields the state of every configured target this replica recorded, while
// it leads.
func (s *Service) eachState(yield func(string, messages.HealthState)) {
	if !s.Leading() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.targets {
		if st, ok := s.states[t.Name]; ok {
			yield(t.Name, st)
		}
	}
}

// Apply makes the targets of cfg the ones probed, as a configuration reload does for
// the executor: a server added is probed from now on, one whose configuration changed
// is probed anew, and one removed is forgotten (its status deleted from the health
// bucket).
func (s *Service) Apply(cfg *config.Config) {
	targets := Targets(cfg, &TargetOptions{HTTPClient: s.opts.HTTPClient, RequestTimeout: s.opts.Timeout, Tokens: s.opts.Tokens, Conn: s.nc})
	s.secrets.Set(cfg.Redactor())
	s.mu.Lock()
	s.targets = targets
	s.mu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

func (s *Service) current() []Target {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.targets
}

// forget deletes a removed server's status.
func (s *Service) forget(ctx context.Context, name string) {
	dctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	if err := s.kv.Delete(dctx, bus.Key(name)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		s.log.Warn("health: forget a removed server", "server", name, "err", err)
		return
	}
	s.log.Info("health: server removed from the configuration; forgotten", "server", name)
}

// ID is the replica's name.
func (s *Service) ID() string { return s.opts.ID }

// Leading reports whether this replica holds the lease now.
func (s *Service) Leading() bool { return s.lease.held() }

// Run campaigns for the lease and, while it holds it, probes every target on the
// interval, until ctx is done. It gives the lease up on the way out.
func (s *Service) Run(ctx context.Context) error {
	for {
		if err := s.lease.acquire(ctx, s.log); err != nil {
			return nil // ctx is done
		}
		s.log.Info("health: leading; probing", "targets", len(s.current()), "interval", s.opts.Interval)
		s.lead(ctx)
		if ctx.Err() != nil {
			return nil
		}
		s.log.Warn("health: lost the lease; following")
	}
}

// lead probes every target in a loop of its own until ctx is done or the lease is lost.
func (s *Service) lead(ctx context.Context) {
	lctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	type running struct {
		spec   string
		cancel context.CancelFunc
	}
	watching := map[string]running{}
	// reconcile probes every current target: new ones and those whose configuration
	// changed start anew; those removed are stopped and forgotten.
	reconcile := func() {
		current := map[string]bool{}
		for _, t := range s.current() {
			current[t.Name] = true
			if w, ok := watching[t.Name]; ok && w.spec == t.spec {
				continue
			} else if ok {
				w.cancel()
			}
			tctx, tcancel := context.WithCancel(lctx)
			watching[t.Name] = running{spec: t.spec, cancel: tcancel}
			wg.Go(func() { s.watch(tctx, t) })
		}
		for name, w := range watching {
			if !current[name] {
				w.cancel()
				delete(watching, name)
				s.forget(ctx, name)
			}
		}
	}
	reconcile()
	renew := time.NewTicker(s.lease.ttl / 3)
	defer renew.Stop()
	for lost := false; !lost; {
		select {
		case <-ctx.Done():
			lost = true
		case <-s.changed:
			reconcile()
		case <-renew.C:
			if err := s.lease.renew(ctx); err != nil {
				s.log.Warn("health: renewing the lease", "err", err)
			}
			lost = !s.lease.held()
		}
	}
	cancel()
	wg.Wait()
	if ctx.Err() != nil {
		rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
		s.lease.release(rctx)
		rcancel()
	}
}

// watch probes one target now and then every interval — every third of it while its
// state is in question (failing but not yet down, or answering again but not yet up),
// so that a verdict takes seconds, not intervals: a server never reached is down within
// two thirds of an interval and the threshold's probe timeouts. Probes start on that
// beat, however long each took. A target whose last probe still runs (it ignored its
// timeout) is not probed again meanwhile.
func (s *Service) watch(ctx context.Context, t Target) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		start := time.Now()
		st, ok := s.probe(ctx, t)
		wait := s.opts.Interval
		if ok && Deciding(st) {
			wait /= 3
		}
		timer.Reset(max(wait-time.Since(start), 0))
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
	}
}

// Deciding reports whether status st is in question: failing without being down yet,
// or down and answering again without being up yet.
func Deciding(st messages.HealthStatus) bool {
	return st.Failures > 0 && st.State != messages.HealthDown && st.State != messages.HealthNeedsLogin ||
		st.State == messages.HealthDown && st.Successes > 0
}

func (s *Service) probe(ctx context.Context, t Target) (messages.HealthStatus, bool) {
	s.mu.Lock()
	if s.busy[t.Name] {
		s.mu.Unlock()
		return s.record(ctx, t, Result{Err: errors.New("the previous probe has not returned yet")})
	}
	s.busy[t.Name] = true
	s.mu.Unlock()
	tp := s.opts.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	pctx, span := tp.Tracer("github.com/toolbus/toolbus/pkg/healthd").Start(ctx, "probe "+t.Name,
		trace.WithAttributes(attribute.String("toolbus.server", t.Name), attribute.String("toolbus.transport", t.Transport)))
	r := runProbe(pctx, t, s.opts.Timeout, func() {
		s.mu.Lock()
		s.busy[t.Name] = false
		s.mu.Unlock()
	})
	if r.Err != nil {
		span.SetStatus(codes.Error, s.secrets.For(t.Name).String(r.Err.Error()))
	} else {
		span.SetAttributes(attribute.Int("toolbus.tools", r.Tools), attribute.String("mcp.protocol.version", r.Protocol))
	}
	span.End()
	return s.record(ctx, t, r)
}

// record stores the status after probe result r with compare-and-set, so that it
// builds on the stored status (the failure count survives a change of leader) and a
// concurrent writer's update is never lost, then publishes it.
func (s *Service) record(ctx context.Context, t Target, r Result) (messages.HealthStatus, bool) {
	if ctx.Err() != nil || !s.lease.held() {
		return messages.HealthStatus{}, false // the lease was lost or the service stops: this result is not ours to write
	}
	if s.opts.Observe != nil {
		s.opts.Observe(r.Latency, r.Err)
	}
	s.metrics.probed(ctx, t.Name, r.Latency, r.Err != nil)
	var before messages.HealthState
	wctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	st, err := bus.UpdateJSON(wctx, s.kv, bus.Key(t.Name), func(st *messages.HealthStatus) (bool, error) {
		before = st.State
		*st = Next(*st, r, s.opts.Threshold, s.opts.Now().UTC())
		st.Server, st.Transport, st.ProbedBy = t.Name, cmp.Or(r.Transport, t.Transport), s.opts.ID
		mask := s.secrets.For(t.Name) // a server's status shows its own secrets masked, not others'
		st.Error = mask.String(st.Error)
		for i := range st.History {
			st.History[i].Error = mask.String(st.History[i].Error)
		}
		return true, nil
	})
	if err != nil {
		if ctx.Err() == nil { // stopping is no failure to store
			s.log.Warn("health: store status", "server", t.Name, "err", err)
		}
		return messages.HealthStatus{}, false
	}
	s.mu.Lock()
	s.states[t.Name] = st.State
	s.mu.Unlock()
	if before != st.State {
		// A change is what an operator is paged for, and what follows it: a warning,
		// except a server's first judgement while it starts (up, or unknown: no verdict
		// yet) and its coming up from that unknown.
		level := slog.LevelWarn
		if (before == "" || before == messages.HealthUnknown) && st.State == messages.HealthUp || before == "" && st.State == messages.HealthUnknown {
			level = slog.LevelInfo
		}
		s.log.Log(ctx, level, "health: state changed", "server", t.Name, "from", before, "to", st.State, "err", st.Error)
	}
	body, _ := json.Marshal(st)
	if err := s.nc.Publish(messages.HealthSubject(t.Name), body); err != nil {
		s.log.Warn("health: publish status", "server", t.Name, "err", err)
	}
	return st, true
}

// riseThreshold is the consecutive successes that make a server that is down up again.
const riseThreshold = 2

// Next returns the status after a probe with result r, given the previous status prev:
// one success makes a server up, threshold consecutive failures make it down, and
// fewer leave its state as it was; a server that is down is up again after two
// consecutive successes (one, with a threshold of one), so that one answering every
// other probe stays down rather than flapping. ChangedAt moves when the state changes.
func Next(prev messages.HealthStatus, r Result, threshold int, now time.Time) messages.HealthStatus {
	if prev.State == "" {
		prev.State = messages.HealthUnknown
	}
	st := prev
	st.CheckedAt = now
	st.LatencyMS = float64(r.Latency.Microseconds()) / 1000
	if r.Via != "" {
		st.Via = r.Via
	}
	switch {
	case r.Pending:
		// The executor is still starting the server: no verdict, no failure. A server
		// judged before keeps its state and the reason for it; one never judged says
		// it is starting.
		if st.State == messages.HealthUnknown {
			st.Error = r.Note
		}
	case r.Err == nil:
		// A server still down keeps the reason it is down until it is up again.
		st.Failures, st.Successes = 0, st.Successes+1
		st.Tools, st.Protocol = r.Tools, r.Protocol
		if st.State != messages.HealthDown || st.Successes >= min(threshold, riseThreshold) {
			st.State, st.Successes, st.Error = messages.HealthUp, 0, r.Note
		}
	default:
		st.Failures, st.Successes = st.Failures+1, 0
		st.Error = r.Err.Error()
		switch {
		case errors.Is(r.Err, oauth.ErrNeedsLogin):
			// It answered: no threshold to wait for, and no retry will change it.
			st.State = messages.HealthNeedsLogin
			var nl *oauth.NeedsLoginError
			if errors.As(r.Err, &nl) {
				st.Error = nl.Reason + "; an operator authorizes toolbus with `" + messages.LoginCommand(nl.Server) + "`"
			}
		case st.Failures >= threshold:
			st.State = messages.HealthDown
		}
	}
	if st.State != prev.State {
		st.ChangedAt = now
		keep := prev.History[max(0, len(prev.History)-(messages.MaxHealthHistory-1)):]
		st.History = append(slices.Clip(keep), messages.HealthChange{From: prev.State, To: st.State, At: now, Error: st.Error})
	}
	return st
}
