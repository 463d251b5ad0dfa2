package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/internal/console"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/config"
)

// consoleFlags are the console's flags, on serve and console.
type consoleFlags struct {
	addr, jaeger *string
	hosts        *hostList
	fs           *flag.FlagSet
	env          Env
}

// hostList is a comma-separated list of host names, given in one flag or several.
type hostList []string

func (h *hostList) String() string { return strings.Join(*h, ",") }

func (h *hostList) Set(v string) error {
	for _, name := range strings.Split(v, ",") {
		if name = strings.TrimSpace(name); name != "" {
			*h = append(*h, name)
		}
	}
	return nil
}

func addConsoleFlags(fs *flag.FlagSet, env Env) consoleFlags {
	hosts := &hostList{}
	hosts.Set(env.getenv("TOOLBUS_CONSOLE_HOSTS"))
	fs.Var(hosts, "console-host", "a further host name the console answers to, \"name\" or \"name:port\" (comma-separated or repeated; TOOLBUS_CONSOLE_HOSTS): "+
		"the name of a proxy in front of it, or of this host when it listens on every interface; any other Host header is refused (DNS rebinding)")
	return consoleFlags{fs: fs, env: env, hosts: hosts,
		addr: fs.String("console-addr", envDefault(env, "console-addr", "127.0.0.1:8090"),
			"address of the web console, loopback unless told otherwise (TOOLBUS_CONSOLE_ADDR; empty turns it off); it requires a token, "+
				"TOOLBUS_CONSOLE_TOKEN's, else a random one printed in its URL"),
		jaeger: fs.String("jaeger-url", envDefault(env, "jaeger-url", ""), "Jaeger UI base URL, for the console's trace links (TOOLBUS_JAEGER_URL)"),
	}
}

// startConsole serves the console on nc at the flags' address and returns its URL and
// what stops it; no address, no console. The console always requires a token:
// TOOLBUS_CONSOLE_TOKEN's, else a random one, which the URL carries (a configured one
// it does not: it would stay in logs).
func (f consoleFlags) start(ctx context.Context, env Env, nc *nats.Conn, cfg *config.Config) (string, func(), error) {
	if *f.addr == "" {
		return "", func() {}, nil
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return "", nil, err
	}
	c, err := client.New(nc)
	if err != nil {
		return "", nil, err
	}
	token, configured := env.getenv("TOOLBUS_CONSOLE_TOKEN"), true
	if token == "" {
		token, configured = console.NewToken(), false
	} else if err := console.ValidToken(token); err != nil {
		return "", nil, fmt.Errorf("console: TOOLBUS_CONSOLE_TOKEN: %w", err)
	}
	ln, err := net.Listen("tcp", *f.addr)
	if err != nil && !f.explicit() {
		// The default address is taken (a second toolbus on the host): a free port.
		host, _, _ := net.SplitHostPort(*f.addr)
		ln, err = net.Listen("tcp", net.JoinHostPort(host, "0"))
	}
	if err != nil {
		return "", nil, fmt.Errorf("console: --console-addr %s: %w", *f.addr, err)
	}
	var tenants []string
	for _, t := range cfg.Topology().Tenants {
		tenants = append(tenants, t.Name)
	}
	addr := ln.Addr().(*net.TCPAddr)
	host, hosts := addr.IP.String(), append([]string{}, *f.hosts...)
	if addr.IP.IsUnspecified() {
		// Every interface: the URL names the host as others reach it, and the console
		// answers to that name besides its addresses.
		if name, err := os.Hostname(); err == nil && name != "" {
			host = name
			hosts = append(hosts, net.JoinHostPort(name, strconv.Itoa(addr.Port)))
		}
	}
	con := &console.Console{NC: nc, JS: js, Client: c, JaegerURL: *f.jaeger, Redact: cfg.Redactor(), Tenants: tenants}
	srv := &http.Server{Handler: con.Handler(token, hosts...), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	u := "http://" + net.JoinHostPort(host, strconv.Itoa(addr.Port)) + "/"
	if configured {
		u += " (its token: TOOLBUS_CONSOLE_TOKEN's value, as ?token=)"
	} else {
		u += "?token=" + url.QueryEscape(token)
	}
	stop := func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}
	return u, stop, nil
}

// explicit reports whether the console's address was asked for (flag or environment).
func (f consoleFlags) explicit() bool {
	set := f.env.getenv("TOOLBUS_CONSOLE_ADDR") != ""
	f.fs.Visit(func(fl *flag.Flag) { set = set || fl.Name == "console-addr" })
	return set
}

func consoleCmd(ctx context.Context, env Env, args []string) error {
	fs := newFlags("console", env)
	cf := addConnectFlags(fs, env)
	con := addConsoleFlags(fs, env)
	cfgPath := fs.String("config", envDefault(env, "config", ""), "configuration file (TOOLBUS_CONFIG): its secrets are hidden in what the console shows")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *con.addr == "" {
		return usageError{errors.New("--console-addr is empty: nothing to serve")}
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	nc, err := cf.connect("toolbus console", cfg, nil)
	if err != nil {
		return err
	}
	defer nc.Close()
	url, stop, err := con.start(ctx, env, nc, cfg)
	if err != nil {
		return err
	}
	defer stop()
	fmt.Fprintf(env.Stderr, "toolbus: console on %s; stop with Ctrl-C\n", url)
	<-ctx.Done()
	return nil
}

// deadCmd lists the dead letters and sends one again.
func deadCmd(ctx context.Context, env Env, args []string) error {
	fs := newFlags("dead", env)
	cf := addConnectFlags(fs, env)
	asJSON := fs.Bool("json", false, "print JSON")
	timeout := fs.Duration("timeout", 2*time.Minute, "how long to wait for a redriven call's output")
	force := fs.Bool("force", false, "redrive a dead letter redriven before: its call runs again, which repeats its side effect if the first redrive ran")
	cfgPath := fs.String("config", envDefault(env, "config", ""), "configuration file (TOOLBUS_CONFIG): its secrets are masked in what is printed")
	// Flags may come before or after the subcommand and its argument.
	positional, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	sub := ""
	if len(positional) > 0 {
		sub, positional = positional[0], positional[1:]
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	nc, err := cf.connect("toolbus dead", cfg, nil)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	c, err := client.New(nc)
	if err != nil {
		return err
	}
	// What a dead letter holds (its reason, its text) is printed masked as the console
	// shows it.
	con := &console.Console{NC: nc, JS: js, Client: c, Redact: cfg.Redactor()}
	switch sub {
	case "", "ls":
		list, err := con.Dead(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(env.Stdout, list)
		}
		tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SEQ\tWHEN\tCONVERSATION\tWHAT\tREASON")
		for _, d := range list {
			reason := d.Reason
			if d.Redriven != "" {
				reason += " (redriven as " + d.Redriven + ")"
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s %s\t%s\n", d.Sequence, d.At.Format(time.DateTime), d.Conversation, d.Kind, d.Tool, reason)
		}
		return tw.Flush()
	case "redrive":
		if len(positional) != 1 {
			return usageError{errors.New("toolbus dead redrive [--force] SEQ")}
		}
		seq, err := strconv.ParseUint(positional[0], 10, 64)
		if err != nil {
			return usageError{fmt.Errorf("SEQ %q: the dead letter's sequence number (toolbus dead ls)", positional[0])}
		}
		rctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		redrive := con.Redrive
		if *force {
			redrive = con.ForceRedrive
		}
		out, err := redrive(rctx, seq)
		if errors.Is(err, console.ErrRedriven) {
			return fmt.Errorf("%w; --force sends it again", err)
		}
		if err != nil {
			return err
		}
		return printOutput(ctx, env, c, "redrive", out, *asJSON, false, false)
	}
	return usageError{fmt.Errorf("toolbus dead: unknown command %q (ls, redrive SEQ)", sub)}
}
