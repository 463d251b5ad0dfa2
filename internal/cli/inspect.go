package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/toolbus/toolbus/pkg/dialect"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/catalog"
	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/engineering"
	"github.com/toolbus/toolbus/pkg/executor"
	"github.com/toolbus/toolbus/pkg/healthd"
	"github.com/toolbus/toolbus/pkg/mcpwire"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolbus"
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
	format := fs.String("format", "", "print the tools as the function declarations of a vendor's API: "+dialectNames()+" (default: a table)")
	strict := fs.Bool("strict", false, "with --format openai: functions in OpenAI's strict mode (closed objects, every property required, optional ones nullable); one whose schema strict mode cannot express stays non-strict and is named on stderr")
	wait := fs.Duration("wait", 20*time.Second, "how long to wait for the MCP servers to answer")
	tenant := fs.String("tenant", "", "the tenant whose models are offered the tools: those the policy denies outright there are left out (default: the default tenant)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *tenant != "" {
		if err := messages.ValidateTenant(*tenant); err != nil {
			return usageError{fmt.Errorf("--tenant: %w", err)}
		}
	}
	want := dialect.Dialect(*format)
	if *format != "" && !slices.Contains(dialect.Dialects(), want) {
		return usageError{fmt.Errorf("--format %q: want one of %s", *format, dialectNames())}
	}
	if *strict && want != dialect.OpenAI {
		return usageError{fmt.Errorf("--strict: only with --format openai")}
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	pool, exec, err := startTools(ctx, env, "tools", cfg, *wait)
	if err != nil {
		return err
	}
	defer pool.Close()
	tools := exec.Offered(ctx, *tenant)
	if want != "" {
		decls, err := dialect.DeclarationsWith(want, declared(ctx, pool, tools), &dialect.Options{Strict: *strict})
		if err != nil {
			return err
		}
		if limit := dialect.MaxTools(want); limit > 0 && len(tools) > limit {
			// An export the vendor would refuse is not printed: it is valid, or an error.
			return fmt.Errorf("%d tools, more than %s accepts in one request (%d): narrow them with allowedTools or blockedTools (or a policy that denies some outright, with --tenant), expose the engineering suite hierarchically (engineering.expose), or turn off a server's resource and prompt tools (\"resources\": false, \"prompts\": false)",
				len(tools), want, limit)
		}
		if len(decls.Shortened) > 0 {
			fmt.Fprintf(env.Stderr, "toolbus tools: descriptions shortened to %s's limit of %d characters: %s\n", want, dialect.MaxOpenAIDescription, strings.Join(decls.Shortened, ", "))
		}
		for _, n := range decls.NotStrict {
			fmt.Fprintf(env.Stderr, "toolbus tools: not strict: %s\n", n)
		}
		return writeJSON(env.Stdout, decls.Tools)
	}
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

// startTools starts the backends of a configuration as its executor would, without NATS:
// its MCP servers (all at once, waited for up to wait; one that does not answer is
// reported and left out), its tools folder and the engineering suite. The caller closes
// the pool.
func startTools(ctx context.Context, env Env, cmd string, cfg *config.Config, wait time.Duration) (*mcpwire.Pool, *executor.Executor, error) {
	pool, err := toolbus.NewPool(cfg, mcpwire.Options{})
	if err != nil {
		return nil, nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, wait)
	err = pool.Connect(cctx)
	cancel()
	if err != nil { // a server's error may quote its URL, and with it a token
		fmt.Fprintf(env.Stderr, "toolbus %s: some MCP servers are left out: %s\n", cmd, cfg.Redactor().String(err.Error()))
	}
	exec, err := toolbus.NewExecutor(cfg, nil, engineering.NewMemorySessions(), pool)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return pool, exec, nil
}

func dialectNames() string {
	var names []string
	for _, d := range dialect.Dialects() {
		names = append(names, string(d))
	}
	return strings.Join(names, ", ")
}

// declared is the catalog a model sees (the router's visible tools, in its order) as
// catalog tools: those of MCP servers with everything their server said about them
// (title, destructiveHint), the others from their description.
func declared(ctx context.Context, pool *mcpwire.Pool, tools []messages.ToolInfo) []catalog.Tool {
	ctx, cancel := context.WithTimeout(ctx, time.Second) // the servers answered (or not) already
	defer cancel()
	remote := map[string]catalog.Tool{}
	for _, t := range pool.Tools(ctx) {
		remote[t.Name] = t
	}
	out := make([]catalog.Tool, 0, len(tools))
	for _, t := range tools {
		if rt, ok := remote[t.Name]; ok {
			out = append(out, rt)
			continue
		}
		out = append(out, catalog.Tool{
			Name: t.Name, Description: t.Description, InputSchema: t.InputSchema, OutputSchema: t.OutputSchema,
			ReadOnly: t.ReadOnly, Idempotent: t.Idempotent || t.ReadOnly, Destructive: !t.ReadOnly && !t.Idempotent,
		})
	}
	return out
}

func healthCmd(ctx context.Context, env Env, args []string) error {
	fs := newFlags("health", env)
	cf := addConnectFlags(fs, env)
	cfgPath := fs.String("config", envDefault(env, "config", ""), "configuration file (TOOLBUS_CONFIG): show its servers only, those without a status as unknown; what --probe probes")
	asJSON := fs.Bool("json", false, "print the statuses as a JSON array")
	probe := fs.Bool("probe", false, "probe the servers of --config now, directly, instead of reading healthd's statuses from NATS; exit 1 unless every one is up (a script can wait for its servers with it)")
	timeout := fs.Duration("timeout", healthd.DefaultTimeout, "time limit of each probe, with --probe")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var cfg *config.Config
	if *cfgPath != "" || *probe {
		var err error
		if cfg, err = config.Load(*cfgPath); err != nil {
			return err
		}
	}
	var statuses []messages.HealthStatus
	if *probe {
		statuses = healthd.ProbeAll(ctx, healthd.Targets(cfg, &healthd.TargetOptions{RequestTimeout: *timeout}), *timeout)
	} else {
		var err error
		if statuses, err = storedHealth(ctx, cf, cfg); err != nil {
			return err
		}
	}
	// A status's error may quote the server's URL or its messages: each is masked with
	// the server's secrets, as healthd stores it.
	secrets := cfg.Redactor()
	for i := range statuses {
		mask := secrets.For(statuses[i].Server)
		statuses[i].Error = mask.String(statuses[i].Error)
		for k := range statuses[i].History {
			statuses[i].History[k].Error = mask.String(statuses[i].History[k].Error)
		}
	}
	var down []string
	for _, st := range statuses {
		if st.State != messages.HealthUp {
			down = append(down, st.Server)
		}
	}
	// A probe says by its exit status whether every server answered.
	notUp := func(err error) error {
		if err == nil && *probe && len(down) > 0 {
			return fmt.Errorf("not up: %s", strings.Join(down, ", "))
		}
		return err
	}
	if *asJSON {
		if statuses == nil {
			statuses = []messages.HealthStatus{}
		}
		return notUp(writeJSON(env.Stdout, statuses))
	}
	now := time.Now()
	ago := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return now.Sub(t).Round(time.Second).String() + " ago"
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tTRANSPORT\tSTATE\tLATENCY\tTOOLS\tPROTOCOL\tCHECKED\tCHANGED\tERROR")
	for _, s := range statuses {
		latency, protocol, state := "-", s.Protocol, string(s.State)
		if s.LatencyMS > 0 {
			latency = fmt.Sprintf("%.1fms", s.LatencyMS)
		}
		if protocol == "" {
			protocol = "-"
		}
		if s.Failures > 0 {
			state += fmt.Sprintf(" (%d failed)", s.Failures)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", s.Server, s.Transport, state, latency, s.Tools, protocol,
			ago(s.CheckedAt), ago(s.ChangedAt), s.Error)
	}
	return notUp(tw.Flush())
}

// storedHealth reads healthd's statuses from the health bucket. With a configuration,
// it keeps the configured servers only, in its order, and reports those that have no
// status yet as unknown.
func storedHealth(ctx context.Context, cf connectFlags, cfg *config.Config) ([]messages.HealthStatus, error) {
	nc, err := cf.connect("toolbus health", cfg, nil)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, messages.BucketHealth)
	if err != nil {
		var denied *bus.AccessError
		if err = bus.Explain(nc, err); errors.As(err, &denied) {
			return nil, fmt.Errorf("health bucket: %w", err) // a right, not a stopped toolbus
		}
		return nil, fmt.Errorf("health bucket: %w (is toolbus running?)", err)
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		return nil, err
	}
	byName := map[string]messages.HealthStatus{}
	for k := range keys.Keys() {
		if k == messages.HealthLeaderKey {
			continue
		}
		e, err := kv.Get(ctx, k)
		if err != nil {
			continue
		}
		var st messages.HealthStatus
		if json.Unmarshal(e.Value(), &st) == nil && st.Server != "" {
			byName[st.Server] = st
		}
	}
	var out []messages.HealthStatus
	if cfg != nil {
		for _, t := range healthd.Targets(cfg, nil) {
			st, ok := byName[t.Name]
			if !ok {
				st = messages.HealthStatus{Server: t.Name, Transport: t.Transport, State: messages.HealthUnknown, Error: "no status yet: is healthd running?"}
			}
			out = append(out, st)
		}
		return out, nil
	}
	for _, st := range byName {
		out = append(out, st)
	}
	// The in-process backends first, then the servers by name.
	slices.SortFunc(out, func(a, b messages.HealthStatus) int {
		if ai, bi := a.Transport == "in-process", b.Transport == "in-process"; ai != bi {
			if ai {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Server, b.Server)
	})
	return out, nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
