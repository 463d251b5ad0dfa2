package toolbus_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolbus"
)

// Nothing the model wrote is echoed unbounded: a call whose tool name, or an argument
// a message quotes, is 490 KB is answered with an output of a few kilobytes saying the
// call failed — not dead-lettered for an output over the payload limit — and no log
// line, span name or attribute repeats it whole either.
func TestHugeEchoesAreAnswered(t *testing.T) {
	t.Parallel()
	connect := startBus(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	local := localtools.New()
	local.Add(localtools.Tool{
		Info: messages.ToolInfo{Name: "lookup", ReadOnly: true,
			InputSchema: json.RawMessage(`{"type": "object", "properties": {"city": {"type": "string", "pattern": "^[A-Z][a-z]+$"}, "mode": {"enum": ["a", "b"]}}, "required": ["city"]}`)},
		Run: func(context.Context, json.RawMessage) (json.RawMessage, error) { return json.RawMessage(`{}`), nil },
	})
	var logs bustest.LogBuffer
	rec := tracetest.NewSpanRecorder()
	nc := connect("node")
	n, err := toolbus.Start(ctx, toolbus.Options{Provision: true, Conn: nc, Tools: local,
		Services:       []string{toolbus.Parser, toolbus.Executor, toolbus.Formatter},
		Logger:         slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); n.Wait() }()
	c, err := client.New(connect("orchestrator"))
	if err != nil {
		t.Fatal(err)
	}
	huge := strings.Repeat("x", 490<<10)
	tests := []struct {
		name, text string
		code       messages.ErrorCode
		// tail is what the error message must still end with.
		tail string
	}{
		{"tool name", `<tool_call>{"name": "` + huge + `", "arguments": {}}</tool_call>`, messages.CodeUnknownTool, "available tools: clock, dispatch_engineering, execute_tool, lookup"},
		{"pythonic tool name", `[` + huge + `(city="Paris")]`, messages.CodeUnknownTool, "available tools: clock, dispatch_engineering, execute_tool, lookup"},
		{"argument against a pattern", `<tool_call>{"name": "lookup", "arguments": {"city": "` + huge + `"}}</tool_call>`, messages.CodeInvalidArguments, `does not match regular expression "^[A-Z][a-z]+$"`},
		{"arguments as a string", `<tool_call>{"name": "lookup", "arguments": "{\"city\": ` + huge + `"}</tool_call>`, messages.CodeInvalidArguments, `does not match regular expression "^[A-Z][a-z]+$"`},
		{"argument against an enum", `<tool_call>{"name": "lookup", "arguments": {"city": "Paris", "mode": "` + huge + `"}}</tool_call>`, messages.CodeInvalidArguments, "does not equal any of: [a b]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			actx, cancel := context.WithTimeout(ctx, 2*time.Minute) // a bound on a hang, not a speed
			defer cancel()
			out, err := c.Ask(actx, "echoes", tt.text, nil)
			if err != nil {
				t.Fatal(err)
			}
			body := messages.AppendOutput(nil, out)
			if len(out.Results) != 1 || out.Results[0].Success || out.Results[0].Error == nil || out.Results[0].Error.Code != tt.code {
				t.Fatalf("results %.600s, want one failed with %s", body, tt.code)
			}
			if msg := out.Results[0].Error.Message; !strings.Contains(msg, " KB cut)") || !strings.HasSuffix(msg, tt.tail) {
				t.Errorf("error message %.200q … %q: want it cut, ending in %q", msg, msg[max(0, len(msg)-200):], tt.tail)
			}
			if len(body) > 4*messages.MaxEchoedError {
				t.Errorf("output of %d bytes", len(body))
			}
		})
	}
	js, _ := jetstream.New(nc)
	st, err := js.Stream(ctx, messages.StreamDead)
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := st.Info(ctx); info.State.Msgs != 0 {
		t.Errorf("%d dead letters", info.State.Msgs)
	}
	lines := bufio.NewScanner(bytes.NewReader([]byte(logs.String())))
	lines.Buffer(nil, 4<<20)
	for lines.Scan() {
		if len(lines.Bytes()) > 2*messages.MaxEchoedError {
			t.Errorf("a log line of %d bytes: %.200s", len(lines.Bytes()), lines.Bytes())
		}
	}
	for _, s := range rec.Ended() {
		if len(s.Name()) > messages.MaxEchoedName || len(s.Status().Description) > messages.MaxEchoedError {
			t.Errorf("span %.100q: name of %d bytes, status of %d", s.Name(), len(s.Name()), len(s.Status().Description))
		}
		for _, a := range s.Attributes() {
			if v := a.Value.Emit(); len(v) > messages.MaxEchoedError {
				t.Errorf("span %q: attribute %s of %d bytes", s.Name(), a.Key, len(v))
			}
		}
	}
}
