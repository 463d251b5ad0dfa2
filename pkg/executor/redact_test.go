package executor

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/claims/claimstest"
	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/mcpwire"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/redact"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// The error a model reads never holds a secret: the configuration's secrets (here a key
// and a token, as ${VAR} values give them) wherever a tool's or a server's error echoes
// them, and the password and query values of any URL in it, configured or not. The
// masked text is what is stored for a redelivery, what the dead-letter copy keeps, and
// what the attempts' spans say of a retry.
func TestModelFacingErrorsAreRedacted(t *testing.T) {
	const key, token = "canary-key-7f3a9", "canary-token-c41d"
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://127.0.0.1:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port) + "/mcp?api_key=" + key
	l.Close() // nothing listens there: every call fails, its error naming the URL
	pool, err := mcpwire.NewPool(map[string]mcpwire.ServerConfig{
		"tickets": {Type: "http", URL: down, Headers: map[string]string{"Authorization": "Bearer " + token},
			Timeout: messages.Duration(5 * time.Second), Tools: []mcpwire.DeclaredTool{{Name: "create", InputSchema: json.RawMessage(`{"type":"object"}`)}}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })

	reg := localtools.New()
	fail := func(name string, info messages.ToolInfo, err error) {
		info.Name = name
		if err := reg.Add(localtools.Tool{Info: info, Run: func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, err }}); err != nil {
			t.Fatal(err)
		}
	}
	fail("echo_key", messages.ToolInfo{}, errors.New("the upstream refused key "+key+" (and token "+token+")"))
	fail("echo_url", messages.ToolInfo{}, messages.Errorf(messages.CodeToolError,
		"GET https://bob:hunter2-pw@api.example.com/v1/items?sig=zq81-sig-value failed"))
	fail("flaky_key", messages.ToolInfo{Idempotent: true}, &messages.ToolError{Code: messages.CodeServerUnavailable,
		Message: "503 from https://api.example.com/?key=" + key})

	secrets := &redact.Current{}
	secrets.Set(redact.New(key, token))
	tests := []struct {
		name     string
		tool     string
		last     bool // the consumer's last delivery (the third): the answer is also dead-lettered
		wantCode messages.ErrorCode
		// wantSaid is what the masked message still tells the model.
		wantSaid string
		// parsed is the parser's verdict on the call, quoting what the model wrote.
		parsed string
	}{
		{name: "the parser's verdict quoting a secret the model wrote", tool: "echo_key", wantCode: messages.CodeInvalidArguments, wantSaid: "argument \"a\"",
			parsed: "argument \"a\": type: " + key + " has type \"string\", want integer"},
		{name: "a tool's error echoing configured secrets", tool: "echo_key", wantCode: messages.CodeToolError, wantSaid: "the upstream refused key " + redact.Mask},
		{name: "a URL's password and query values", tool: "echo_url", wantCode: messages.CodeToolError, wantSaid: "api.example.com"},
		{name: "retried, then answered on the last delivery", tool: "flaky_key", last: true, wantCode: messages.CodeServerUnavailable, wantSaid: "503 from"},
		{name: "an MCP server that cannot be reached", tool: "tickets__create", last: true, wantCode: messages.CodeServerUnavailable, wantSaid: "tickets"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			cl := &claimstest.Memory{}
			s := &Stage{Claims: cl, Exec: &Executor{Router: NewRouter(LocalBackend{Registry: reg}, MCPBackend{Pool: pool}), Redact: secrets,
				Tracer: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("test"),
				Retry:  RetryPolicy{MaxAttempts: 2, InitialInterval: time.Millisecond, MaxInterval: time.Millisecond}}}
			call := messages.ToolCall{ID: "c/r/0", ResponseID: "r", Conversation: "c", Count: 1, Tool: tt.tool, Arguments: json.RawMessage(`{}`)}
			if tt.parsed != "" {
				call.Error = &messages.ResultError{Code: messages.CodeInvalidArguments, Message: tt.parsed}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			d := &bus.Delivery{Delivered: 1}
			if tt.last {
				d = &bus.Delivery{Delivered: 3, Last: true}
			}
			out, err := deliver(s, ctx, call, d)
			if err != nil || len(out) == 0 {
				t.Fatalf("Execute: %d messages, %v", len(out), err)
			}
			var res messages.ToolResult
			if err := json.Unmarshal(out[0].Body, &res); err != nil {
				t.Fatal(err)
			}
			if res.Success || res.Error == nil || res.Error.Code != tt.wantCode {
				t.Fatalf("answered %+v (%+v), want %s", res, res.Error, tt.wantCode)
			}
			msg := res.Error.Message
			if !strings.Contains(msg, tt.wantSaid) {
				t.Errorf("the model is not told why: %q does not say %q", msg, tt.wantSaid)
			}
			clean := func(what, text string) {
				t.Helper()
				for _, secret := range []string{key, token, "hunter2-pw", "zq81-sig-value"} {
					if strings.Contains(text, secret) {
						t.Errorf("%s holds the secret %q: %s", what, secret, text)
					}
				}
			}
			clean("the answer", string(out[0].Body))
			if tt.last != (len(out) == 2) {
				t.Fatalf("%d messages, want the dead-letter copy %v", len(out), tt.last)
			}
			if tt.last {
				clean("the dead-letter copy", string(out[1].Body))
			}
			// A redelivery answers what was stored: the masked text. (A parser's verdict
			// ran nothing and stored nothing: a redelivery answers it again.)
			if tt.parsed == "" {
				if again, err := cl.Begin(ctx, call.ID, ""); err != nil || again.Result == nil {
					t.Errorf("no stored result: %+v, %v", again, err)
				} else {
					clean("the stored result", again.Result.Error.Message)
				}
			}
			for _, sp := range rec.Ended() {
				text := sp.Name() + " " + sp.Status().Description
				for _, a := range sp.Attributes() {
					text += " " + a.Value.Emit()
				}
				clean("span "+sp.Name(), text)
			}
		})
	}
}

// The redactor a configuration reload sets is the one the next call's answer is masked
// with.
func TestRedactionFollowsTheConfiguration(t *testing.T) {
	var runs atomic.Int32
	reg := localtools.New()
	reg.Add(localtools.Tool{Info: messages.ToolInfo{Name: "t"}, Run: func(context.Context, json.RawMessage) (json.RawMessage, error) {
		runs.Add(1)
		return nil, errors.New("rotated secret new-secret-91a2 refused, old was old-secret-4be1")
	}})
	secrets := &redact.Current{}
	secrets.Set(redact.New("old-secret-4be1"))
	s := &Stage{Claims: &claimstest.Memory{}, Exec: &Executor{Router: NewRouter(LocalBackend{Registry: reg}), Redact: secrets}}
	answer := func(id string) string {
		t.Helper()
		out, err := deliver(s, context.Background(), messages.ToolCall{ID: id, ResponseID: id, Conversation: "c", Count: 1, Tool: "t",
			Arguments: json.RawMessage(`{}`)}, &bus.Delivery{Delivered: 1})
		if err != nil || len(out) != 1 {
			t.Fatalf("Execute: %d messages, %v", len(out), err)
		}
		var res messages.ToolResult
		if err := json.Unmarshal(out[0].Body, &res); err != nil || res.Error == nil {
			t.Fatalf("%s: %v", out[0].Body, err)
		}
		return res.Error.Message
	}
	if msg := answer("c/r1/0"); strings.Contains(msg, "old-secret-4be1") || !strings.Contains(msg, "new-secret-91a2") {
		t.Errorf("before the reload: %q", msg)
	}
	secrets.Set(redact.New("new-secret-91a2"))
	if msg := answer("c/r2/0"); strings.Contains(msg, "new-secret-91a2") {
		t.Errorf("after the reload: %q", msg)
	}
}
