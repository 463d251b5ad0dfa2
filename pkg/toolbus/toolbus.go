// Package toolbus runs toolbus inside a Go program: the program's own Go functions as
// tools, beside everything its configuration file turns on (built-in tools, a tools
// folder, the engineering calculators, MCP servers).
//
// Start runs the whole pipeline on an embedded NATS server — as `toolbus run` does — or
// runs some of its services against a NATS cluster (Options.NATSURL, Options.Services),
// typically an executor that offers the program's tools to the parsers and formatters
// running elsewhere:
//
//	reg := localtools.New()
//	localtools.AddFunc(reg, messages.ToolInfo{Name: "convert_temperature", ReadOnly: true}, convert)
//	tb, err := toolbus.Start(ctx, toolbus.Options{ConfigFile: "toolbus.json", Tools: reg})
//	...
//	defer tb.Close()
//	err = tb.WaitForTools(ctx) // the MCP servers' tools, for calls without a marker
//	out, err := tb.Client().Ask(ctx, "conv-1", modelText, nil)
package toolbus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolbus/toolbus/internal/bus"
	"github.com/toolbus/toolbus/internal/config"
	"github.com/toolbus/toolbus/internal/node"
	"github.com/toolbus/toolbus/internal/parser"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/localtools"
)

// The services Options.Services may name.
const (
	Parser    = node.Parser
	Executor  = node.Executor
	Formatter = node.Formatter
	Healthd   = node.Healthd
)

// Options configure [Start]. The zero value runs every service on an embedded NATS with
// the default configuration.
type Options struct {
	// ConfigFile is the toolbus configuration (the file `toolbus run --config` reads);
	// empty means the defaults. Its relative folders are relative to the file.
	ConfigFile string
	// Tools are the program's own tools, joined to the built-ins and the tools folder
	// the configuration turns on. Only executors run them.
	Tools *localtools.Registry
	// NATSURL connects to a NATS server (with JetStream, provisioned: `toolbus
	// provision`); empty starts an embedded one in a temporary folder.
	NATSURL string
	// NATSOptions are added to the connection's options (credentials, TLS).
	NATSOptions []nats.Option
	// Services to run; default all four. A program offering its tools to a cluster runs
	// [Executor].
	Services []string
	// Replicas of each service in this process. Default 1.
	Replicas int
	// TokenKey seals the OAuth grants of http servers that require a login (32 bytes;
	// the services of the toolbus binary read it from TOOLBUS_TOKEN_KEY). Without it,
	// such a server's calls are answered server_unavailable, naming `toolbus auth login`.
	TokenKey []byte
	// Logger defaults to discarding.
	Logger *slog.Logger
}

// Toolbus is a running toolbus: its services, their NATS connection, and the embedded
// server when there is one.
type Toolbus struct {
	cfg      *config.Config
	catalog  *parser.Catalog // the parser's, when this process runs one
	services []string
	nc       *nats.Conn
	node     *node.Node
	stop     context.CancelFunc
	server   func()
	client   *client.Client
}

// Start runs the services until ctx is done or Close is called. With an embedded
// server, streams, consumers and buckets are provisioned; against a URL they must exist
// (as `toolbus provision` makes them) and Start says what is missing.
func Start(ctx context.Context, o Options) (*Toolbus, error) {
	cfg, err := config.Load(o.ConfigFile)
	if err != nil {
		return nil, err
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	tb := &Toolbus{server: func() {}, cfg: cfg, catalog: parser.NewCatalog(), services: o.Services}
	opts := append([]nats.Option{nats.Name("toolbus embedded")}, o.NATSOptions...)
	checkOnly := o.NATSURL != ""
	if o.NATSURL == "" {
		srv, stop, err := bus.StartEmbedded(bus.EmbeddedOptions{})
		if err != nil {
			return nil, fmt.Errorf("toolbus: embedded NATS: %w", err)
		}
		tb.server = stop
		opts = append(opts, nats.InProcessServer(srv))
	}
	tb.nc, err = nats.Connect(o.NATSURL, opts...)
	if err != nil {
		tb.server()
		return nil, fmt.Errorf("toolbus: connect to NATS: %w", err)
	}
	runCtx, stop := context.WithCancel(ctx)
	tb.stop = stop
	tb.node, err = node.Start(runCtx, tb.nc, node.Options{Config: cfg, Services: o.Services, Replicas: o.Replicas, TokenKey: o.TokenKey,
		Local: o.Tools, Logger: o.Logger, CheckOnly: checkOnly, Catalog: tb.catalog})
	if err == nil {
		tb.client, err = client.New(tb.nc)
	}
	if err != nil {
		stop()
		if tb.node != nil {
			tb.node.Wait()
		}
		tb.nc.Close()
		tb.server()
		return nil, err
	}
	return tb, nil
}

// WaitForTools waits until the parser of this process knows the tools of every
// backend of the configuration (its MCP servers list theirs after they start), so that
// calls written without a marker — bare JSON, a pythonic list after a sentence — are
// recognised from the first response; or until ctx is done, when it names the backends
// still missing. Without a parser in this process it returns at once.
func (tb *Toolbus) WaitForTools(ctx context.Context) error {
	if len(tb.services) > 0 && !slices.Contains(tb.services, Parser) {
		return nil
	}
	wait := time.Duration(math.MaxInt64)
	if d, ok := ctx.Deadline(); ok {
		wait = time.Until(d)
	}
	if missing := node.WaitForCatalog(ctx, tb.catalog, tb.cfg, wait); len(missing) > 0 {
		return fmt.Errorf("toolbus: %s did not list their tools: %w", strings.Join(missing, ", "), context.Cause(ctx))
	}
	return nil
}

// Client is a client on toolbus's own connection, to submit model responses and read
// their outputs.
func (tb *Toolbus) Client() *client.Client { return tb.client }

// Close stops the services, waits for them, and stops the embedded server.
func (tb *Toolbus) Close() error {
	tb.stop()
	err := tb.node.Wait()
	tb.nc.Close()
	tb.server()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}
