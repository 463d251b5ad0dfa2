// Package healthd publishes the status of every tool server: to the health key-value
// bucket (one key per server) and on toolbus.health.<server>, on an interval.
//
// In-process backends (local tools, engineering) are always up. Remote servers are
// reported with their transport; until they are probed their state is unknown.
package healthd

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/internal/bus"
	"github.com/toolbus/toolbus/internal/config"
	"github.com/toolbus/toolbus/pkg/messages"
)

// Options configures a [Service].
type Options struct {
	// Interval between two rounds. Default: the configuration's, 15s.
	Interval time.Duration
	Now      func() time.Time
	Logger   *slog.Logger
}

// Service is the health daemon.
type Service struct {
	nc   *nats.Conn
	kv   jetstream.KeyValue
	cfg  *config.Config
	opts Options
}

// New returns a health daemon for the servers of cfg.
func New(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, cfg *config.Config, opts *Options) (*Service, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Interval <= 0 {
		o.Interval = cfg.HealthInterval()
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
	return &Service{nc: nc, kv: kv, cfg: cfg, opts: o}, nil
}

// Statuses is one round of statuses: the in-process backends, then each server.
func (s *Service) Statuses() []messages.HealthStatus {
	now := s.opts.Now().UTC()
	out := []messages.HealthStatus{{Server: "local", Transport: "in-process", State: messages.HealthUp, CheckedAt: now}}
	if config.On(s.cfg.Engineering.Enabled) {
		out = append(out, messages.HealthStatus{Server: "engineering", Transport: "in-process", State: messages.HealthUp, CheckedAt: now})
	}
	for _, name := range s.cfg.ServerNames() {
		out = append(out, messages.HealthStatus{
			Server: name, Transport: string(s.cfg.MCPServers[name].Transport()),
			State: messages.HealthUnknown, Error: "not probed yet", CheckedAt: now,
		})
	}
	return out
}

// Run publishes a round at once and then every interval until ctx is done.
func (s *Service) Run(ctx context.Context) error {
	t := time.NewTicker(s.opts.Interval)
	defer t.Stop()
	for {
		s.round(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (s *Service) round(ctx context.Context) {
	for _, st := range s.Statuses() {
		body, _ := json.Marshal(st)
		if _, err := s.kv.Put(ctx, bus.Key(st.Server), body); err != nil {
			s.opts.Logger.Warn("health: store status", "server", st.Server, "err", err)
		}
		if err := s.nc.Publish(messages.HealthSubject(st.Server), body); err != nil {
			s.opts.Logger.Warn("health: publish status", "server", st.Server, "err", err)
		}
	}
}
