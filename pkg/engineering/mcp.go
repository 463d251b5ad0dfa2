package engineering

import (
	"context"
	"crypto/rand"
	"log/slog"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolbus/toolbus/pkg/messages"
)

// DefaultServerName is the MCP server name when MCPOptions.Name is empty.
const DefaultServerName = "EngineersCalc"

// Keys of a tool call's _meta that name the conversation whose activation to use.
const (
	MetaConversation      = messages.MetaConversation
	MetaConversationShort = "conversation_id"
)

// MCPOptions configure [Suite.MCPServer] and [Suite.HTTPHandler].
type MCPOptions struct {
	// Name and Version identify the server; Name defaults to DefaultServerName.
	Name    string
	Version string
	// Stateless serves without MCP sessions (the go-sdk's stateless streamable HTTP,
	// which 2026-07-28 clients need). Activation is then keyed by the conversation id in
	// a call's _meta, or lasts for the one request when there is none.
	Stateless bool
	// Logger defaults to discarding.
	Logger *slog.Logger
	// TracerProvider records a SERVER span per tool call, continuing the trace the
	// call's _meta carries (traceparent, tracestate); nil means the global provider.
	TracerProvider trace.TracerProvider
}

func (o *MCPOptions) orDefault() MCPOptions {
	var out MCPOptions
	if o != nil {
		out = *o
	}
	if out.Name == "" {
		out.Name = DefaultServerName
	}
	if out.Version == "" {
		out.Version = "dev"
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	if out.TracerProvider == nil {
		out.TracerProvider = otel.GetTracerProvider()
	}
	return out
}

const mcpInstructions = "Engineering calculators with units. Only three tools are shown: " +
	"call dispatch_engineering {\"action\": \"info\"} to see the domains, {\"domain\": ..., \"action\": \"list\"} to see a domain's calculators, " +
	"{\"domain\": ..., \"action\": \"activate\"} to unlock them, then execute_tool {\"tool_name\": ..., \"parameters\": {...}}."

// MCPServer returns an MCP server offering the Suite's visible tools. A call's
// activation state is keyed by the conversation id in its _meta (MetaConversation or
// MetaConversationShort) when given, else by its MCP session; in stateless mode
// without a conversation id it lasts for the request.
func (s *Suite) MCPServer(opts *MCPOptions) *mcp.Server {
	o := opts.orDefault()
	srv := mcp.NewServer(&mcp.Implementation{Name: o.Name, Version: o.Version}, &mcp.ServerOptions{
		Instructions: mcpInstructions,
		Logger:       o.Logger,
	})
	keys := &sessionKeys{m: map[*mcp.ServerSession]string{}}
	tracer := o.TracerProvider.Tracer("github.com/toolbus/toolbus/pkg/engineering")
	for _, t := range s.Tools() {
		closed := false
		tool := &mcp.Tool{
			Name:        t.Name,
			Description: t.Description,
			InputSchema: t.InputSchema,
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: t.ReadOnly, IdempotentHint: t.Idempotent, OpenWorldHint: &closed},
		}
		srv.AddTool(tool, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			ctx, span := startCallSpan(ctx, tracer, req)
			defer span.End()
			conv, perRequest, err := conversationOf(req, o.Stateless, keys)
			if err != nil {
				span.SetStatus(codes.Error, "invalid_arguments")
				return toolErrorResult(err), nil
			}
			out, err := s.call(ctx, conv, req.Params.Name, req.Params.Arguments, perRequest)
			if err != nil {
				span.SetStatus(codes.Error, string(messages.AsToolError(err).Code))
				return toolErrorResult(err), nil
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(out)}}, StructuredContent: out}, nil
		})
	}
	return srv
}

// startCallSpan starts the SERVER span of a tools/call (OpenTelemetry's MCP
// conventions), in the trace of the traceparent in the request's _meta when it has one.
func startCallSpan(ctx context.Context, tracer trace.Tracer, req *mcp.CallToolRequest) (context.Context, trace.Span) {
	carrier := propagation.MapCarrier{}
	for _, k := range []string{"traceparent", "tracestate"} {
		if v, ok := req.Params.Meta[k].(string); ok {
			carrier[k] = v
		}
	}
	ctx = propagation.TraceContext{}.Extract(ctx, carrier)
	attrs := []attribute.KeyValue{attribute.String("mcp.method.name", "tools/call"), attribute.String("gen_ai.tool.name", req.Params.Name),
		attribute.String("gen_ai.operation.name", "execute_tool")}
	if req.Session != nil && req.Session.ID() != "" {
		attrs = append(attrs, attribute.String("mcp.session.id", req.Session.ID()))
	}
	return tracer.Start(ctx, "tools/call "+req.Params.Name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
}

// conversationOf picks the key under which a call's activation is kept.
func conversationOf(req *mcp.CallToolRequest, stateless bool, keys *sessionKeys) (conv string, perRequest bool, err error) {
	for _, k := range []string{MetaConversation, MetaConversationShort} {
		v, ok := req.Params.Meta[k]
		if !ok {
			continue
		}
		id, _ := v.(string)
		if err := messages.ValidateConversation(id); err != nil {
			return "", false, messages.Errorf(messages.CodeInvalidArguments, "_meta %q: %v", k, err)
		}
		return id, false, nil
	}
	if stateless || req.Session == nil {
		return "", true, nil
	}
	return keys.of(req.Session), false, nil
}

// sessionKeys names MCP sessions for the session store: by their id where the
// transport has one (streamable HTTP), else by a random name per session (stdio and
// in-memory sessions have no id).
type sessionKeys struct {
	mu sync.Mutex
	m  map[*mcp.ServerSession]string
}

func (k *sessionKeys) of(ss *mcp.ServerSession) string {
	if id := ss.ID(); id != "" {
		return "mcp-" + id
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	key, ok := k.m[ss]
	if !ok {
		key = "mcp-" + rand.Text()
		k.m[ss] = key
	}
	return key
}

// toolErrorResult reports a failed call as a tool error the model can read, not as a
// protocol error.
func toolErrorResult(err error) *mcp.CallToolResult {
	te := messages.AsToolError(err)
	body := mustJSON(messages.ResultError{Code: te.Code, Message: te.Message})
	return &mcp.CallToolResult{
		IsError:           true,
		Content:           []mcp.Content{&mcp.TextContent{Text: te.Error()}},
		StructuredContent: body,
	}
}

// HTTPHandler serves the MCP server over streamable HTTP at / and /mcp, and answers
// GET /health with the server's name and tool count.
func (s *Suite) HTTPHandler(opts *MCPOptions) http.Handler {
	o := opts.orDefault()
	srv := s.MCPServer(&o)
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: o.Stateless, Logger: o.Logger})
	health := mustJSON(map[string]any{"status": "ok", "name": o.Name, "version": o.Version, "tools": len(s.tools), "stateless": o.Stateless})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(health)
	})
	mux.Handle("/mcp", mcpHandler)
	mux.Handle("/", mcpHandler)
	return mux
}
