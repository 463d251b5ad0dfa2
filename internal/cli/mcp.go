package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/toolbus/toolbus/internal/console"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/frontdoor"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolbus"
)

// mcpAddrUsage is the help of --mcp-addr (serve) and --http (mcp).
const mcpAddrUsage = "serve toolbus as an MCP server (streamable HTTP at /mcp) on HOST:PORT, e.g. 127.0.0.1:8091; " +
	"without tokens in the configuration (frontDoor.tokens, tenants.*.mcpTokens) only on a loopback address"

// startFrontDoor serves the MCP front door on nc at addr (empty: none) and returns its
// URL and what stops it. Without configured tokens the address must be a loopback one:
// no token is asked for there.
// waitBeforeDoor waits, for 20 seconds at the most, until every MCP server of tb's
// configuration listed its tools, so that the front door's first clients find the whole
// catalog: a tool not listed yet is an unknown tool to them, which a client takes for
// good.
func waitBeforeDoor(ctx context.Context, tb *toolbus.Toolbus, log *slog.Logger) {
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := tb.WaitForTools(wctx); err != nil {
		log.Warn("mcp: serving before every server listed its tools", "err", err)
	}
}

func startFrontDoor(ctx context.Context, nc *nats.Conn, cfg *config.Config, addr string, log *slog.Logger) (string, func(), error) {
	if addr == "" {
		return "", func() {}, nil
	}
	tokens := cfg.MCPTokens()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("mcp: %s: %w", addr, err)
	}
	tcp := ln.Addr().(*net.TCPAddr)
	if len(tokens) == 0 && !tcp.IP.IsLoopback() {
		ln.Close()
		return "", nil, usageError{fmt.Errorf("mcp: %s is not a loopback address, and no token is configured (frontDoor.tokens, tenants.*.mcpTokens; `toolbus mcp --new-token` makes one)", addr)}
	}
	if len(tokens) == 0 && len(cfg.Tenants) > 0 {
		log.Warn("mcp: tenants are configured but no front-door token: every MCP client is the default tenant's")
	}
	door, err := frontdoor.New(nc, &frontdoor.Options{Offers: toolbus.ToolOffers(cfg), Logger: log})
	if err != nil {
		ln.Close()
		return "", nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	go func() {
		if err := door.Run(runCtx); err != nil {
			log.Error("mcp: the front door stopped following the catalog", "err", err)
		}
	}()
	// The first clients find the catalog as it is, not an empty one.
	select {
	case <-door.Ready():
	case <-time.After(30 * time.Second):
		log.Warn("mcp: serving before the catalog bucket was read (30 s)")
	case <-ctx.Done():
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", door.Handler(&frontdoor.HTTPOptions{Tokens: tokens, Origins: cfg.FrontDoor.Origins, MaxBodyBytes: cfg.FrontDoor.MaxBodyBytes}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	stop := func() {
		sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer scancel()
		srv.Shutdown(sctx)
		cancel()
	}
	return "http://" + net.JoinHostPort(tcp.IP.String(), strconv.Itoa(tcp.Port)) + "/mcp", stop, nil
}

// mcpCmd serves toolbus as an MCP server: on stdio for a desktop client that launches
// it, or with --http on an address, against a running deployment's NATS or an embedded
// toolbus.
func mcpCmd(ctx context.Context, env Env, args []string) error {
	fs := newFlags("mcp", env)
	cf := addConnectFlags(fs, env)
	cfgPath := fs.String("config", envDefault(env, "config", ""), "configuration file (TOOLBUS_CONFIG): the policy whose denied tools are not listed, the front door's tokens")
	embedded := fs.Bool("embedded", false, "run toolbus itself in this process, on an embedded NATS, instead of connecting to one")
	httpAddr := fs.String("http", "", mcpAddrUsage+"; without it, MCP on stdin and stdout")
	tenant := fs.String("tenant", "", "on stdio: the tenant whose tools are listed and in whose conversations the calls run (default: the default tenant)")
	newToken := fs.Bool("new-token", false, "print a new front-door token and the SHA-256 to put in the configuration, and exit")
	verbose := fs.Bool("v", false, "log everything to stderr")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *newToken {
		token := console.NewToken()
		_, err := fmt.Fprintf(env.Stdout, "token:  %s\nsha256: %s\n", token, frontdoor.HashToken(token))
		return err
	}
	if *tenant != "" {
		if err := messages.ValidateTenant(*tenant); err != nil {
			return usageError{fmt.Errorf("--tenant: %w", err)}
		}
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	if *tenant != "" {
		if _, ok := cfg.Tenants[*tenant]; !ok {
			return usageError{fmt.Errorf("--tenant %s: not a tenant of the configuration", *tenant)}
		}
	}
	log := serviceLogger(env, *verbose, false) // stderr: stdout is the protocol's
	var nc *nats.Conn
	if *embedded {
		tb, err := toolbus.Start(ctx, toolbus.Options{Config: cfg, Logger: log, Embedded: &bus.EmbeddedOptions{}})
		if err != nil {
			return err
		}
		defer tb.Close()
		waitBeforeDoor(ctx, tb, log)
		nc = tb.Conn()
	} else {
		if nc, err = cf.connect("toolbus mcp", cfg, log); err != nil {
			return err
		}
		defer nc.Close()
	}
	if *httpAddr != "" {
		u, stop, err := startFrontDoor(ctx, nc, cfg, *httpAddr, log)
		if err != nil {
			return err
		}
		defer stop()
		fmt.Fprintln(env.Stderr, "toolbus: MCP on "+u)
		<-ctx.Done()
		return nil
	}
	door, err := frontdoor.New(nc, &frontdoor.Options{Offers: toolbus.ToolOffers(cfg), Logger: log})
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- door.Run(runCtx) }()
	select {
	case <-door.Ready():
	case err := <-runErr:
		return fmt.Errorf("mcp: %w", err)
	case <-time.After(30 * time.Second):
		return errors.New("mcp: the catalog bucket was not read in 30 s: is toolbus provisioned on this NATS?")
	}
	err = door.Serve(ctx, *tenant, &mcp.IOTransport{Reader: io.NopCloser(env.Stdin), Writer: nopWriteCloser{env.Stdout}})
	if ctx.Err() != nil || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
