package mcpwire

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
)

// Attribute keys of OpenTelemetry's MCP semantic conventions (gen-ai/mcp), which the
// Go semconv packages do not define yet.
const (
	attrMethod   = attribute.Key("mcp.method.name")
	attrSession  = attribute.Key("mcp.session.id")
	attrProtocol = attribute.Key("mcp.protocol.version")
	// attrRequestID: the go-sdk does not expose the ids it gives requests, and a
	// wrapper of its streamable connection would hide the unexported method it starts
	// the notification stream with; so the id is read off the HTTP body (headerTransport),
	// the stdio pipes' writes (stdioConn) or set by the plain JSON-RPC transport.
	attrRequestID   = attribute.Key("jsonrpc.request.id")
	attrToolName    = attribute.Key("gen_ai.tool.name")
	attrOperation   = attribute.Key("gen_ai.operation.name")
	attrTransport   = attribute.Key("network.transport")
	attrAddress     = attribute.Key("server.address")
	attrPort        = attribute.Key("server.port")
	attrErrorType   = attribute.Key("error.type")
	attrServerName  = attribute.Key("toolbus.server")
	methodToolsCall = "tools/call"
	instrumentScope = "github.com/toolbus/toolbus/pkg/mcpwire"
)

// OperationDuration is the histogram of OpenTelemetry's MCP conventions that the pool
// records for every tools/call it sends, in seconds.
const OperationDuration = "mcp.client.operation.duration"

// newOperationDuration creates the histogram on mp (nil: none).
func newOperationDuration(mp metric.MeterProvider) metric.Float64Histogram {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	h, err := mp.Meter(instrumentScope).Float64Histogram(OperationDuration, metric.WithUnit("s"),
		metric.WithDescription("duration of an MCP request as the client sees it, by method, tool, server and error type"),
		metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60))
	if err != nil {
		h, _ = noop.NewMeterProvider().Meter(instrumentScope).Float64Histogram(OperationDuration)
	}
	return h
}

// endpoint is what spans and metrics say of a server's connection: the network
// transport ("pipe" for stdio, "tcp" otherwise) and, for URLs, host and port.
func endpoint(name string, cfg ServerConfig) []attribute.KeyValue {
	attrs := []attribute.KeyValue{attrServerName.String(name)}
	if cfg.Transport() == TransportStdio {
		return append(attrs, attrTransport.String("pipe"))
	}
	attrs = append(attrs, attrTransport.String("tcp"))
	u, err := url.Parse(cfg.URL)
	if err != nil || u.Hostname() == "" {
		return attrs
	}
	attrs = append(attrs, attrAddress.String(u.Hostname()))
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if p, err := strconv.Atoi(port); err == nil {
		attrs = append(attrs, attrPort.Int(p))
	}
	return attrs
}

// callTool sends one tools/call (or a feature tool's request: features.go) on sess as a
// CLIENT span of OpenTelemetry's MCP conventions ("tools/call <tool>"), whose context the
// request carries to the server, and records its duration. Without a recording span in ctx there is no span to start.
func (s *server) callTool(ctx context.Context, sess session, tool string, args json.RawMessage) (*mcp.CallToolResult, error) {
	start := time.Now()
	span := trace.SpanFromContext(ctx)
	traced := span.IsRecording()
	method := methodToolsCall
	if m := featureMethod(tool); m != "" {
		method = m
	}
	if traced {
		ctx, span = span.TracerProvider().Tracer(instrumentScope).Start(ctx, method+" "+tool, trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(s.endpoint...),
			trace.WithAttributes(attrMethod.String(method), attrToolName.String(tool), attrOperation.String("execute_tool")))
		if id, version := sess.describe(); id != "" || version != "" {
			span.SetAttributes(attrSession.String(id), attrProtocol.String(version))
		}
	}
	res, err := s.send(ctx, sess, tool, args)
	errType := ""
	switch {
	case err != nil:
		errType = errorType(err)
	case res.IsError:
		errType = "tool_error"
	}
	var werr *jsonrpc.Error
	if err == nil || (errors.As(err, &werr) && !transportCode(werr.Code)) {
		// The server answered (a tool's own error too): the session that serves calls
		// works, whatever a probe says ([Pool.Check]).
		s.answered.Store(time.Now().UnixNano())
	} else if brokeConnection(err) && ctx.Err() == nil {
		// Not answered, its connection failed: health counts it against the server
		// unless another call was answered since ([Pool.Check]).
		s.unanswered.Store(&callFailure{at: time.Now().UnixNano(), err: err})
	}
	if traced {
		if errType != "" {
			span.SetAttributes(attrErrorType.String(errType))
			span.SetStatus(codes.Error, errType)
		}
		span.End()
	}
	s.pool.opDuration.Record(ctx, time.Since(start).Seconds(), s.measurement(tool, errType))
	return res, err
}

// measurement is the attribute set of a call's duration, built once per tool and error
// type (building a set sorts and hashes it).
func (s *server) measurement(tool, errType string) metric.MeasurementOption {
	key := tool + "\x00" + errType
	if m, ok := s.measurements.Load(key); ok {
		return m.(metric.MeasurementOption)
	}
	method := methodToolsCall
	if m := featureMethod(tool); m != "" {
		method = m
	}
	attrs := append([]attribute.KeyValue{attrMethod.String(method), attrToolName.String(tool)}, s.endpoint...)
	if errType != "" {
		attrs = append(attrs, attrErrorType.String(errType))
	}
	m := metric.WithAttributeSet(attribute.NewSet(attrs...))
	s.measurements.Store(key, m)
	return m
}

// errorType names a failed request for error.type: the JSON-RPC error code, timeout,
// connection, or _OTHER.
func errorType(err error) string {
	var werr *jsonrpc.Error
	switch {
	case errors.As(err, &werr):
		return strconv.FormatInt(werr.Code, 10)
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case brokeConnection(err):
		return "connection"
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return "connection"
	}
	return "_OTHER"
}
