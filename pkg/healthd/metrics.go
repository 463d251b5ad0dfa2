package healthd

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/toolbus/toolbus/pkg/messages"
)

// Metric names healthd records, only while it leads: one process per cluster reports
// each server, so a sum over processes counts every server once.
const (
	MetricServerUp      = "toolbus.server.up"
	MetricProbeDuration = "toolbus.server.probe.duration"
)

// metrics are healthd's instruments: the probe latency histogram and, at each scrape,
// each server's last state.
type metrics struct {
	probe metric.Float64Histogram
}

// newMetrics creates the instruments on mp (nil: none); up reports each server's
// state at a scrape.
func newMetrics(mp metric.MeterProvider, up func(yield func(server string, state messages.HealthState))) (metrics, error) {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	m := mp.Meter("github.com/toolbus/toolbus/pkg/healthd")
	probe, err := m.Float64Histogram(MetricProbeDuration, metric.WithUnit("s"),
		metric.WithDescription("how long a health probe of a server took (connect, initialize, tools/list), by server and result"),
		metric.WithExplicitBucketBoundaries(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
	if err != nil {
		return metrics{}, err
	}
	_, err = m.Int64ObservableGauge(MetricServerUp,
		metric.WithDescription("1 when the server's last probes say it is up, 0 when down (unknown: not reported), by server"),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			up(func(server string, state messages.HealthState) {
				switch state {
				case messages.HealthUp:
					o.Observe(1, metric.WithAttributes(attribute.String("server", server)))
				case messages.HealthDown:
					o.Observe(0, metric.WithAttributes(attribute.String("server", server)))
				}
			})
			return nil
		}))
	return metrics{probe: probe}, err
}

func (m metrics) probed(ctx context.Context, server string, d time.Duration, failed bool) {
	if m.probe == nil {
		return
	}
	result := "ok"
	if failed {
		result = "error"
	}
	m.probe.Record(ctx, d.Seconds(), metric.WithAttributes(attribute.String("server", server), attribute.String("result", result)))
}
