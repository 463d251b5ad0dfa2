// Package cli implements the toolbus command: run, serve, send, tools, health, parse and
// repair. [Main] takes its arguments and streams, so every command is testable in process.
package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/toolbus/toolbus/pkg/redact"
	"github.com/toolbus/toolbus/pkg/telemetry"
	"github.com/toolbus/toolbus/pkg/version"
)

// Env is what a command reads and writes.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Getenv reads the environment; nil means os.Getenv.
	Getenv func(string) string
}

func (e Env) getenv(k string) string {
	if e.Getenv != nil {
		return e.Getenv(k)
	}
	return os.Getenv(k)
}

type command struct {
	name, usage string
	run         func(ctx context.Context, env Env, args []string) error
}

func commands() []command {
	return []command{
		{"run", "answer the responses in FILEs (or stdin) on an embedded NATS, then exit", runCmd},
		{"serve", "run every service until stopped, on an embedded NATS or --nats URL", serveCmd},
		{"send", "submit one response to a running toolbus and print its output", sendCmd},
		{"tools", "list the tools a model can call", toolsCmd},
		{"health", "print the status of every tool server", healthCmd},
		{"parse", "print the tool calls found in a response (stdin or FILE)", parseCmd},
		{"repair", "repair the JSON on stdin and print it", repairCmd},
		{"bench", "measure throughput and latency against the bus ceiling", benchCmd},
		{"version", "print the version, commit and Go version of this build", versionCmd},
		{"auth", "log toolbus in to http servers that require OAuth: auth login|status|logout", authCmd},
		{"provision", "create or update toolbus's streams, consumers and buckets on a NATS server (administrator credentials)", provisionCmd},
		{"nats-conf", "print the NATS server configuration of a deployment: users, their rights, one per tenant (--tenant or --config)", natsConfCmd},
		{"mcp", "serve toolbus as an MCP server to an MCP client: on stdio (launched by a desktop client), or --http ADDR", mcpCmd},
		{"console", "serve the web console of a running toolbus: flow, servers, tools, calls, dead letters, try it", consoleCmd},
		{"dead", "list the dead letters, or send one again: dead ls | dead redrive SEQ", deadCmd},
		{"approvals", "list the calls that wait for a person's approval (policy rules with effect approve)", approvalsCmd},
		{"approve", "approve a waiting call: it runs once", approveCmd},
		{"deny", "deny a waiting call: it is answered not_allowed with --reason", denyCmd},
	}
}

func versionCmd(_ context.Context, env Env, args []string) error {
	fs := newFlags("version", env)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	_, err := fmt.Fprintln(env.Stdout, version.String("toolbus"))
	return err
}

// Main runs the toolbus command with args (without the program name) and returns the
// exit code.
func Main(ctx context.Context, args []string, env Env) int {
	tuneGC()
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-version") {
		args = []string{"version"}
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(env.Stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, env, args[1:])
		switch {
		case err == nil:
			return 0
		case err == flag.ErrHelp:
			return 0
		case isUsage(err):
			fmt.Fprintf(env.Stderr, "toolbus %s: %s\n", c.name, redactURLs(err.Error()))
			return 2
		default: // an error may quote a URL, and with it a password or a token
			fmt.Fprintf(env.Stderr, "toolbus %s: %s\n", c.name, redactURLs(err.Error()))
			return 1
		}
	}
	fmt.Fprintf(env.Stderr, "toolbus: unknown command %q\n", args[0])
	usage(env.Stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: toolbus <command> [flags] [args]")
	fmt.Fprintln(w)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-7s %s\n", c.name, c.usage)
	}
	fmt.Fprintln(w, "\nRun 'toolbus <command> -h' for a command's flags.")
}

type usageError struct{ error }

func isUsage(err error) bool { _, ok := err.(usageError); return ok }

func newFlags(name string, env Env) *flag.FlagSet {
	fs := flag.NewFlagSet("toolbus "+name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.Usage = func() {
		what := ""
		for _, c := range commands() {
			if c.name == name {
				what = c.usage
			}
		}
		if w, ok := subcommandWhat[name]; ok {
			what = w
		}
		fmt.Fprintf(fs.Output(), "usage: toolbus %s [flags]%s\n\n%s\n\nflags:\n", name, commandArgs[name], what)
		fs.PrintDefaults()
	}
	return fs
}

// commandArgs are what a command takes besides its flags.
var commandArgs = map[string]string{
	"run":         " [FILE...]   (each FILE one LLM response; stdin when none)",
	"send":        " [--stream [--rate N]] [FILE...]   (each FILE one LLM response; stdin when none)",
	"parse":       " [FILE]      (an LLM response; stdin when none)",
	"repair":      "             (the JSON on stdin)",
	"dead":        " ls | redrive SEQ",
	"approvals":   " [ls] [--all]",
	"approve":     " ID         (from toolbus approvals ls)",
	"deny":        " [--reason TEXT] ID",
	"auth login":  " SERVER",
	"auth logout": " SERVER",
}

// subcommandWhat says what each subcommand does, for its -h.
var subcommandWhat = map[string]string{
	"auth login":  "Authorize toolbus with an http server that requires OAuth: open the printed URL (or have --open do it), log in, and the browser comes back to a local port — or paste the URL it ended on. The grant is kept in the toolbus_auth bucket, sealed with TOOLBUS_TOKEN_KEY, for every executor.",
	"auth status": "Print what each server's grant holds (expiry, refresh, scopes, client), never its tokens.",
	"auth logout": "Forget the server's grant.",
}

func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return err
		}
		return usageError{err}
	}
	// A command line is readable by every user of the machine (ps, /proc/<pid>/cmdline).
	fs.Visit(func(f *flag.Flag) {
		if f.Name != "nats" {
			return
		}
		for _, u := range strings.Split(f.Value.String(), ",") {
			if len(redact.URLSecrets(strings.TrimSpace(u))) > 0 {
				fmt.Fprintln(fs.Output(), "toolbus: warning: --nats holds a password, which every user of this machine can read in the process list; set TOOLBUS_NATS_URL instead")
				return
			}
		}
	})
	return nil
}

// logger writes logs to stderr, with trace and span ids: text for people, JSON for
// services; warnings by default (a command's output is on stdout), everything with
// verbose.
func logger(env Env, verbose, asJSON bool) *slog.Logger {
	return newLogger(env, verbose, asJSON, slog.LevelWarn)
}

// serviceLogger is the logger of a service: from info by default — readiness, one line
// per call, every NATS connection event.
func serviceLogger(env Env, verbose, asJSON bool) *slog.Logger {
	return newLogger(env, verbose, asJSON, slog.LevelInfo)
}

func newLogger(env Env, verbose, asJSON bool, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if verbose {
		opts.Level = slog.LevelDebug
	}
	var h slog.Handler = slog.NewTextHandler(env.Stderr, opts)
	if asJSON {
		h = slog.NewJSONHandler(env.Stderr, opts)
	}
	return slog.New(telemetry.LogHandler{Handler: h})
}

// startTelemetry sets tracing up from OTEL_* and returns its shutdown, bounded in time.
// OpenTelemetry's own errors (an exporter that cannot reach its collector) are written
// by log (nil: the default logger), as every other line is.
func startTelemetry(ctx context.Context, service string, log *slog.Logger) (func(), error) {
	telemetry.LogErrors(log)
	shutdown, err := telemetry.Setup(ctx, service)
	if err != nil {
		return nil, err
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = shutdown(ctx)
	}, nil
}

// envDefault returns the value of the TOOLBUS_ variable for a flag, or def.
func envDefault(env Env, name, def string) string {
	if v := env.getenv("TOOLBUS_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))); v != "" {
		return v
	}
	return def
}
