package formatter

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/results"
)

// pictured is result i of n of response id whose value names an image of size bytes,
// carried inline as an MCP tool's result carries it.
func pictured(id string, i, n, size int) messages.ToolResult {
	img := bytes.Repeat([]byte{byte('a' + i)}, size)
	return messages.ToolResult{CallID: messages.CallID("c1", id, i), ResponseID: id, Conversation: "c1", Index: i, Count: n, Tool: "shot", Success: true,
		Result:  json.RawMessage(`"[image: image/png, ` + messages.HumanBytes(size) + `, content 1]"`),
		Content: []messages.Content{{Type: messages.ContentImage, MimeType: "image/png", Data: base64.StdEncoding.EncodeToString(img), Size: size}}}
}

// A response's images count towards its output: those that would not fit their share are
// stored whole (their decoded bytes, named <call id>/content/1) while the text that names
// them travels inline, and the output fits the limit; a small image travels inline.
func TestFormatStoresLargeContent(t *testing.T) {
	const limit = 256 << 10
	store, gather, js, _ := storedBus(t)
	s := &Stage{Gather: gather, Results: store, MaxOutputBytes: limit}
	in := []messages.ToolResult{pictured("turn-1", 0, 3, 600), pictured("turn-1", 1, 3, 60_000), pictured("turn-1", 2, 3, 60_000)}
	o, body := output(t, s, in...)
	if len(body) > limit {
		t.Errorf("the output is %d bytes, over the limit %d", len(body), limit)
	}
	for i, r := range o.Results {
		if !bytes.Equal(r.Result, in[i].Result) || len(r.Content) != 1 {
			t.Fatalf("result %d: %s with %d blocks, want %s with one", i, r.Result, len(r.Content), in[i].Result)
		}
		c := r.Content[0]
		var got []byte
		var err error
		if i == 0 {
			if c.Stored != nil || c.Data != in[i].Content[0].Data {
				t.Errorf("result %d: stored %+v; want the small image inline", i, c.Stored)
			}
			got, err = c.Decode()
		} else {
			if c.Data != "" || c.Stored == nil || c.Stored.Name != in[i].CallID+"/content/1" || c.Stored.Size != in[i].Content[0].Size {
				t.Fatalf("result %d: %d bytes inline, stored %+v; want it stored as %s/content/1", i, len(c.Data), c.Stored, in[i].CallID)
			}
			got, err = results.Fetch(context.Background(), js, c.Stored)
		}
		if want, _ := in[i].Content[0].Decode(); err != nil || !bytes.Equal(got, want) {
			t.Errorf("result %d: %d bytes (%v), want the image's %d", i, len(got), err, len(want))
		}
	}
}
