package telemetry

import (
	"context"
	"log/slog"
	"slices"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
)

// LogHandler adds the trace and span ids of the record's context to every record, so a
// log line leads to its trace in Jaeger, and writes each key once per line: a key that a
// logger's With and a record both carry ("service", set by the command and again by the
// composition root) is written once, the record's (or the latest With's) value winning,
// so that strict JSON readers take every line.
type LogHandler struct {
	slog.Handler
	// attrs are the top-level attributes of With, kept here (not in Handler) so that
	// Handle can drop the ones a record repeats.
	attrs []slog.Attr
}

// Handle writes r with the logger's attributes, each key once, and trace_id and span_id
// when ctx carries a span.
func (h LogHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	all := make([]slog.Attr, 0, len(h.attrs)+r.NumAttrs()+2)
	all = append(all, h.attrs...)
	r.Attrs(func(a slog.Attr) bool {
		all = setAttr(all, a)
		return true
	})
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		all = setAttr(all, slog.String("trace_id", sc.TraceID().String()))
		all = setAttr(all, slog.String("span_id", sc.SpanID().String()))
	}
	out.AddAttrs(all...)
	return h.Handler.Handle(ctx, out)
}

// WithAttrs keeps attrs for Handle, a key given again replacing the earlier value.
func (h LogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	next := slices.Clone(h.attrs)
	for _, a := range attrs {
		next = setAttr(next, a)
	}
	return LogHandler{Handler: h.Handler, attrs: next}
}

// WithGroup hands the attributes kept so far to the handler beneath, then opens the
// group there: keys inside a group are the group's.
func (h LogHandler) WithGroup(name string) slog.Handler {
	inner := h.Handler
	if len(h.attrs) > 0 {
		inner = inner.WithAttrs(h.attrs)
	}
	return LogHandler{Handler: inner.WithGroup(name)}
}

// setAttr sets a in attrs: in place of an attribute of the same key, else appended. An
// empty attribute (slog drops it) is left out.
func setAttr(attrs []slog.Attr, a slog.Attr) []slog.Attr {
	if a.Equal(slog.Attr{}) {
		return attrs
	}
	if i := slices.IndexFunc(attrs, func(b slog.Attr) bool { return b.Key == a.Key }); i >= 0 {
		attrs[i] = a
		return attrs
	}
	return append(attrs, a)
}

// LogErrors makes log (nil: slog's default logger) write OpenTelemetry's own errors —
// an exporter that cannot reach its collector, a dropped span — so that they are lines
// of the service's log like any other (JSON where the service logs JSON), not plain
// text of the standard library's logger in between.
func LogErrors(log *slog.Logger) {
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		l := log
		if l == nil {
			l = slog.Default()
		}
		l.Warn("opentelemetry", "err", err)
	}))
}
