// Command engineering serves toolbus's engineering calculators as a standalone MCP
// server: three visible tools (clock, dispatch_engineering, execute_tool) in front of
// the hidden calculators of package engineering.
//
// It serves streamable HTTP on :$PORT (default 8080) with GET /health, or stdio with
// --stdio. Logs go to stderr.
//
//	engineering --stdio                  # stdio, for Claude Desktop, Cursor, ...
//	engineering                          # streamable HTTP on :8080 at / and /mcp
//	engineering --http 127.0.0.1:9000    # another address
//	engineering --stateless              # no MCP sessions (2026-07-28 clients)
//
// Environment: SERVER_NAME (default EngineersCalc), PORT (HTTP port when --http is
// not given; default 8080).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolbus/toolbus/pkg/telemetry"
	"github.com/toolbus/toolbus/pkg/version"

	"github.com/toolbus/toolbus/pkg/engineering"
)

type config struct {
	httpAddr  string
	stdio     bool
	stateless bool
	expose    string
	name      string
}

func main() {
	var cfg config
	flag.StringVar(&cfg.httpAddr, "http", "", "serve streamable HTTP on this address (default :$PORT, or :8080)")
	flag.BoolVar(&cfg.stdio, "stdio", false, "serve over stdin/stdout instead of HTTP")
	flag.BoolVar(&cfg.stateless, "stateless", false, "serve HTTP without MCP sessions; activation is kept per conversation id in _meta, else per request")
	flag.StringVar(&cfg.expose, "expose", engineering.ExposeHierarchical, "hierarchical (three tools) or flat (every calculator a tool)")
	flag.StringVar(&cfg.name, "name", envOr("SERVER_NAME", engineering.DefaultServerName), "MCP server name ($SERVER_NAME)")
	showVersion := flag.Bool("version", false, "print the version and exit")
	flag.Parse()
	if *showVersion {
		fmt.Println(version.String("engineering"))
		return
	}
	if cfg.httpAddr == "" && !cfg.stdio {
		cfg.httpAddr = ":" + envOr("PORT", "8080")
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	// Each tool call's span continues the trace its _meta carries; exported when
	// OTEL_EXPORTER_OTLP_ENDPOINT (and the like) is set.
	telemetry.LogErrors(logger)
	shutdown, err := telemetry.Setup(ctx, "engineering")
	if err != nil {
		logger.Error("tracing", "err", err)
		os.Exit(1)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = shutdown(ctx)
	}()
	if err := run(ctx, cfg, logger); err != nil {
		logger.Error("engineering server failed", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg config, logger *slog.Logger) error {
	if cfg.stdio && cfg.httpAddr != "" {
		return errors.New("--stdio and --http exclude each other")
	}
	if cfg.stateless && cfg.httpAddr == "" {
		return errors.New("--stateless needs HTTP: drop --stdio")
	}
	opts := &engineering.Options{Expose: cfg.expose, Logger: logger}
	if err := opts.Validate(); err != nil {
		return err
	}
	suite := engineering.New(opts)
	mcpOpts := &engineering.MCPOptions{Name: cfg.name, Stateless: cfg.stateless, Logger: logger}

	if cfg.httpAddr == "" {
		logger.Info("serving MCP over stdio", "name", cfg.name)
		err := suite.MCPServer(mcpOpts).Run(ctx, &mcp.StdioTransport{})
		if ctx.Err() != nil {
			return nil
		}
		return err
	}

	ln, err := net.Listen("tcp", cfg.httpAddr)
	if err != nil {
		return err
	}
	// Requests get a context that ends when shutdown begins, so that long-lived event
	// streams end instead of holding the shutdown up.
	requests, endRequests := context.WithCancel(context.Background())
	defer endRequests()
	srv := &http.Server{
		Handler:           suite.HTTPHandler(mcpOpts),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return requests },
	}
	srv.RegisterOnShutdown(endRequests)
	logger.Info("serving MCP over streamable HTTP", "name", cfg.name, "addr", ln.Addr().String(), "stateless", cfg.stateless)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		logger.Warn("connections still open after the shutdown timeout; closing them", "err", err)
		return srv.Close()
	}
	return nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
