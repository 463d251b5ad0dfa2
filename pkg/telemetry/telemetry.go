// Package telemetry sets up OpenTelemetry tracing from the standard OTEL_* environment
// variables and defines the span attributes toolbus uses. With no exporter configured,
// tracing stays off: the global no-op provider is kept and spans cost next to nothing,
// while trace context still travels from hop to hop in NATS headers.
package telemetry

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"strings"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/version"
)

// Instrumentation scope of toolbus's spans.
const Scope = "github.com/toolbus/toolbus"

// Attribute keys: OpenTelemetry's messaging conventions plus toolbus's own.
const (
	MessagingSystem      = attribute.Key("messaging.system")
	MessagingDestination = attribute.Key("messaging.destination.name")
	MessagingOperation   = attribute.Key("messaging.operation.type")
	MessagingOpName      = attribute.Key("messaging.operation.name")
	MessagingTemplate    = attribute.Key("messaging.destination.template")
	MessagingMessageID   = attribute.Key("messaging.message.id")
	MessagingConsumer    = attribute.Key("messaging.consumer.group.name")
	Conversation         = attribute.Key("toolbus.conversation")
	Tenant               = attribute.Key("toolbus.tenant")
	ResponseID           = attribute.Key("toolbus.response_id")
	Tool                 = attribute.Key("toolbus.tool")
	ToolWritten          = attribute.Key("toolbus.tool.written")
	GenAIOperation       = attribute.Key("gen_ai.operation.name")
	GenAITool            = attribute.Key("gen_ai.tool.name")
	Server               = attribute.Key("toolbus.server")
	Attempt              = attribute.Key("toolbus.attempt")
	Delivery             = attribute.Key("toolbus.delivery")
	Forwarded            = attribute.Key("toolbus.forwarded")
	ErrorCode            = attribute.Key("toolbus.error_code")
	ErrorMessage         = attribute.Key("toolbus.error_message")
	RetryReason          = attribute.Key("toolbus.retry_reason")
	PolicyRevision       = attribute.Key("toolbus.policy.revision")
	// PolicyRule is the rule that decided a call (a call waiting for approval).
	PolicyRule = attribute.Key("toolbus.policy.rule")
)

// MessagingSystemNATS is the value of MessagingSystem on every span toolbus records.
const MessagingSystemNATS = "nats"

// UnknownTool is what metrics and span names call a tool no backend offers. Tool names
// come from models: each invented one would otherwise be a new metric series and a new
// operation in the trace store.
const UnknownTool = "_unknown"

// MaxLabelLen bounds a metric label value or a span name's tool part.
const MaxLabelLen = 128

// ToolLabel is the name metrics and span names give a tool: its name when a backend
// offers it (known), else [UnknownTool]; never longer than [MaxLabelLen] bytes.
func ToolLabel(name string, known bool) string {
	if !known {
		return UnknownTool
	}
	return Cap(name)
}

// Cap cuts s to [MaxLabelLen] bytes, as toolbus cuts what it repeats of a model's
// writing ([messages.Cut]).
func Cap(s string) string { return messages.Cut(s, MaxLabelLen) }

// propagator carries W3C trace context and baggage.
var propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// Propagator returns the propagator of toolbus's trace context: W3C trace context and
// baggage.
func Propagator() propagation.TextMapPropagator { return propagator }

// Enabled reports whether the environment asks for traces to be exported.
func Enabled(getenv func(string) string) bool {
	if getenv == nil {
		getenv = os.Getenv
	}
	if getenv("OTEL_SDK_DISABLED") == "true" || getenv("OTEL_TRACES_EXPORTER") == "none" {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" ||
		getenv("OTEL_TRACES_EXPORTER") == "otlp"
}

// Setup installs a global tracer provider exporting over OTLP when the environment asks
// for it (OTEL_EXPORTER_OTLP_ENDPOINT and friends; OTEL_EXPORTER_OTLP_PROTOCOL
// "grpc" or "http/protobuf", the default). service is the default of OTEL_SERVICE_NAME.
// The returned function flushes and stops it; it is a no-op when tracing is off.
func Setup(ctx context.Context, service string) (shutdown func(context.Context) error, err error) {
	otel.SetTextMapPropagator(propagator)
	if !Enabled(nil) {
		// A no-op provider rather than the global default, which delegates each span
		// (a span allocated per message, for nothing): trace context still passes
		// through toolbus unchanged, in the headers of what each stage publishes.
		otel.SetTracerProvider(noop.NewTracerProvider())
		return func(context.Context) error { return nil }, nil
	}
	var exp sdktrace.SpanExporter
	proto := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch strings.TrimSpace(proto) {
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	case "", "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	default:
		return nil, fmt.Errorf("telemetry: OTEL_EXPORTER_OTLP_PROTOCOL %q is not grpc or http/protobuf", proto)
	}
	if err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	res, err := Resource(ctx, service)
	if err != nil {
		return nil, err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	return tp.Shutdown, nil
}

// instanceID names this process in service.instance.id: random, one per process.
var instanceID = sync.OnceValue(func() string { return uuid() })

// uuid returns a random (version 4) UUID.
func uuid() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// Resource describes this process to traces and metrics: service.name (service, unless
// OTEL_SERVICE_NAME says otherwise), service.version, service.instance.id (one per
// process), the host, and OTEL_RESOURCE_ATTRIBUTES, which win.
func Resource(ctx context.Context, service string) (*resource.Resource, error) {
	res, err := resource.New(ctx,
		resource.WithAttributes(
			attribute.String("service.name", service),
			attribute.String("service.version", version.Short()),
			attribute.String("service.instance.id", instanceID())),
		resource.WithTelemetrySDK(), resource.WithHost(), resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	return res, nil
}

// Tracer returns toolbus's tracer from tp, or from the global provider when tp is nil.
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(Scope)
}

// TracerFor returns the tracer of the recording span in ctx, so that a caller's own
// provider records toolbus's spans too, or else the global tracer.
func TracerFor(ctx context.Context) trace.Tracer {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		return span.TracerProvider().Tracer(Scope)
	}
	return Tracer(nil)
}
