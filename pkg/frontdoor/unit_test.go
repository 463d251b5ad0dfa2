package frontdoor

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolbus/toolbus/pkg/messages"
)

// The request id goes in _meta; the arguments stay as the client wrote them, byte for
// byte (spacing, escapes, number spellings), and anything that is not a tools/call is
// left alone.
func TestMarkCalls(t *testing.T) {
	args := `{"q": "a<b & \u00e9",  "n": 1.50e2}`
	tests := []struct {
		name    string
		body    string
		changed bool
		wantID  string
	}{
		{name: "a call", body: `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t","arguments":` + args + `}}`, changed: true, wantID: `7`},
		{name: "a string id and _meta of its own", body: `{"jsonrpc":"2.0","id":"a-1","method":"tools/call","params":{"_meta":{"progressToken":3,"toolbus/request-id":"forged"},"name":"t","arguments":` + args + `}}`, changed: true, wantID: `"a-1"`},
		{name: "a batch", body: `[{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"t","arguments":` + args + `}}]`, changed: true, wantID: `2`},
		{name: "another method", body: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`},
		{name: "a notification", body: `{"jsonrpc":"2.0","method":"tools/call","params":{}}`},
		{name: "not JSON", body: `{"jsonrpc":`},
		{name: "params not an object", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[1]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, changed := markCalls([]byte(tt.body))
			if changed != tt.changed {
				t.Fatalf("changed %v: %s", changed, out)
			}
			if !changed {
				return
			}
			if !bytes.Contains(out, []byte(`"arguments":`+args)) {
				t.Errorf("the arguments changed: %s", out)
			}
			msg := out
			if out[0] == '[' {
				var batch []json.RawMessage
				if err := json.Unmarshal(out, &batch); err != nil {
					t.Fatal(err)
				}
				msg = batch[len(batch)-1]
			}
			var m struct {
				Params struct {
					Meta map[string]json.RawMessage `json:"_meta"`
				} `json:"params"`
			}
			if err := json.Unmarshal(msg, &m); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if got := string(m.Params.Meta[MetaRequestID]); got != tt.wantID {
				t.Errorf("request id %s, want %s", got, tt.wantID)
			}
		})
	}
}

// The same session, request id, tool and arguments make the same response id; another
// of any, another.
func TestResponseID(t *testing.T) {
	args := json.RawMessage(`{"a":1}`)
	a := ResponseID("S1", json.RawMessage(`7`), "t", args)
	for _, other := range []string{
		ResponseID("S2", json.RawMessage(`7`), "t", args),
		ResponseID("S1", json.RawMessage(`8`), "t", args),
		ResponseID("S1", json.RawMessage(`"7"`), "t", args),
		ResponseID("S1", json.RawMessage(`7`), "u", args),
		ResponseID("S1", json.RawMessage(`7`), "t", json.RawMessage(`{"a":2}`)),
		ResponseID("S1", json.RawMessage(`7`), "t", nil),
		ResponseID("S1", json.RawMessage(`7t`), "", args), // the parts are apart
	} {
		if other == a {
			t.Errorf("%s: the response id does not follow the session, request id, tool and arguments", other)
		}
	}
	if a != ResponseID("S1", json.RawMessage(`7`), "t", args) {
		t.Error("the same request has another response id")
	}
}

func TestConversation(t *testing.T) {
	tests := []struct {
		name, tenant, session, named, want string
		wantErr                            bool
	}{
		{name: "the session's", session: "ABC234", want: "mcp-ABC234"},
		{name: "a tenant's session", tenant: "acme", session: "ABC234", want: "acme.mcp-ABC234"},
		{name: "named", tenant: "acme", session: "ABC234", named: "c1", want: "acme.c1"},
		{name: "named with its tenant", tenant: "acme", named: "acme.c1", want: "acme.c1"},
		{name: "another tenant's", tenant: "acme", named: "globex.c1", wantErr: true},
		{name: "a tenant's by the default tenant", named: "acme.c1", wantErr: true},
		{name: "not a conversation id", named: "a b", wantErr: true},
		{name: "no session", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Conversation(tt.tenant, tt.session, tt.named)
			if (err != nil) != tt.wantErr || got != tt.want && !tt.wantErr {
				t.Errorf("got %q, %v", got, err)
			}
		})
	}
}

type noFetch struct{}

func (noFetch) FetchResult(context.Context, *messages.StoredResult) ([]byte, error) {
	return []byte(`{"whole":true}`), nil
}
func (noFetch) FetchContent(_ context.Context, c messages.Content) ([]byte, error) { return c.Decode() }

func TestResult(t *testing.T) {
	ctx := context.Background()
	res, _ := Result(ctx, noFetch{}, messages.OutputResult{Success: true, Result: json.RawMessage(`"hello"`)})
	if res.IsError || res.Content[0].(*mcp.TextContent).Text != "hello" || res.StructuredContent != nil {
		t.Errorf("a string: %+v", res)
	}
	res, _ = Result(ctx, noFetch{}, messages.OutputResult{Success: true, Result: json.RawMessage(`{"a":1}`),
		Content: []messages.Content{{Type: messages.ContentImage, MimeType: "image/png", Data: "iVBO"}}})
	if string(res.StructuredContent.(json.RawMessage)) != `{"a":1}` || len(res.Content) != 2 {
		t.Fatalf("an object with an image: %+v", res)
	}
	if img, ok := res.Content[1].(*mcp.ImageContent); !ok || img.MIMEType != "image/png" || len(img.Data) != 3 {
		t.Errorf("the image: %#v", res.Content[1])
	}
	res, _ = Result(ctx, noFetch{}, messages.OutputResult{Success: true, Result: json.RawMessage(`{"truncated":true}`), Stored: &messages.StoredResult{Name: "x"}})
	if string(res.StructuredContent.(json.RawMessage)) != `{"whole":true}` {
		t.Errorf("a stored result is not read whole: %+v", res)
	}
	res, _ = Result(ctx, noFetch{}, messages.OutputResult{Error: &messages.ResultError{Code: messages.CodeTimeout, Message: "too slow"}})
	if !res.IsError || res.Meta[MetaErrorCode] != "timeout" || res.Content[0].(*mcp.TextContent).Text != "timeout: too slow" {
		t.Errorf("a failure: %+v", res)
	}
}
