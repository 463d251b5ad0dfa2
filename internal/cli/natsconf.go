package cli

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/toolbus/toolbus/deploy"
	"github.com/toolbus/toolbus/pkg/config"
)

// natsConfCmd prints the NATS server configuration of a deployment: deploy/nats.conf for
// the default tenant alone, one orchestrator user more per tenant; with --accounts only
// its accounts and users, for a configuration that includes them (the Helm chart's NATS).
func natsConfCmd(_ context.Context, env Env, args []string) error {
	fs := newFlags("nats-conf", env)
	var tenants []string
	fs.Func("tenant", "a tenant besides the default one (repeat, or comma-separated)", func(v string) error {
		for _, t := range strings.Split(v, ",") {
			if t = strings.TrimSpace(t); t != "" {
				tenants = append(tenants, t)
			}
		}
		return nil
	})
	cfgPath := fs.String("config", envDefault(env, "config", ""), "configuration file (TOOLBUS_CONFIG): its tenants join --tenant")
	accounts := fs.Bool("accounts", false, "only the system account and toolbus's account with its users, to include in a NATS configuration of its own")
	output := fs.String("output", "", "write to this file instead of standard output")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *cfgPath != "" {
		cfg, err := config.Load(*cfgPath)
		if err != nil {
			return err
		}
		for _, t := range cfg.Topology().Tenants {
			tenants = append(tenants, t.Name)
		}
	}
	slices.Sort(tenants)
	generate := deploy.NATSConf
	if *accounts {
		generate = deploy.NATSAccounts
	}
	conf, err := generate(slices.Compact(tenants))
	if err != nil {
		return fmt.Errorf("nats-conf: %w", err)
	}
	if *output != "" {
		return os.WriteFile(*output, conf, 0o644)
	}
	_, err = env.Stdout.Write(conf)
	return err
}
