package telemetry

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
)

// Metrics are toolbus's instruments. The zero of a nil *Metrics records nothing.
type Metrics struct {
	messages     metric.Int64Counter
	stageSeconds metric.Float64Histogram
	redeliveries metric.Int64Counter
	calls        metric.Int64Counter
	callSeconds  metric.Float64Histogram
	retries      metric.Int64Counter
	meter        metric.Meter
	// stageAttrs holds the attribute options of Handled by stage and outcome: built once,
	// as a set is hashed and sorted when it is made.
	stageAttrs optionCache[stageKey, stageOptions]
	// callAttrs does the same for Call, by tool, server and outcome.
	callAttrs optionCache[callKey, callOptions]
}

// optionCache maps keys to prebuilt options, read under a read lock without boxing the
// key (a sync.Map's key is an interface, which allocates per lookup). It holds at most
// limit entries; the rest are built on each use.
type optionCache[K comparable, V any] struct {
	mu sync.RWMutex
	m  map[K]V
}

func (c *optionCache[K, V]) get(k K, limit int, build func() V) V {
	c.mu.RLock()
	v, ok := c.m[k]
	c.mu.RUnlock()
	if ok {
		return v
	}
	v = build()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) < limit {
		if c.m == nil {
			c.m = make(map[K]V)
		}
		c.m[k] = v
	}
	return v
}

// len is how many entries are kept.
func (c *optionCache[K, V]) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m)
}

type stageKey struct{ stage, outcome string }

// stageOptions are the options of Handled's measurements, as slices built once: a
// variadic call with a slice of its own allocates none.
type stageOptions struct {
	withOutcome, stage []metric.AddOption
	stageRecord        []metric.RecordOption
}

// NewMetrics creates the instruments on mp; nil means a no-op provider.
func NewMetrics(mp metric.MeterProvider) *Metrics {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	m := &Metrics{meter: mp.Meter(Scope)}
	secs := metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
	m.messages, _ = m.meter.Int64Counter("toolbus.messages", metric.WithDescription("messages handled by a stage, by outcome (ack, retry, term)"))
	m.stageSeconds, _ = m.meter.Float64Histogram("toolbus.stage.duration", metric.WithUnit("s"), metric.WithDescription("time a stage took to handle one message"), secs)
	m.redeliveries, _ = m.meter.Int64Counter("toolbus.redeliveries", metric.WithDescription("messages a stage received again (delivery > 1)"))
	m.calls, _ = m.meter.Int64Counter("toolbus.calls", metric.WithDescription("tool calls answered, by tool, server and outcome (ok or the error code)"))
	m.callSeconds, _ = m.meter.Float64Histogram("toolbus.call.duration", metric.WithUnit("s"), metric.WithDescription("time from the first attempt of a call to its result"), secs)
	m.retries, _ = m.meter.Int64Counter("toolbus.retries", metric.WithDescription("attempts that failed and were tried again, by tool, server and error code"))
	return m
}

// Handled records one message of stage: its outcome, how long it took, its delivery.
func (m *Metrics) Handled(ctx context.Context, stage, outcome string, d time.Duration, delivery uint64) {
	if m == nil {
		return
	}
	opts := m.stageAttrs.get(stageKey{stage, outcome}, maxCachedStages, func() stageOptions {
		st := attribute.String("stage", stage)
		byStage := metric.WithAttributeSet(attribute.NewSet(st))
		return stageOptions{
			withOutcome: []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(st, attribute.String("outcome", outcome)))},
			stage:       []metric.AddOption{byStage},
			stageRecord: []metric.RecordOption{byStage},
		}
	})
	m.messages.Add(ctx, 1, opts.withOutcome...)
	m.stageSeconds.Record(ctx, d.Seconds(), opts.stageRecord...)
	if delivery > 1 {
		m.redeliveries.Add(ctx, 1, opts.stage...)
	}
}

// Call records one answered call of a conversation of tenant ("" for the default one:
// no tenant label). Tenants are bounded by the configuration: the parser answers no
// other.
func (m *Metrics) Call(ctx context.Context, tool, server, tenant, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	// Tool names come from models: at most maxCachedCalls sets are kept, the rest built
	// each time.
	opts := m.callAttrs.get(callKey{tool, server, tenant, outcome}, maxCachedCalls, func() callOptions {
		toolServer := []attribute.KeyValue{attribute.String("tool", tool), attribute.String("server", server)}
		if tenant != "" {
			toolServer = append(toolServer, attribute.String("tenant", tenant))
		}
		return callOptions{
			withOutcome: []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(append(toolServer, attribute.String("outcome", outcome))...))},
			toolServer:  []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(toolServer...))},
		}
	})
	m.calls.Add(ctx, 1, opts.withOutcome...)
	m.callSeconds.Record(ctx, d.Seconds(), opts.toolServer...)
}

const (
	maxCachedCalls  = 4096
	maxCachedStages = 256 // stages × outcomes: a handful in practice
)

type callKey struct{ tool, server, tenant, outcome string }

type callOptions struct {
	withOutcome []metric.AddOption
	toolServer  []metric.RecordOption
}

// Retry records one failed attempt that is tried again.
func (m *Metrics) Retry(ctx context.Context, tool, server, code string) {
	if m == nil {
		return
	}
	m.retries.Add(ctx, 1, metric.WithAttributes(attribute.String("tool", tool), attribute.String("server", server), attribute.String("code", code)))
}

// Gauge registers an observable gauge whose values observe reports at each scrape.
func (m *Metrics) Gauge(name, desc string, observe func(ctx context.Context, record func(v int64, attrs ...attribute.KeyValue))) error {
	if m == nil {
		return nil
	}
	_, err := m.meter.Int64ObservableGauge(name, metric.WithDescription(desc),
		metric.WithInt64Callback(func(ctx context.Context, o metric.Int64Observer) error {
			observe(ctx, func(v int64, attrs ...attribute.KeyValue) { o.Observe(v, metric.WithAttributes(attrs...)) })
			return nil
		}))
	return err
}

// NewPrometheus returns a meter provider whose metrics are served, in Prometheus's text
// format, by the returned handler (mounted at /metrics by pkg/ops), with the Go
// runtime's (go_*) and the process's (process_*) metrics beside them. res (nil: the
// SDK's default) becomes target_info.
func NewPrometheus(res *resource.Resource) (metric.MeterProvider, http.Handler, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, nil, err
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, nil, err
	}
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, nil, err
	}
	opts := []sdkmetric.Option{sdkmetric.WithReader(exp)}
	if res != nil {
		opts = append(opts, sdkmetric.WithResource(res))
	}
	return sdkmetric.NewMeterProvider(opts...), promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), nil
}
