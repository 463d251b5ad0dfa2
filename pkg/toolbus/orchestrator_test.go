package toolbus

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/redact"
)

// readCompletion reads an orchestrator's answer to a sampling request: a completion
// becomes the go-sdk's result, anything else a clear error, never a result the server
// would misread.
func TestReadCompletion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		body    string
		want    string // the completion's text
		wantErr string
	}{
		{name: "text", body: `{"content": {"type": "text", "text": "42"}, "model": "m"}`, want: "42"},
		{name: "user role", body: `{"role": "user", "content": {"type": "text", "text": "hi"}}`, want: "hi"},
		{name: "image", body: `{"content": {"type": "image", "mimeType": "image/png", "data": "AAAA"}}`},
		{name: "refused", body: `{"error": "no model for this"}`, wantErr: "refused: no model for this"},
		{name: "no content", body: `{"model": "m"}`, wantErr: "no content"},
		{name: "unknown block", body: `{"content": {"type": "video"}}`, wantErr: "not an MCP text, image or audio block"},
		{name: "another role", body: `{"role": "system", "content": {"type": "text", "text": "x"}}`, wantErr: `role "system"`},
		{name: "not JSON", body: `yes`, wantErr: "the orchestrator's answer"},
		{name: "content not an object", body: `{"content": "42"}`, wantErr: "not an MCP"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := readCompletion([]byte(tt.body))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("%+v, %v; want an error saying %q", res, err, tt.wantErr)
				}
				return
			}
			if err != nil || res.Content == nil {
				t.Fatalf("%+v, %v", res, err)
			}
			if tc, ok := res.Content.(*mcp.TextContent); ok && tc.Text != tt.want {
				t.Errorf("text %q, want %q", tc.Text, tt.want)
			}
		})
	}
}

// FuzzReadCompletion: whatever an orchestrator answers, readCompletion returns a
// completion of a known role with content the go-sdk can send, or an error; it never
// panics.
func FuzzReadCompletion(f *testing.F) {
	for _, s := range []string{
		`{"content": {"type": "text", "text": "42"}, "model": "m", "stop_reason": "endTurn"}`,
		`{"role": "user", "content": {"type": "audio", "mimeType": "audio/wav", "data": "UklGRg=="}}`,
		`{"error": "no"}`, `{}`, `null`, `[]`, `{"content": null}`, `{"content": {"type": "text"}}`,
		`{"content": {"type": "image", "data": "%%%"}}`, `{"role": 7}`, `{"content": {"type": "resource_link", "uri": "x"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		res, err := readCompletion(body)
		if err != nil {
			if res != nil {
				t.Fatalf("a result with an error: %+v, %v", res, err)
			}
			return
		}
		if res == nil || res.Content == nil || (res.Role != "assistant" && res.Role != "user") {
			t.Fatalf("%q: %+v", body, res)
		}
		if _, err := json.Marshal(res); err != nil {
			t.Fatalf("%q: the result cannot be sent: %v", body, err)
		}
	})
}

// What a server logs during a call reaches the conversation's progress subject marked
// with the call's id, with the configuration's secrets masked, as JSON still.
func TestPublishLogMasksSecrets(t *testing.T) {
	t.Parallel()
	const secret = "canary-7f3a9"
	nc, _ := bustest.Connect(t, bustest.Server(t))
	sub, err := nc.SubscribeSync(messages.ProgressSubject("c1"))
	if err != nil {
		t.Fatal(err)
	}
	secrets := &redact.Current{}
	secrets.Set(redact.New(secret))
	publish := publishLog(nc, secrets, slog.New(slog.DiscardHandler))
	for _, data := range []string{`"connected with ` + secret + `"`, `{"key":"` + secret + `","n":1}`} {
		publish(context.Background(), messages.CallLog{CallID: "c1/r1/0", Conversation: "c1", Server: "s", Tool: "s__t", Level: "info", Data: json.RawMessage(data)})
		m, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var l messages.CallLog
		if err := json.Unmarshal(m.Data, &l); err != nil || m.Header.Get(messages.HeaderLogOf) != "c1/r1/0" || l.CallID != "c1/r1/0" {
			t.Fatalf("%s (%v), headers %v", m.Data, err, m.Header)
		}
		if strings.Contains(string(m.Data), secret) || !json.Valid(l.Data) || !strings.Contains(string(l.Data), redact.Mask) {
			t.Errorf("published %s", m.Data)
		}
	}
}
