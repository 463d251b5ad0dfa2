package bus

import (
	"context"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/telemetry"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// headerCarrier lets OpenTelemetry read and write NATS headers. Unlike http.Header it
// keeps keys as written: W3C names are lower case ("traceparent").
type headerCarrier nats.Header

func (c headerCarrier) Get(key string) string { return nats.Header(c).Get(key) }
func (c headerCarrier) Set(key, value string) { nats.Header(c).Set(key, value) }
func (c headerCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// InjectTrace writes the trace context of ctx into h.
func InjectTrace(ctx context.Context, h nats.Header) {
	telemetry.Propagator().Inject(ctx, headerCarrier(h))
}

// ExtractTrace returns ctx carrying the trace context found in h.
func ExtractTrace(ctx context.Context, h nats.Header) context.Context {
	if h == nil {
		return ctx
	}
	return telemetry.Propagator().Extract(ctx, headerCarrier(h))
}

// consumerSpan is the option of every consume span, built once: a span started with tracing
// off then costs no allocation for its options.
var consumerSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer)}

// startConsumeSpan starts the span of handling msg, as a child of the trace context the
// message carries, named as OpenTelemetry's messaging conventions name a consumer's
// span: "process <destination template>" ("process toolbus.calls.{conversation}"), so
// that the span name keeps no conversation id. Its attributes are built only when the
// span records: with tracing off (no exporter configured) a message costs no attribute
// allocations. With untraced, no span is started: the context carries the message's
// trace on, for what the handler records and publishes.
func startConsumeSpan(ctx context.Context, tr trace.Tracer, untraced bool, consumer string, d *Delivery) (context.Context, trace.Span) {
	ctx = ExtractTrace(ctx, d.Header)
	if untraced {
		return ctx, trace.SpanFromContext(context.Background()) // a span that records nothing
	}
	ctx, span := tr.Start(ctx, "process", consumerSpan...)
	if !span.IsRecording() {
		return ctx, span
	}
	template := DestinationTemplate(d.Subject, d.Meta.Conversation)
	span.SetName("process " + template)
	m := d.Meta
	attrs := []attribute.KeyValue{
		telemetry.MessagingSystem.String(telemetry.MessagingSystemNATS),
		telemetry.MessagingOperation.String("process"),
		telemetry.MessagingOpName.String("process"),
		telemetry.MessagingDestination.String(d.Subject),
		telemetry.MessagingTemplate.String(template),
		telemetry.MessagingConsumer.String(consumer),
		telemetry.Conversation.String(m.Conversation),
	}
	if tenant := messages.Tenant(m.Conversation); tenant != "" {
		attrs = append(attrs, telemetry.Tenant.String(tenant))
	}
	if m.MsgID != "" {
		attrs = append(attrs, telemetry.MessagingMessageID.String(m.MsgID))
	}
	if m.ResponseID != "" {
		attrs = append(attrs, telemetry.ResponseID.String(m.ResponseID))
	}
	attrs = append(attrs, telemetry.Delivery.Int64(int64(d.Delivered)))
	span.SetAttributes(attrs...)
	return ctx, span
}

// StartForwardedSpan starts the span of handling d, a message another process pulled
// and forwarded here (a call sent to the executor that holds its conversation's
// session): the consumer span Run starts for a message it pulls, with the same
// messaging attributes, marked toolbus.forwarded and named "process <template>".
func StartForwardedSpan(ctx context.Context, tr trace.Tracer, consumer string, d *Delivery) (context.Context, trace.Span) {
	ctx, span := startConsumeSpan(ctx, tr, false, consumer, d)
	if span.IsRecording() {
		span.SetAttributes(telemetry.Forwarded.Bool(true))
	}
	return ctx, span
}

// DestinationTemplate is subject with its conversation replaced by "{conversation}"
// ("toolbus.calls.acme.c1" → "toolbus.calls.{conversation}"): the destination a span
// name may carry, one per subject family rather than one per conversation. A subject
// that does not end in the conversation is its own template.
func DestinationTemplate(subject, conversation string) string {
	if conversation != "" {
		if prefix, ok := strings.CutSuffix(subject, "."+conversation); ok {
			return prefix + ".{conversation}"
		}
	}
	return subject
}
