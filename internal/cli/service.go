package cli

import (
	"context"
	"fmt"

	"github.com/toolbus/toolbus/internal/bus"
	"github.com/toolbus/toolbus/internal/config"
	"github.com/toolbus/toolbus/internal/node"
)

// Service runs one toolbus service against an external NATS until ctx is done; it is
// the whole of the per-service binaries (cmd/parser, cmd/executor, ...). Flags:
// --nats (TOOLBUS_NATS_URL), --config (TOOLBUS_CONFIG), --replicas, --stream-replicas.
func Service(ctx context.Context, name string, args []string, env Env) int {
	fs := newFlags(name, env)
	fs.Init(name, 0)
	cf := addConnectFlags(fs, env)
	cfgPath := fs.String("config", envDefault(env, "config", ""), "configuration file (TOOLBUS_CONFIG)")
	replicas := fs.Int("replicas", 1, "replicas of the service in this process")
	streamReplicas := fs.Int("stream-replicas", 0, "JetStream replicas of streams and buckets, 3 on a cluster (default: the config's nats.stream_replicas, else 1)")
	verbose := fs.Bool("v", false, "log everything to stderr")
	if err := parseFlags(fs, args); err != nil {
		return 2
	}
	log := logger(env, *verbose, true).With("service", name)
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
		nc, err := cf.connect("toolbus "+name, cfg, true)
		if err != nil {
			return err
		}
		defer nc.Drain()
		n, err := node.Start(ctx, nc, node.Options{
			Config: cfg, Services: []string{name}, Replicas: *replicas, Logger: log,
			Topology: topology(cfg, *streamReplicas),
		})
		if err != nil {
			return err
		}
		return n.Wait()
	}()
	if err != nil {
		fmt.Fprintf(env.Stderr, "%s: %v\n", name, err)
		return 1
	}
	return 0
}

// topology is the configuration's stream shape with the --stream-replicas flag on top.
func topology(cfg *config.Config, replicas int) bus.Topology {
	t := cfg.Topology()
	if replicas > 0 {
		t.Replicas = replicas
	}
	return t
}
