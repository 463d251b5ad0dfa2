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

// startOps serves /healthz, /readyz, /metrics and the micro registrations until ctx is
// done; it returns the meter provider whose metrics /metrics serves.
func startOps(ctx context.Context, nc *nats.Conn, o *OpsOptions, log *slog.Logger) (*ops.Server, metric.MeterProvider, error) {
	res, err := telemetry.Resource(ctx, cmp.Or(o.Service, "toolbus"))
	if err != nil {
		return nil, nil, err
	}
	mp, metrics, err := telemetry.NewPrometheus(res)
	if err != nil {
		return nil, nil, err
	}
	srv, err := ops.New(nc, &ops.Options{Addr: o.Addr, AnyPortIfTaken: o.AnyPortIfTaken, Metrics: metrics, Logger: log})
	if err != nil {
		return nil, nil, fmt.Errorf("%w on %s: %w", ErrOps, o.Addr, err)
	}
	// /readyz as a metric, for the alert on a stage without a ready replica.
	if _, err := mp.Meter(telemetry.Scope).Int64ObservableGauge("toolbus.ready",
		metric.WithDescription("1 while this process is ready (its /readyz answers 200), else 0"),
		metric.WithInt64Callback(func(ctx context.Context, o metric.Int64Observer) error {
			if srv.Ready(ctx).Ready {
				o.Observe(1)
			} else {
				o.Observe(0)
			}
			return nil
		})); err != nil {
		return nil, nil, err
	}
	go func() {
		if err := srv.Run(ctx); err != nil {
			log.Error("ops server stopped", "err", err)
		}
	}()
	log.Info("ops: /metrics, /healthz and /readyz", "addr", srv.Addr())
	return srv, mp, nil
}
