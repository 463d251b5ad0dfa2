package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/toolbus/toolbus/deploy"
	"github.com/toolbus/toolbus/pkg/config"
)

// natsConfCmd prints the NATS server configuration of a deployment: deploy/nats.conf for
// the default tenant alone, one orchestrator user more per tenant.
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
	conf, err := deploy.NATSConf(slices.Compact(tenants))
	if err != nil {
		return fmt.Errorf("nats-conf: %w", err)
	}
	_, err = env.Stdout.Write(conf)
	return err
}
