package mcpwire

import (
	"context"
	"errors"
	"fmt"
	"github.com/toolbus/toolbus/pkg/mcpwire/oauth"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ProbeOptions configures [Probe]. The zero value is valid.
type ProbeOptions struct {
	// HTTPClient is the base client of http, sse and jsonrpc servers, as in [Options].
	HTTPClient *http.Client
	// ClientName is how the prober introduces itself. Default "toolbus-probe".
	ClientName string
	Logger     *slog.Logger
	// Tokens holds the OAuth grants logins left, as in [Options]: an http server that
	// requires authorization is probed with its grant, and without one fails with
	// [oauth.ErrNeedsLogin].
	Tokens oauth.TokenStore
}

// ProbeResult is the outcome of one [Probe].
type ProbeResult struct {
	// Latency is how long the probe took: connecting (for stdio, starting the server),
	// the handshake and tools/list.
	Latency time.Duration
	// Protocol is the negotiated MCP protocol version; empty for plain JSON-RPC.
	Protocol string
	Tools    int
	// Err is why the probe failed; nil means the server answered.
	Err error
	// Note says what is odd about a server that answered: a JSON-RPC service that
	// refused tools/list with an error other than "method not found".
	Note string
	// Transport is the transport the session uses when it is not the configured one:
	// "sse" for an entry with a url and no type whose server does not speak
	// streamable HTTP ([ServerConfig.FallsBackToSSE]); empty otherwise.
	Transport string
}

// fellBack is the transport sess uses when it is not the one cfg names: "sse" for an
// entry without a type that fell back to HTTP+SSE.
func fellBack(cfg ServerConfig, sess session) string {
	if cfg.Transport() != TransportSSE && overSSE(sess) {
		return string(TransportSSE)
	}
	return ""
}

// Probe opens a session to the server the way a [Pool] does — the same transports,
// headers, child process and environment — lists its tools and closes the session, all
// within ctx. tools/list is the probe for every protocol version: servers of 2026-07-28
// and later have no ping. A server whose configuration declares its tools is not asked
// for them: it is pinged, or where its protocol has no ping, judged by its session
// having opened.
func Probe(ctx context.Context, name string, cfg ServerConfig, opts *ProbeOptions) ProbeResult {
	var o ProbeOptions
	if opts != nil {
		o = *opts
	}
	if o.ClientName == "" {
		o.ClientName = "toolbus-probe"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.HTTPClient == nil {
		o.HTTPClient = http.DefaultClient
	}
	start := time.Now()
	timeout := time.Hour
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	var handler auth.OAuthHandler
	var oc *oauth.Client
	if cfg.Transport() == TransportHTTP {
		var err error
		if handler, oc, err = oauth.NewHandler(name, cfg.URL, cfg.OAuth, o.Tokens, nil, o.HTTPClient); err != nil {
			return ProbeResult{Err: err}
		}
	}
	sess, err := dial(ctx, name, cfg, newClient(&mcp.Implementation{Name: o.ClientName, Version: "0.1.0"}, cfg, nil), nil, o.HTTPClient, handler, o.Logger.With("server", name), timeout)
	if err != nil {
		if oc != nil && !errors.Is(err, oauth.ErrNeedsLogin) {
			if nl := oc.NeedsLogin(); nl != nil {
				err = nl
			}
		}
		return ProbeResult{Latency: time.Since(start), Err: describe(ctx, "connect", err)}
	}
	defer sess.close()
	r := ProbeResult{Transport: fellBack(cfg, sess)}
	if ms, ok := sess.(*mcpSession); ok {
		r.Protocol = ms.cs.InitializeResult().ProtocolVersion
	}
	if len(cfg.Tools) > 0 {
		// Declared: the server is not asked for its tools.
		r.Tools, r.Note, r.Err = declaredAlive(ctx, sess, len(cfg.Tools), false)
		r.Latency = time.Since(start)
		return r
	}
	tools, err := sess.listTools(ctx)
	r.Latency = time.Since(start)
	var werr *jsonrpc.Error
	switch {
	case err == nil:
		r.Tools = len(tools)
	case errors.As(err, &werr) && werr.Code == codeMethodNotFound:
		// A service without tools/list is up, with none listed.
	case errors.As(err, &werr) && cfg.Transport() == TransportJSONRPC && werr.Code != codeParseError && !strings.HasPrefix(werr.Message, "HTTP 5"):
		// The service answered, with an error of its own.
		r.Note = fmt.Sprintf("tools/list: %d %s", werr.Code, werr.Message)
	default:
		r.Err = describe(ctx, "tools/list", err)
	}
	return r
}

// describe names the step that failed, and says "no answer in time" rather than
// "context deadline exceeded".
func describe(ctx context.Context, step string, err error) error {
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: no answer in time: %w", step, context.DeadlineExceeded)
	}
	return fmt.Errorf("%s: %w", step, err)
}
