package toolbus_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/toolbus/toolbus/internal/cli"
	"github.com/toolbus/toolbus/internal/mcptest"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolbus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// Secrets of the configuration — a key in a server's URL query, a bearer token in its
// headers, both from ${VAR} — appear in no log line, no health status (bucket and
// `toolbus health --json`), no error message a model reads and no span, while the server
// they belong to fails every call and probe.
func TestSecretsDoNotLeak(t *testing.T) {
	t.Parallel()
	const key, token = "canary-key-7f3a9", "canary-token-c41d"
	url := bustest.Server(t)
	cfg, err := config.Parse([]byte(fmt.Sprintf(`{
		"mcpServers": {"probe": {"type": "http", "url": "http://127.0.0.1:%d/mcp?api_key=${CANARY_KEY}",
			"headers": {"Authorization": "Bearer ${CANARY_TOKEN}"}, "timeout": "2s", "retry": {"maxAttempts": 2}}},
		"health": {"interval": "200ms"}}`, mcptest.FreePort(t))), "secrets.json", func(k string) (string, bool) {
		switch k {
		case "CANARY_KEY":
			return key, true
		case "CANARY_TOKEN":
			return token, true
		}
		return "", false
	})
	if err != nil {
		t.Fatal(err)
	}
	var logs bustest.LogBuffer
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nc, _ := bustest.Connect(t, url, nats.Name("services"))
	n, err := toolbus.Start(ctx, toolbus.Options{Provision: true, Conn: nc, Config: cfg, TracerProvider: tp,
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); n.Wait() })
	onc, _ := bustest.Connect(t, url)
	c, err := client.New(onc)
	if err != nil {
		t.Fatal(err)
	}
	clean := func(what, text string) {
		t.Helper()
		if strings.Contains(text, key) || strings.Contains(text, token) {
			t.Errorf("%s holds a secret:\n%.2000s", what, text)
		}
	}

	out, err := c.Ask(ctx, "secrets", `<tool_call>{"name": "probe__lookup", "arguments": {}}</tool_call>`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := out.Results[0]; r.Success || (r.Error.Code != messages.CodeServerUnavailable && r.Error.Code != messages.CodeTimeout) {
		t.Errorf("result %+v, want the server unreachable", r)
	}
	clean("the output", out.Text)

	// healthd has probed and failed, and stored why.
	var health bytes.Buffer
	for !strings.Contains(health.String(), `"error"`) && ctx.Err() == nil {
		health.Reset()
		if code := cli.Main(ctx, []string{"health", "--json", "--nats", url}, cli.Env{Stdout: &health, Stderr: &health}); code != 0 {
			t.Fatalf("toolbus health: exit %d: %s", code, health.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(health.String(), "probe") {
		t.Errorf("toolbus health --json: %s", health.String())
	}
	clean("toolbus health --json", health.String())

	if !strings.Contains(logs.String(), "probe") {
		t.Errorf("the logs say nothing of the failing server:\n%.2000s", logs.String())
	}
	clean("the logs", logs.String())
	for _, s := range rec.Ended() {
		text := s.Name() + " " + s.Status().Description
		for _, a := range s.Attributes() {
			text += " " + a.Value.Emit()
		}
		for _, e := range s.Events() {
			text += " " + e.Name
			for _, a := range e.Attributes {
				text += " " + a.Value.Emit()
			}
		}
		clean("span "+s.Name(), text)
	}
}

// A server whose command does not exist: the model is told why, not only that it is down,
// on the first call and on the calls the breaker then refuses.
func TestUnavailableSaysWhy(t *testing.T) {
	t.Parallel()
	p := startMCPPipeline(t, mcpConfig(t, `{"mcpServers": {"ghost": {"command": "/nonexistent/ghost-mcp", "timeout": "3s"}}}`), nil)
	for i := range 3 {
		r := p.ask(mcpCall{"ghost__lookup", map[string]any{}})
		mcpFailed(t, r[0], messages.CodeServerUnavailable)
		if r[0].Error != nil && !strings.Contains(r[0].Error.Message, "no such file") {
			t.Errorf("call %d: %q does not say why", i, r[0].Error.Message)
		}
	}
}
