package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/internal/config"
	"github.com/toolbus/toolbus/internal/node"
	"github.com/toolbus/toolbus/pkg/engineering"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolcall"
)

func splitComma(s string) []string {
	parts := strings.Split(s, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

func toolsCmd(ctx context.Context, env Env, args []string) error {
	fs := newFlags("tools", env)
	cfgPath := fs.String("config", envDefault(env, "config", ""), "configuration file")
	asJSON := fs.Bool("json", false, "print the tools as JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	pool, err := node.NewPool(cfg, nil, nil)
	if err != nil {
		return err
	}
	defer pool.Close()
	exec, err := node.NewExecutor(cfg, nil, engineering.NewMemorySessions(), pool)
	if err != nil {
		return err
	}
	tools := exec.Router.Tools()
	if *asJSON {
		return writeJSON(env.Stdout, tools)
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tDESCRIPTION")
	for _, t := range tools {
		desc, _, _ := strings.Cut(t.Description, "\n")
		fmt.Fprintf(tw, "%s\t%s\n", t.Name, desc)
	}
	return tw.Flush()
}

func healthCmd(ctx context.Context, env Env, args []string) error {
	fs := newFlags("health", env)
	cf := addConnectFlags(fs, env)
	asJSON := fs.Bool("json", false, "print the statuses as JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	nc, err := cf.connect("toolbus health", nil, false)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, messages.BucketHealth)
	if err != nil {
		return fmt.Errorf("health bucket: %w (is toolbus running?)", err)
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		return err
	}
	var statuses []messages.HealthStatus
	for k := range keys.Keys() {
		e, err := kv.Get(ctx, k)
		if err != nil {
			continue
		}
		var st messages.HealthStatus
		if json.Unmarshal(e.Value(), &st) == nil {
			statuses = append(statuses, st)
		}
	}
	if *asJSON {
		return writeJSON(env.Stdout, statuses)
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tTRANSPORT\tSTATE\tLATENCY\tTOOLS\tCHECKED\tERROR")
	for _, s := range statuses {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1fms\t%d\t%s\t%s\n", s.Server, s.Transport, s.State, s.LatencyMS, s.Tools, s.CheckedAt.Format(time.RFC3339), s.Error)
	}
	return tw.Flush()
}

func parseCmd(ctx context.Context, env Env, args []string) error {
	fs := newFlags("parse", env)
	known := fs.String("known-tools", "", "comma-separated tool names, for formats that need them")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	inputs, err := readInputs(env, fs.Args())
	if err != nil {
		return err
	}
	opts := &toolcall.Options{KnownTools: splitList(*known)}
	for _, in := range inputs {
		if err := writeJSON(env.Stdout, toolcall.Extract(in.text, opts)); err != nil {
			return err
		}
	}
	return nil
}

func repairCmd(ctx context.Context, env Env, args []string) error {
	fs := newFlags("repair", env)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	b, err := io.ReadAll(env.Stdin)
	if err != nil {
		return err
	}
	out, repairs, err := toolcall.RepairJSON(string(b))
	if err != nil {
		return err
	}
	if len(repairs) > 0 {
		fmt.Fprintf(env.Stderr, "repairs: %s\n", strings.Join(repairs, ", "))
	}
	_, err = fmt.Fprintf(env.Stdout, "%s\n", out)
	return err
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
