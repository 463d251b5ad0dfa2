package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/toolbus/toolbus/pkg/telemetry/telemetrytest"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

func TestLogHandlerAddsTraceIDs(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(LogHandler{Handler: slog.NewJSONHandler(&buf, nil)}).With("service", "executor")
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("t").Start(context.Background(), "op")
	log.InfoContext(ctx, "hello")
	span.End()
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatal(err)
	}
	if rec["trace_id"] != span.SpanContext().TraceID().String() || rec["span_id"] != span.SpanContext().SpanID().String() || rec["service"] != "executor" {
		t.Errorf("record %v", rec)
	}
	buf.Reset()
	log.Info("no span")
	if bytes.Contains(buf.Bytes(), []byte("trace_id")) {
		t.Errorf("trace id without a span: %s", buf.Bytes())
	}
}

// A key given by With and again by With or the record is written once, the latest value
// winning; keys inside a group are the group's. Every line reads with a decoder that
// refuses duplicate keys.
func TestLogHandlerWritesEachKeyOnce(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(LogHandler{Handler: slog.NewJSONHandler(&buf, nil)}).With("service", "executor", "replica", "r1")
	log.With("service", "executor").Info("ready", "service", "executor", "replicas", 2)
	log.With("service", "parser").Warn("call", "outcome", "timeout")
	log.WithGroup("g").Info("grouped", "service", "inner")
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	if len(lines) != 3 {
		t.Fatalf("%d lines: %s", len(lines), buf.Bytes())
	}
	want := []map[string]string{
		{"service": "executor", "replica": "r1", "replicas": "2"},
		{"service": "parser", "replica": "r1", "outcome": "timeout"},
		{"service": "executor", "replica": "r1"},
	}
	for i, line := range lines {
		keys, err := telemetrytest.StrictKeys(line)
		if err != nil {
			t.Errorf("line %d: %v: %s", i, err, line)
			continue
		}
		for k, v := range want[i] {
			if keys[k] != v {
				t.Errorf("line %d: %s = %q, want %q: %s", i, k, keys[k], v, line)
			}
		}
	}
}

func TestEnabled(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want bool
	}{
		{"nothing set", nil, false},
		{"endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://jaeger:4318"}, true},
		{"traces endpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://jaeger:4318/v1/traces"}, true},
		{"disabled", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_SDK_DISABLED": "true"}, false},
		{"exporter none", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_TRACES_EXPORTER": "none"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Enabled(func(k string) string { return tt.env[k] }); got != tt.want {
				t.Errorf("Enabled = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestResource(t *testing.T) {
	t.Setenv("OTEL_SERVICE_NAME", "")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "")
	res, err := Resource(context.Background(), "toolbus-executor")
	if err != nil {
		t.Fatal(err)
	}
	attrs := map[string]string{}
	for _, kv := range res.Attributes() {
		attrs[string(kv.Key)] = kv.Value.Emit()
	}
	if attrs["service.name"] != "toolbus-executor" || attrs["service.version"] == "" || len(attrs["service.instance.id"]) != 36 {
		t.Errorf("resource %v: want service.name, service.version and a UUID service.instance.id", attrs)
	}
	again, _ := Resource(context.Background(), "toolbus-executor")
	if id, _ := again.Set().Value("service.instance.id"); id.AsString() != attrs["service.instance.id"] {
		t.Errorf("service.instance.id changed within one process: %s, %s", id.AsString(), attrs["service.instance.id"])
	}
	// The operator's environment wins.
	t.Setenv("OTEL_SERVICE_NAME", "executor-eu")
	res, err = Resource(context.Background(), "toolbus-executor")
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := res.Set().Value("service.name"); v.AsString() != "executor-eu" {
		t.Errorf("service.name = %q, want OTEL_SERVICE_NAME's", v.AsString())
	}
}
