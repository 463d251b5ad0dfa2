package mcpwire

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// FuzzDirectAnswer feeds any text to the reader of a tools/call's event stream and to
// the reader of its result: neither panics, a stream yields the call's own response or
// none, and a result read is one the SDK's decoder also reads (text blocks, structured
// content and isError alike).
func FuzzDirectAnswer(f *testing.F) {
	for _, seed := range []string{
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"toolbus-1\",\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}}\n\n",
		"id: e1\nretry: 10\ndata: \n\n",
		"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\r\n\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"toolbus-1\",\"error\":{\"code\":-32602,\"message\":\"no\"}}\r\n\r\n",
		"data: {\"jsonrpc\":\"2.0\",\"id\":\"toolbus-1\",\n: a comment\ndata: \"result\":{\"structuredContent\":{\"a\":1},\"content\":[]}}\n\n",
		"event: other\ndata: {}\n\ndata: not json\n\n",
		`{"content":[{"type":"image","data":"AQI=","mimeType":"image/png"}],"isError":true}`,
		`{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"structuredContent":null}`,
		`{"resultType":"input_required","inputRequests":{}}`,
		// Blocks kept for the orchestrator, named in the model's text (messages.Content).
		`{"content":[{"type":"text","text":"a"},{"type":"image","data":"AQI=","mimeType":"image/png"},{"type":"audio","data":"UklGRg==","mimeType":"audio/wav"},` +
			`{"type":"resource","resource":{"uri":"file:///r.pdf","blob":"AQI="}},{"type":"resource","resource":{"uri":"demo://t","text":"t"}},{"type":"resource_link","uri":"demo://l","name":"l"}]}`,
		`{"structuredContent":{"n":1},"content":[{"type":"image","data":"AQI=","mimeType":"image/png"}]}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		d := &directCalls{peer: &peer{}, maxMessage: 1 << 16}
		res, last, _, err := d.events(context.Background(), `"toolbus-1"`, strings.NewReader(text))
		if res != nil && (err != nil || last != "" || string(res.ID) != `"toolbus-1"`) {
			t.Fatalf("a response %s with err %v, last %q", res.ID, err, last)
		}
		got, err := decodeCallResult(json.RawMessage(text))
		if err != nil {
			return
		}
		var want mcp.CallToolResult
		if json.Unmarshal([]byte(text), &want) != nil {
			return // the SDK is stricter (unknown content types, say): toolbus reads more
		}
		a, akept, anotice, aerr := resultValue("s", "t", got)
		b, bkept, bnotice, berr := resultValue("s", "t", &want)
		if !reflect.DeepEqual(akept, bkept) || anotice != bnotice {
			t.Fatalf("%q: toolbus keeps %+v (%q); the SDK %+v (%q)", text, akept, anotice, bkept, bnotice)
		}
		// The same value: toolbus keeps structured content as written, where the SDK
		// sorts its keys and rounds its numbers to float64.
		var av, bv any
		if (aerr == nil) != (berr == nil) || (aerr != nil && aerr.Error() != berr.Error()) ||
			(aerr == nil && (json.Unmarshal(a, &av) != nil || json.Unmarshal(b, &bv) != nil || !reflect.DeepEqual(av, bv))) {
			t.Fatalf("%q: toolbus reads %s, %v; the SDK %s, %v", text, a, aerr, b, berr)
		}
	})
}
