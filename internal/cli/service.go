package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/toolbus"
	"github.com/toolbus/toolbus/pkg/version"
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
		stopTelemetry, err := startTelemetry(ctx, "toolbus-"+name, log)
		if err != nil {
			return err
		}
		defer stopTelemetry()
		tokenKey, err := key()
		if err != nil {
			return err
		}
		tb, err := toolbus.Start(ctx, toolbus.Options{
			Config: cfg, Services: []string{name}, Replicas: *replicas, Logger: log, Ops: ops.options("toolbus-" + name),
			Topology: topology(cfg, *streamReplicas), Provision: *provision, TokenKey: tokenKey, Harden: true,
			NATSURL: cf.URL(cfg), NATSOptions: cf.options("toolbus "+name, cf.URL(cfg), log),
		})
		if err != nil {
			return ops.explain(err)
		}
		defer tb.Close()
		stopReload := reloadOnHangup(tb)
		defer stopReload()
		return tb.Wait()
	}()
	if err != nil && !(ctx.Err() != nil && errors.Is(err, context.Canceled)) { // stopped as asked is no failure
		fmt.Fprintf(env.Stderr, "%s: %v\n", name, err)
		return 1
	}
	return 0
}

// serviceWhat says what each service binary does, for its -h.
var serviceWhat = map[string]string{
	toolbus.Parser:    "toolbus's parser: reads the LLM responses published on toolbus.responses.<conversation>, extracts and repairs their tool calls, and publishes each call (in segments, in the order written) on toolbus.calls.<conversation>.",
	toolbus.Executor:  "toolbus's executor: runs the calls on toolbus.calls.> — local tools, the engineering calculators, MCP servers — with retries, claims and time budgets, and publishes each result on toolbus.results.<conversation>. Scale it by starting more.",
	toolbus.Formatter: "toolbus's formatter: gathers the results of each response, releases the next segment of its calls, and publishes the <tool_result> output on toolbus.output.<conversation>.",
	toolbus.Healthd:   "toolbus's health daemon: probes every configured MCP server and keeps their status in the toolbus_health bucket and on toolbus.health.<server> (one replica probes; the others stand by).",
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
	case toolbus.Parser:
		return ":8081"
	case toolbus.Executor:
		return ":8082"
	case toolbus.Formatter:
		return ":8083"
	case toolbus.Healthd:
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

// options are the ops endpoints of the flag, for the process named service.
func (f *opsFlag) options(service string) *toolbus.OpsOptions {
	return &toolbus.OpsOptions{Addr: f.addr, AnyPortIfTaken: !f.explicit(), Service: service}
}

// explain names the flag in an error of the ops endpoints it asked for.
func (f *opsFlag) explain(err error) error {
	if f.explicit() && errors.Is(err, toolbus.ErrOps) {
		return fmt.Errorf("--ops-addr %s (or TOOLBUS_OPS_ADDR): %w", f.addr, err)
	}
	return err
}

// reloadOnHangup makes SIGHUP reload the configuration of tb's services until the
// returned function is called.
func reloadOnHangup(tb *toolbus.Toolbus) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-hup:
				tb.Reload()
			case <-done:
				return
			}
		}
	}()
	return func() { signal.Stop(hup); close(done) }
}
