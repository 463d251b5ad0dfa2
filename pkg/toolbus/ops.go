package toolbus

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/metric"

	"github.com/toolbus/toolbus/pkg/ops"
	"github.com/toolbus/toolbus/pkg/telemetry"
)

// startOps makes the ops server of o (/healthz, /readyz, /metrics and the micro
// registrations; the caller runs it) and the meter provider whose metrics /metrics
// serves.
func startOps(ctx context.Context, nc *nats.Conn, o *OpsOptions, log *slog.Logger) (*ops.Server, metric.MeterProvider, error) {
	res, err := telemetry.Resource(ctx, cmp.Or(o.Service, "toolbus"))
	if err != nil {
		return nil, nil, err
	}
	mp, metrics, err := telemetry.NewPrometheus(res)
	if err != nil {
		return nil, nil, err
	}
	// /readyz as a metric, for the alert on a stage without a ready replica; registered
	// before the server exists so that the server is the last thing that can fail.
	var srv *ops.Server
	if _, err := mp.Meter(telemetry.Scope).Int64ObservableGauge("toolbus.ready",
		metric.WithDescription("1 while this process is ready (its /readyz answers 200), else 0"),
		metric.WithInt64Callback(func(ctx context.Context, o metric.Int64Observer) error {
			if srv != nil && srv.Ready(ctx).Ready {
				o.Observe(1)
			} else {
				o.Observe(0)
			}
			return nil
		})); err != nil {
		return nil, nil, err
	}
	srv, err = ops.New(nc, &ops.Options{Addr: o.Addr, AnyPortIfTaken: o.AnyPortIfTaken, Metrics: metrics, Logger: log})
	if err != nil {
		return nil, nil, fmt.Errorf("%w on %s: %w", ErrOps, o.Addr, err)
	}
	log.Info("ops: /metrics, /healthz and /readyz", "addr", srv.Addr())
	return srv, mp, nil
}
