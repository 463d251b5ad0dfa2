package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/internal/ops"
	"github.com/toolbus/toolbus/internal/telemetry"
	"go.opentelemetry.io/otel/metric"

	"github.com/toolbus/toolbus/internal/bus"
	"github.com/toolbus/toolbus/internal/config"
	"github.com/toolbus/toolbus/internal/node"
	"github.com/toolbus/toolbus/internal/version"
)

// Service runs one toolbus service against an external NATS until ctx is done; it is
// the whole of the per-service binaries (cmd/parser, cmd/executor, ...). Flags:
// --nats (TOOLBUS_NATS_URL), --config (TOOLBUS_CONFIG), --replicas, --stream-replicas.
func Service(ctx context.Context, name string, args []string, env Env) int {
	tuneGC()
	fs := newFlags(name, env)
	fs.Init(name, 0)
	cf := addConnectFlags(fs, env)
	cfgPath := fs.String("config", envDefault(env, "config", ""), "configuration file (TOOLBUS_CONFIG)")
	replicas := fs.Int("replicas", 1, "replicas of the service in this process")
	streamReplicas := fs.Int("stream-replicas", 0, "JetStream replicas of streams and buckets, 3 on a cluster (default: the config's nats.stream_replicas, else 1)")
	verbose := fs.Bool("v", false, "log everything to stderr")
	ops := addOpsFlag(fs, env, defaultOpsAddr(name))
	showVersion := fs.Bool("version", false, "print the version and exit")
	key := tokenKey(env) // TOOLBUS_TOKEN_KEY: the OAuth grants of `toolbus auth login`
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: %s [flags]\n\n%s\n\nflags:\n", name, serviceWhat[name])
		fs.PrintDefaults()
	}
	provision := fs.Bool("provision", false, "create or update the streams, consumers and buckets at start, as `toolbus provision` does (needs a NATS user allowed to); by default only check that they exist and say what is missing")
	if err := parseFlags(fs, args); err != nil {
		return 2
	}
	if *showVersion {
		fmt.Fprintln(env.Stdout, version.String(name))
		return 0
	}
	log := serviceLogger(env, *verbose, true).With("service", name)
	err := func() error {
		cfg, err := config.Load(*cfgPath)
		if err != nil {
			return err
		}
		stopTelemetry, err := startTelemetry(ctx, "toolbus-"+name)
		if err != nil {
			return err
		}
		defer stopTelemetry()
		nc, err := cf.connect("toolbus "+name, cfg, log)
		if err != nil {
			return err
		}
		defer nc.Drain()
		opsSrv, mp, err := startOps(ctx, nc, ops, "toolbus-"+name, log)
		if err != nil {
			return err
		}
		tokenKey, err := key()
		if err != nil {
			return err
		}
		n, err := node.Start(ctx, nc, node.Options{
			Config: cfg, Services: []string{name}, Replicas: *replicas, Logger: log, Ops: opsSrv, MeterProvider: mp,
			Topology: topology(cfg, *streamReplicas), CheckOnly: !*provision, TokenKey: tokenKey,
		})
		if err != nil {
			return err
		}
		return n.Wait()
	}()
	if err != nil && !(ctx.Err() != nil && errors.Is(err, context.Canceled)) { // stopped as asked is no failure
		fmt.Fprintf(env.Stderr, "%s: %v\n", name, err)
		return 1
	}
	return 0
}

// serviceWhat says what each service binary does, for its -h.
var serviceWhat = map[string]string{
	node.Parser:    "toolbus's parser: reads the LLM responses published on toolbus.responses.<conversation>, extracts and repairs their tool calls, and publishes each call (in segments, in the order written) on toolbus.calls.<conversation>.",
	node.Executor:  "toolbus's executor: runs the calls on toolbus.calls.> — local tools, the engineering calculators, MCP servers — with retries, claims and time budgets, and publishes each result on toolbus.results.<conversation>. Scale it by starting more.",
	node.Formatter: "toolbus's formatter: gathers the results of each response, releases the next segment of its calls, and publishes the <tool_result> output on toolbus.output.<conversation>.",
	node.Healthd:   "toolbus's health daemon: probes every configured MCP server and keeps their status in the toolbus_health bucket and on toolbus.health.<server> (one replica probes; the others stand by).",
}

// provisionCmd creates or updates every stream, consumer and bucket, once, for services
// that only check them (their NATS users may not change what they do not own).
func provisionCmd(ctx context.Context, env Env, args []string) error {
	fs := newFlags("provision", env)
	cf := addConnectFlags(fs, env)
	cfgPath := fs.String("config", envDefault(env, "config", ""), "configuration file (TOOLBUS_CONFIG): its nats section shapes the streams")
	streamReplicas := fs.Int("stream-replicas", 0, "JetStream replicas of streams and buckets, 3 on a cluster (default: the config's nats.stream_replicas, else 1)")
	timeout := fs.Duration("timeout", time.Minute, "how long to wait for JetStream")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	nc, err := cf.connect("toolbus provision", cfg, nil)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	topo := topology(cfg, *streamReplicas)
	if err := bus.Provision(ctx, js, topo); err != nil {
		return err
	}
	if err := bus.Check(ctx, js, topo); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "provisioned %d streams, %d consumers, %d key-value buckets and %d object stores\n",
		len(topo.Streams()), len(topo.Consumers()), len(topo.Buckets()), len(topo.ObjectStores()))
	return nil
}

// topology is the configuration's stream shape with the --stream-replicas flag on top.
func topology(cfg *config.Config, replicas int) bus.Topology {
	t := cfg.Topology()
	if replicas > 0 {
		t.Replicas = replicas
	}
	return t
}

// defaultOpsAddr is the default ops address of a service: one port each, so that the
// services start side by side on one host with no flags (a taken default gives way to a
// free port).
func defaultOpsAddr(service string) string {
	switch service {
	case node.Parser:
		return ":8081"
	case node.Executor:
		return ":8082"
	case node.Formatter:
		return ":8083"
	case node.Healthd:
		return ":8084"
	}
	return ":8081"
}

// opsFlag is --ops-addr: the address, and whether it was given rather than defaulted.
type opsFlag struct {
	addr     string
	fromEnv  bool
	fromFlag *bool
}

func (f *opsFlag) explicit() bool { return f.fromEnv || *f.fromFlag }

// addOpsFlag defines --ops-addr on fs with def as its default (TOOLBUS_OPS_ADDR wins).
func addOpsFlag(fs *flag.FlagSet, env Env, def string) *opsFlag {
	f := &opsFlag{addr: envDefault(env, "ops-addr", def), fromFlag: new(bool)}
	f.fromEnv = f.addr != def
	fs.Func("ops-addr", "address of /healthz, /readyz and /metrics (TOOLBUS_OPS_ADDR; empty: none; default "+def+
		", or a free port when that is taken)", func(v string) error {
		f.addr, *f.fromFlag = v, true
		return nil
	})
	return f
}

// startOps serves /healthz, /readyz, /metrics and the micro registrations until ctx is
// done; it returns the meter provider whose metrics /metrics serves, as service.
func startOps(ctx context.Context, nc *nats.Conn, f *opsFlag, service string, log *slog.Logger) (*ops.Server, metric.MeterProvider, error) {
	res, err := telemetry.Resource(ctx, service)
	if err != nil {
		return nil, nil, err
	}
	mp, metrics, err := telemetry.NewPrometheus(res)
	if err != nil {
		return nil, nil, err
	}
	srv, err := ops.New(nc, &ops.Options{Addr: f.addr, AnyPortIfTaken: !f.explicit(), Metrics: metrics, Logger: log})
	if err != nil {
		if f.explicit() {
			return nil, nil, fmt.Errorf("--ops-addr %s (or TOOLBUS_OPS_ADDR): %w", f.addr, err)
		}
		return nil, nil, err
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
