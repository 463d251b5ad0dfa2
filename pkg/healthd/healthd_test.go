package healthd_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/healthd"
	"github.com/toolbus/toolbus/pkg/mcpwire"
	"github.com/toolbus/toolbus/pkg/messages"
)

// startHealthd runs a replica until the returned stop is called (or the test ends).
func startHealthd(t *testing.T, nc *nats.Conn, js jetstream.JetStream, cfg *config.Config, o healthd.Options) (*healthd.Service, func()) {
	t.Helper()
	h, err := healthd.New(context.Background(), nc, js, cfg, &o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := h.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return h, stop
}

func serversConfig(servers map[string]string) *config.Config {
	cfg := &config.Config{MCPServers: map[string]mcpwire.ServerConfig{}}
	for name, url := range servers {
		cfg.MCPServers[name] = mcpwire.ServerConfig{Type: "http", URL: url}
	}
	return cfg
}

// A server that goes away is down within interval × threshold, and up again at the
// first probe after it returns; every change is published on its subject.
func TestDownAndUp(t *testing.T) {
	nc, js := natsJS(t)
	kv := healthKV(t, js)
	srv := startMCPHTTP(t, nil)
	published := subscribeHealth(t, nc, "tickets")
	const interval, threshold = 150 * time.Millisecond, 3
	reader := sdkmetric.NewManualReader()
	rec := tracetest.NewSpanRecorder()
	startHealthd(t, nc, js, serversConfig(map[string]string{"tickets": srv.URL()}), healthd.Options{
		Interval: interval, Threshold: threshold, Timeout: time.Second, LeaseTTL: time.Second,
		MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)),
	})
	// toolbus.server.up as a scrape reads it.
	up := func() (int64, bool) {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if g, ok := m.Data.(metricdata.Gauge[int64]); ok && m.Name == healthd.MetricServerUp {
					for _, dp := range g.DataPoints {
						if v, _ := dp.Attributes.Value("server"); v.AsString() == "tickets" {
							return dp.Value, true
						}
					}
				}
			}
		}
		return 0, false
	}

	isState := func(want messages.HealthState) func() bool {
		return func() bool { st, _ := status(t, kv, "tickets"); return st.State == want }
	}
	waitFor(t, 5*time.Second, "up at first", isState(messages.HealthUp))
	st, _ := status(t, kv, "tickets")
	if st.Tools != 2 || st.Protocol == "" || st.Transport != "http" || st.ProbedBy == "" {
		t.Errorf("status %+v", st)
	}
	for _, name := range []string{"local", "engineering"} {
		if st, ok := status(t, kv, name); !ok || st.State != messages.HealthUp {
			t.Errorf("%s: %+v", name, st)
		}
	}

	srv.stop()
	took := waitFor(t, 10*time.Second, "down after the server stopped", isState(messages.HealthDown))
	// The first failing probe comes at most one interval after the stop; the down
	// state needs threshold of them (timings are logged, not asserted: the machine may
	// be busy).
	t.Logf("down %v after the stop (interval × threshold = %v)", took, interval*threshold)
	// The gauge follows the service's own copy of the state, set a moment after the
	// bucket's.
	gauge := func(want int64) func() bool {
		return func() bool { v, ok := up(); return ok && v == want }
	}
	waitFor(t, 5*time.Second, "toolbus.server.up = 0 while down", gauge(0))
	failed := 0
	for _, sp := range rec.Ended() {
		if sp.Name() == "probe tickets" && sp.Status().Code == codes.Error {
			failed++
		}
	}
	if failed < threshold {
		t.Errorf("%d probe spans with status Error, want at least %d", failed, threshold)
	}
	st, _ = status(t, kv, "tickets")
	if st.Failures < threshold || st.Error == "" || st.Tools != 2 {
		t.Errorf("down status %+v", st)
	}

	srv.start()
	took = waitFor(t, 10*time.Second, "up after the server returned", isState(messages.HealthUp))
	t.Logf("up %v after the restart (interval %v)", took, interval)
	waitFor(t, 5*time.Second, "toolbus.server.up = 1 while up", gauge(1))
	if st, _ := status(t, kv, "tickets"); st.Failures != 0 {
		t.Errorf("up with %d failures counted, want the first good probe to reset them", st.Failures)
	}

	// Subscribers saw each change, and heartbeats in between. The last change reaches
	// the subscription a moment after the bucket, where the test saw it.
	var states []messages.HealthState
	changes := func() bool {
		states = states[:0]
		for _, st := range published() {
			if st.ChangedAt.Equal(st.CheckedAt) {
				states = append(states, st.State)
			}
		}
		return len(states) >= 3
	}
	waitFor(t, 5*time.Second, "the three changes published", changes)
	if want := []messages.HealthState{messages.HealthUp, messages.HealthDown, messages.HealthUp}; !equal(states, want) {
		t.Errorf("changes published: %v, want %v", states, want)
	}
	if n := len(published()); n <= len(states) {
		t.Errorf("%d statuses published, want a heartbeat every interval", n)
	}
}

// healthd follows the configuration as the executor does: a server added is probed, one
// removed is forgotten.
func TestApplyFollowsConfig(t *testing.T) {
	nc, js := natsJS(t)
	kv := healthKV(t, js)
	a, b := startMCPHTTP(t, nil), startMCPHTTP(t, nil)
	h, _ := startHealthd(t, nc, js, serversConfig(map[string]string{"a": a.URL()}), healthd.Options{
		Interval: 100 * time.Millisecond, Timeout: time.Second, LeaseTTL: time.Second,
	})
	upState := func(name string) func() bool {
		return func() bool { st, _ := status(t, kv, name); return st.State == messages.HealthUp }
	}
	waitFor(t, 10*time.Second, "a up", upState("a"))
	if _, ok := status(t, kv, "b"); ok {
		t.Fatal("b probed before it was configured")
	}
	h.Apply(serversConfig(map[string]string{"a": a.URL(), "b": b.URL()}))
	waitFor(t, 10*time.Second, "b up after it was added", upState("b"))
	h.Apply(serversConfig(map[string]string{"b": b.URL()}))
	waitFor(t, 10*time.Second, "a forgotten after it was removed", func() bool { _, ok := status(t, kv, "a"); return !ok })
	// Forgotten for good: no late probe writes it back.
	before := b.lists.Load()
	waitFor(t, 10*time.Second, "b probed twice more", func() bool { return b.lists.Load() >= before+2 })
	if _, ok := status(t, kv, "a"); ok {
		t.Error("a came back after it was removed")
	}
}

// A server that hangs costs its own probe the timeout, and nobody else anything: while
// one probe of it hangs, the other server is probed on, interval after interval. The
// test waits for events, not for a length of time, so a busy machine cannot fail it:
// the probe's timeout is longer than the test waits.
func TestHangingServerDoesNotDelayOthers(t *testing.T) {
	nc, js := natsJS(t)
	kv := healthKV(t, js)
	fast, stuck := startMCPHTTP(t, nil), startMCPHTTP(t, nil)
	stuck.hang.Store(true)
	cfg := serversConfig(map[string]string{"fast": fast.URL(), "stuck": stuck.URL()})
	const interval = 100 * time.Millisecond
	_, stop := startHealthd(t, nc, js, cfg, healthd.Options{Interval: interval, Timeout: time.Minute, LeaseTTL: 3 * time.Second})
	waitFor(t, 10*time.Second, "fast up", func() bool { st, _ := status(t, kv, "fast"); return st.State == messages.HealthUp })
	waitFor(t, 10*time.Second, "a probe of stuck hanging", func() bool { return stuck.hanging.Load() == 1 })
	before := fast.lists.Load()
	waitFor(t, 30*time.Second, "fast probed 4 times while stuck's probe hangs", func() bool { return fast.lists.Load() >= before+4 })
	if n := stuck.hanging.Load(); n != 1 {
		t.Fatalf("%d probes of stuck hanging, want its one probe still", n)
	}
	if _, ok := status(t, kv, "stuck"); ok {
		t.Errorf("stuck has a status while its first probe hangs")
	}
	begin := time.Now()
	stop()
	t.Logf("stopped in %v with a probe hanging", time.Since(begin))

	// The hanging probe ends at its timeout, a failure, and costs no more than it.
	const timeout = time.Second
	startHealthd(t, nc, js, cfg, healthd.Options{Interval: interval, Timeout: timeout, LeaseTTL: 3 * time.Second})
	waitFor(t, 10*timeout, "stuck's failed probe recorded", func() bool {
		st, _ := status(t, kv, "stuck")
		return st.Failures >= 1 && st.State == messages.HealthUnknown
	})
	st, _ := status(t, kv, "stuck")
	t.Logf("stuck: %+v", st)
	if st.LatencyMS < float64(timeout.Milliseconds())/2 {
		t.Errorf("stuck's probe took %vms, its timeout is %v", st.LatencyMS, timeout)
	}
}

// Two replicas: one probes, both agree on one status, and when the leader stops the
// other takes over and carries on counting from the stored status.
func TestReplicas(t *testing.T) {
	nc, js := natsJS(t)
	kv := healthKV(t, js)
	srv := startMCPHTTP(t, nil)
	gone := closedPort(t)
	cfg := serversConfig(map[string]string{"tickets": srv.URL(), "gone": gone})
	const interval, ttl = 100 * time.Millisecond, 600 * time.Millisecond
	o := healthd.Options{Interval: interval, Timeout: time.Second, Threshold: 3, LeaseTTL: ttl}
	o.ID = "a"
	a, stopA := startHealthd(t, nc, js, cfg, o)
	o.ID = "b"
	b, stopB := startHealthd(t, nc, js, cfg, o)

	waitFor(t, 5*time.Second, "a leader", func() bool { return a.Leading() || b.Leading() })
	leader, follower, stopLeader := a, b, stopA
	if b.Leading() {
		leader, follower, stopLeader = b, a, stopB
	}
	start := srv.lists.Load()
	time.Sleep(10 * interval)
	if a.Leading() == b.Leading() {
		t.Fatalf("leading: a %v, b %v; want exactly one", a.Leading(), b.Leading())
	}
	// One prober: about one probe per interval, not two.
	if n := srv.lists.Load() - start; n > 15 {
		t.Errorf("%d probes in 10 intervals: both replicas probe", n)
	}
	for _, name := range []string{"tickets", "gone", "local"} {
		if st, _ := status(t, kv, name); st.ProbedBy != leader.ID() {
			t.Errorf("%s probed by %q, the leader is %q", name, st.ProbedBy, leader.ID())
		}
	}
	st, _ := status(t, kv, "gone")
	if st.State != messages.HealthDown {
		t.Errorf("gone: %+v", st)
	}

	// The failure count of "gone" grows by one per probe across the change of leader.
	kw, err := kv.Watch(context.Background(), "gone")
	if err != nil {
		t.Fatal(err)
	}
	defer kw.Stop()
	stopLeader()
	took := waitFor(t, 5*ttl, "the follower leads", follower.Leading)
	t.Logf("the follower led %v after the leader stopped", took)
	var seen []int
	var writers []string
	deadline := time.After(10 * interval)
collect:
	for {
		select {
		case e := <-kw.Updates():
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue
			}
			st := decode(t, e.Value())
			seen = append(seen, st.Failures)
			writers = append(writers, st.ProbedBy)
		case <-deadline:
			break collect
		}
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] != seen[i-1]+1 {
			t.Errorf("failures went %v (writers %v): want +1 per probe", seen, writers)
			break
		}
	}
	if len(writers) == 0 || writers[len(writers)-1] != follower.ID() {
		t.Errorf("writers %v; want the new leader %q last", writers, follower.ID())
	}
	if st, _ := status(t, kv, "tickets"); st.State != messages.HealthUp || st.ProbedBy != follower.ID() {
		t.Errorf("tickets after the change of leader: %+v", st)
	}
}

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A leader that loses NATS stops leading once its lease may have expired, and a
// follower takes over once the lease has not been renewed for a whole TTL.
func TestLeaderLosesNATS(t *testing.T) {
	nc, js := natsJS(t)
	const ttl = 600 * time.Millisecond
	o := healthd.Options{Interval: 100 * time.Millisecond, LeaseTTL: ttl, ID: "a"}
	a, _ := startHealthd(t, nc, js, &config.Config{}, o)
	waitFor(t, 5*time.Second, "a leads", a.Leading)

	nc2, err := nats.Connect(nc.ConnectedUrl())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc2.Close)
	js2, _ := jetstream.New(nc2)
	o.ID = "b"
	b, _ := startHealthd(t, nc2, js2, &config.Config{}, o)
	time.Sleep(2 * ttl)
	if b.Leading() {
		t.Fatal("b leads while a renews its lease")
	}

	nc.Close()
	lost := waitFor(t, 3*ttl, "a steps down", func() bool { return !a.Leading() })
	took := waitFor(t, 5*ttl, "b takes over", b.Leading)
	t.Logf("a stepped down %v after losing NATS; b led %v later (TTL %v)", lost, took, ttl)
}

// A server never reached is down within the threshold's probes at a third of the
// interval each — two thirds of an interval after the first (10 s at the default 15 s),
// where it took the threshold's whole intervals (30 s) — and one that answers again is
// probed as often until it is up. The probes' own start times are compared, not a
// clock around the test.
func TestNeverReachedIsDownSoon(t *testing.T) {
	nc, js := natsJS(t)
	kv := healthKV(t, js)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String() + "/mcp"
	l.Close() // nothing listens there
	const interval, threshold = 3 * time.Second, 3
	rec := tracetest.NewSpanRecorder()
	startHealthd(t, nc, js, serversConfig(map[string]string{"gone": dead}), healthd.Options{
		Interval: interval, Threshold: threshold, Timeout: time.Second, LeaseTTL: time.Second,
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)),
	})
	took := waitFor(t, 4*interval, "down", func() bool { st, _ := status(t, kv, "gone"); return st.State == messages.HealthDown })
	var starts []time.Time
	for _, sp := range rec.Ended() {
		if sp.Name() == "probe gone" && sp.Status().Code == codes.Error {
			starts = append(starts, sp.StartTime())
		}
	}
	if len(starts) < threshold {
		t.Fatalf("%d failed probes, want %d", len(starts), threshold)
	}
	if span := starts[threshold-1].Sub(starts[0]); span >= interval {
		t.Errorf("the %d failed probes took %v from first to last, want them a third of the interval (%v) apart", threshold, span, interval/3)
	}
	t.Logf("down %v after the start", took)
}
