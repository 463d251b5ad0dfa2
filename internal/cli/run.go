package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/redact"
	"github.com/toolbus/toolbus/pkg/telemetry"
	"github.com/toolbus/toolbus/pkg/tokens"
	"github.com/toolbus/toolbus/pkg/toolbus"
	"github.com/toolbus/toolbus/pkg/toolcall"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

func runCmd(ctx context.Context, env Env, args []string) error {
	fs := newFlags("run", env)
	cfgPath := fs.String("config", envDefault(env, "config", ""), "configuration file (mcpServers and toolbus sections)")
	conv := fs.String("conversation", "cli", "conversation id shared by all the responses")
	asJSON := fs.Bool("json", false, "print one JSON object per response")
	full := fs.Bool("full-results", false, fullResultsUsage)
	timeout := fs.Duration("timeout", 2*time.Minute, "how long to wait for each response's output")
	executors := fs.Int("executors", 2, "executor replicas in the process")
	verbose := fs.Bool("v", false, "log everything to stderr")
	wait := fs.Duration("wait", 20*time.Second, "how long the first response waits for the MCP servers to list their tools")
	open := fs.String("open", "", "command run with the authorization URL of a server that requires an OAuth login, as its last argument (e.g. xdg-open); the URL is printed either way")
	formats := addFormatFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(env.Stderr, "usage: toolbus run [flags] [FILE...]\n\nEach FILE (or stdin) is one LLM response; they are answered in order in one conversation.")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := messages.ValidateConversation(*conv); err != nil {
		return usageError{err}
	}
	if err := formats.check(); err != nil {
		return err
	}
	inputs, err := readInputs(env, fs.Args())
	if err != nil {
		return err
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	if !cfg.Topology().Serves(*conv) {
		return usageError{fmt.Errorf("--conversation %s: the configuration names no tenant %q (tenants)", *conv, messages.Tenant(*conv))}
	}
	log := logger(env, *verbose, false)
	stopTelemetry, err := startTelemetry(ctx, "toolbus", log)
	if err != nil {
		return err
	}
	defer stopTelemetry()

	// An http server that requires OAuth is logged in to here, attended: the URL is
	// printed, the redirect comes back to a local port. The grant is kept in the
	// embedded bucket, which ends with the run: sealed with the environment's key, or a
	// key of the run's own.
	key, err := tokenKey(env)()
	if err != nil {
		return err
	}
	if key == nil {
		key = tokens.NewKey()
	}
	ui := &loginUI{env: env, open: *open}
	defer ui.close()

	tb, err := toolbus.Start(ctx, toolbus.Options{Config: cfg, Replicas: *executors, Logger: log, TokenKey: key, Login: ui.login, Harden: true})
	if err != nil {
		return err
	}
	defer tb.Close()
	c := tb.Client()
	// The parser recognises calls without a marker (bare JSON, a pythonic list after a
	// sentence) only by the names of the catalog's tools: the first response waits
	// until every backend has listed its tools, or until --wait.
	wctx, cancel := context.WithTimeout(ctx, *wait)
	var missing *toolbus.MissingToolsError
	if err := tb.WaitForTools(wctx); errors.As(err, &missing) && ctx.Err() == nil {
		fmt.Fprintf(env.Stderr, "toolbus run: %s did not list their tools within %s; calls of them without a marker are not recognised\n", strings.Join(missing.Backends, ", "), *wait)
	}
	cancel()
	for _, in := range inputs {
		actx, cancel := context.WithTimeout(ctx, *timeout)
		out, err := c.Ask(actx, *conv, in.text, formats.options(""))
		cancel()
		if err != nil {
			return fmt.Errorf("%s: %w", in.name, err)
		}
		if err := printOutput(ctx, env, c, in.name, out, *asJSON, *full, formats.native()); err != nil {
			return err
		}
	}
	return nil
}

type input struct{ name, text string }

func readInputs(env Env, files []string) ([]input, error) {
	if len(files) == 0 {
		b, err := io.ReadAll(env.Stdin)
		if err != nil {
			return nil, fmt.Errorf("stdin: %w", err)
		}
		return []input{{"stdin", string(b)}}, nil
	}
	var out []input
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		out = append(out, input{f, string(b)})
	}
	return out, nil
}

// fullResultsUsage is the --full-results flag's help, for run and send.
const fullResultsUsage = "fetch the whole of each result too large to travel inline (kept in the " + messages.BucketResults + " object store) and print it in place of its preview"

// printOutput prints an output as the model should see it, or as one JSON line. With
// full, every stored result is fetched whole (and checked) and printed in place of its
// preview.
// With native (--output-format), the native next turn is printed instead of the text
// (it is in the JSON line too).
func printOutput(ctx context.Context, env Env, c *client.Client, name string, out *messages.Output, asJSON, full, native bool) error {
	if full {
		stored := false
		for _, r := range out.Results {
			stored = stored || r.Stored != nil
		}
		if stored {
			if err := c.FullResults(ctx, out); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			rs := make([]messages.ToolResult, len(out.Results))
			for i, r := range out.Results {
				rs[i] = messages.ToolResult{Index: i, Tool: r.Tool, Success: r.Success, Result: r.Result, Error: r.Error, Attempts: r.Attempts}
			}
			out.Text = messages.RenderOutput(out.ResponseID, out.Conversation, rs).Text
		}
	}
	if asJSON {
		b, err := json.Marshal(out)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(env.Stdout, "%s\n", b)
		return err
	}
	if out.Kind == messages.KindNoToolCall {
		fmt.Fprintf(env.Stderr, "toolbus: %s: no tool call\n", name)
		return nil
	}
	if native && len(out.Native) > 0 {
		var b bytes.Buffer
		if err := json.Indent(&b, out.Native, "", "  "); err != nil {
			return err
		}
		_, err := fmt.Fprintln(env.Stdout, b.String())
		return err
	}
	_, err := fmt.Fprintln(env.Stdout, out.Text)
	return err
}

// formatFlags are --format and --output-format, of run and send.
type formatFlags struct{ format, output *string }

func addFormatFlags(fs *flag.FlagSet) formatFlags {
	return formatFlags{
		format: fs.String("format", "", "the responses' format: a tool-call syntax ("+formatNames()+"), or a hosted API whose response, message or stream events they are (default: the parser's configuration, auto-detected)"),
		output: fs.String("output-format", "", "print the native next turn of this API instead of the <tool_result> text (openai, openai_responses, anthropic, gemini, bedrock, ollama): what the orchestrator appends to its next request, each result answering its call by its id"),
	}
}

func (f formatFlags) check() error {
	if _, err := toolcall.ParseFormat(*f.format); err != nil {
		return usageError{fmt.Errorf("--format: %w", err)}
	}
	if _, err := toolcall.ParseOutputFormat(*f.output); err != nil {
		return usageError{fmt.Errorf("--output-format: %w", err)}
	}
	return nil
}

func (f formatFlags) options(reasoning string) *client.SubmitOptions {
	return &client.SubmitOptions{Format: *f.format, OutputFormat: *f.output, Reasoning: reasoning}
}

func (f formatFlags) native() bool { return *f.output != "" }

// connectFlags are the flags of commands that talk to a running bus, and where a
// one-shot command says that NATS refused it.
type connectFlags struct {
	url    *string
	stderr io.Writer
}

func addConnectFlags(fs interface {
	String(string, string, string) *string
}, env Env) connectFlags {
	return connectFlags{url: fs.String("nats", envDefault(env, "nats-url", ""), "NATS server URLs, comma-separated (TOOLBUS_NATS_URL; default: the config's nats.url, else "+nats.DefaultURL+")"),
		stderr: env.Stderr}
}

// URL is the flag's value, else the configuration's, else NATS's default.
func (f connectFlags) URL(cfg *config.Config) string {
	switch {
	case *f.url != "":
		return *f.url
	case cfg != nil && cfg.NATS.URL != "":
		return cfg.NATS.URL
	}
	return nats.DefaultURL
}

// connect connects for a one-shot command (log nil) or a long-running service, which
// keeps trying for ever, with backoff, and logs every failed try, each connection lost
// and each made: a service given a wrong URL says so at once. Credentials NATS refuses
// are said as such, naming the user (the error may quote the URL: its password is
// masked).
func (f connectFlags) connect(name string, cfg *config.Config, log *slog.Logger) (*nats.Conn, error) {
	url := f.URL(cfg)
	nc, err := nats.Connect(url, f.options(name, url, log)...)
	if err != nil {
		return nil, newConnectError(url, err)
	}
	return nc, nil
}

// options are the connection's options: its name, its user's inbox, the errors the
// server reports on the side said (a permissions violation names the user, the
// operation and the subject) and, for a long-running service (log set), reconnecting for
// ever with its logging — also while NATS refuses its credentials, which an operator
// may fix on the server: each refusal is logged as an error naming the user.
func (f connectFlags) options(name, url string, log *slog.Logger) []nats.Option {
	opts := []nats.Option{nats.Name(name), bus.UserInbox(url), nats.ErrorHandler(f.asyncErrors(log))}
	if log == nil {
		return opts
	}
	shown := redactURLs(url)
	return append(opts, nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true), nats.IgnoreAuthErrorAbort(),
		nats.CustomReconnectDelay(func(attempts int) time.Duration {
			return min(250*time.Millisecond<<min(attempts, 5), 5*time.Second)
		}),
		nats.ConnectHandler(func(nc *nats.Conn) { log.Info("connected to NATS", "url", redactURLs(nc.ConnectedUrl())) }),
		nats.ReconnectHandler(func(nc *nats.Conn) { log.Info("reconnected to NATS", "url", redactURLs(nc.ConnectedUrl())) }),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("lost the NATS connection; reconnecting", "err", err)
			}
		}),
		nats.ReconnectErrHandler(reconnectError(log, shown)))
}

// redactURLs hides the passwords of comma-separated NATS URLs (and masks one that does
// not parse whole), for messages and logs.
func redactURLs(urls string) string { return (*redact.Redactor)(nil).String(urls) }

func serveCmd(ctx context.Context, env Env, args []string) error {
	fs := newFlags("serve", env)
	cfgPath := fs.String("config", envDefault(env, "config", ""), "configuration file")
	url := fs.String("nats", envDefault(env, "nats-url", ""), "NATS server URL; empty runs an embedded server")
	port := fs.Int("port", 4222, "client port of the embedded server")
	storeDir := fs.String("store-dir", envDefault(env, "store-dir", ""), "JetStream directory of the embedded server (default: a temporary one)")
	replicas := fs.Int("replicas", 1, "replicas of each stage in this process")
	streamReplicas := fs.Int("stream-replicas", 0, "JetStream replicas of streams and buckets, 3 on a cluster (default: the config's nats.stream_replicas, else 1)")
	services := fs.String("services", "", "comma-separated services to run (default all: parser,executor,formatter,healthd)")
	verbose := fs.Bool("v", false, "log everything to stderr")
	jsonLogs := fs.Bool("json-logs", false, "log JSON lines")
	opsAddr := addOpsFlag(fs, env, ":8081")
	con := addConsoleFlags(fs, env)
	mcpAddr := fs.String("mcp-addr", envDefault(env, "mcp-addr", ""), mcpAddrUsage+" (TOOLBUS_MCP_ADDR)")
	key := tokenKey(env) // TOOLBUS_TOKEN_KEY: the OAuth grants of `toolbus auth login`
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	tokenKey, err := key()
	if err != nil {
		return err
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	log := serviceLogger(env, *verbose, *jsonLogs)
	stopTelemetry, err := startTelemetry(ctx, "toolbus", log)
	if err != nil {
		return err
	}
	defer stopTelemetry()
	o := toolbus.Options{
		Config: cfg, Replicas: *replicas, Services: splitList(*services), Logger: log, Ops: opsAddr.options("toolbus"),
		Topology: topology(cfg, *streamReplicas), TokenKey: tokenKey, Harden: true,
		NATSURL: *url, NATSOptions: []nats.Option{nats.Name("toolbus serve"), nats.MaxReconnects(-1)}, Provision: true,
	}
	if *url == "" {
		// The services reach their own server in process, as `toolbus run`'s do: no
		// loopback socket (10% less CPU per call in `toolbus bench --in-process`);
		// orchestrators connect on the port.
		o.Embedded = &bus.EmbeddedOptions{Port: *port, StoreDir: *storeDir}
	}
	tb, err := toolbus.Start(ctx, o)
	if err != nil {
		return opsAddr.explain(err)
	}
	defer tb.Close()
	// What a person starting it reads; under --json-logs, log lines like every other.
	say := func(text, msg string, args ...any) {
		if *jsonLogs {
			log.Info(msg, args...)
			return
		}
		fmt.Fprintln(env.Stderr, "toolbus: "+text)
	}
	if *url == "" {
		say("embedded NATS with JetStream on "+tb.ServerURL(), "embedded NATS with JetStream", "url", tb.ServerURL())
		if *storeDir == "" {
			// What makes a call run once across a restart (its claim, the responses and
			// calls under way) lives in the store: a temporary one goes with the process.
			say("its JetStream store is temporary: calls under way when serve stops, and the record of which ran, go with it; --store-dir DIR keeps them across restarts",
				"temporary JetStream store: --store-dir keeps calls under way and the record of which ran across restarts")
		}
	}
	stopReload := reloadOnHangup(tb)
	defer stopReload()
	nc := tb.Conn()
	consoleURL, stopConsole, err := con.start(ctx, env, nc, cfg)
	if err != nil {
		return err
	}
	defer stopConsole()
	if consoleURL != "" {
		say("console on "+consoleURL, "console", "url", consoleURL)
	}
	if *mcpAddr != "" {
		waitBeforeDoor(ctx, tb, log)
	}
	mcpURL, stopMCP, err := startFrontDoor(ctx, nc, cfg, *mcpAddr, log)
	if err != nil {
		return err
	}
	defer stopMCP()
	if mcpURL != "" {
		say("MCP on "+mcpURL, "mcp front door", "url", mcpURL)
	}
	say("serving; stop with Ctrl-C", "serving; stop with Ctrl-C")
	return tb.Wait()
}

func sendCmd(ctx context.Context, env Env, args []string) error {
	fs := newFlags("send", env)
	cf := addConnectFlags(fs, env)
	conv := fs.String("conversation", "cli", "conversation id")
	asJSON := fs.Bool("json", false, "print the output as JSON")
	full := fs.Bool("full-results", false, fullResultsUsage)
	timeout := fs.Duration("timeout", 2*time.Minute, "how long to wait for the output")
	stream := fs.Bool("stream", false, "publish each response token by token, as a model writes it (toolbus.stream.<conversation>); each call's result is printed to stderr as it is answered")
	rate := fs.Float64("rate", 50, "with --stream: tokens per second")
	reasoning := fs.String("reasoning", "", `where the response's reasoning is: "auto", "tagged" or "open" (default: the parser's configuration)`)
	formats := addFormatFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := formats.check(); err != nil {
		return err
	}
	if *rate <= 0 {
		return usageError{fmt.Errorf("--rate must be positive")}
	}
	if _, err := toolcall.ParseReasoning(*reasoning); err != nil {
		return usageError{err}
	}
	inputs, err := readInputs(env, fs.Args())
	if err != nil {
		return err
	}
	// A trace starts here, at the orchestrator, when OTEL_* asks for traces.
	stopTelemetry, err := startTelemetry(ctx, "toolbus-send", nil)
	if err != nil {
		return err
	}
	defer stopTelemetry()
	nc, err := cf.connect("toolbus send", nil, nil)
	if err != nil {
		return err
	}
	defer nc.Close()
	c, err := client.New(nc)
	if err != nil {
		return err
	}
	for _, in := range inputs {
		actx, cancel := context.WithTimeout(ctx, *timeout)
		actx, span := telemetry.Tracer(nil).Start(actx, "toolbus send", trace.WithAttributes(telemetry.Conversation.String(*conv)))
		var out *messages.Output
		if *stream {
			out, err = streamResponse(actx, env, c, *conv, in.text, *rate, formats.options(*reasoning))
		} else {
			out, err = c.Ask(actx, *conv, in.text, formats.options(*reasoning))
		}
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
		cancel()
		if err != nil {
			return fmt.Errorf("%s: %w", in.name, err)
		}
		if err := printOutput(ctx, env, c, in.name, out, *asJSON, *full, formats.native()); err != nil {
			return err
		}
	}
	return nil
}

// streamResponse publishes text as a model writes it, rate tokens a second, printing
// each call's result to stderr as it is answered, and returns the output.
// A hosted API's stream (its events' data one after another) is published an event
// at a time.
func streamResponse(ctx context.Context, env Env, c *client.Client, conversation, text string, rate float64, o *client.SubmitOptions) (*messages.Output, error) {
	start := time.Now()
	var ended atomic.Int64 // when the last token was written, in ns since start
	s, err := c.Stream(ctx, conversation, &client.StreamOptions{SubmitOptions: *o,
		Progress: func(r messages.ToolResult) {
			status := "ok"
			if !r.Success && r.Error != nil {
				status = string(r.Error.Code)
			}
			when := "while the response was written"
			if e := ended.Load(); e != 0 && time.Since(start) > time.Duration(e) {
				when = "after the response ended"
			}
			fmt.Fprintf(env.Stderr, "toolbus: call %d (%s) %s at %s, %s\n", r.Index, r.Tool, status, time.Since(start).Round(time.Millisecond), when)
		}})
	if err != nil {
		return nil, err
	}
	toks := client.SplitTokens(text)
	if events := toolcall.SplitEvents(text); events != nil {
		toks = events // a hosted API's stream goes an event at a time
	}
	for i, tok := range toks {
		if wait := time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))); wait > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(wait):
			}
		}
		if _, err := s.WriteString(tok); err != nil {
			return nil, err
		}
	}
	ended.Store(int64(time.Since(start)))
	return s.Close(ctx)
}

func splitList(s string) []string {
	var out []string
	for _, p := range splitComma(s) {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}
