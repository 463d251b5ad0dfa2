package toolbus_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/toolbus/toolbus/internal/asyncapitest"
	"github.com/toolbus/toolbus/pkg/messages"
)

// An MCP tool's image (server-everything's get-tiny-image, over stdio and streamable
// HTTP) reaches the orchestrator as an image block of its result, which pkg/client hands
// over as bytes; the text the model reads names it in its place and holds no base64.
// The output on the wire fits the protocol's document.
func TestImageResultsAreKeptAsImages(t *testing.T) {
	t.Parallel()
	everything := mcpNPMScript(t, mcpEverythingPkg)
	_, httpURL := mcpStartEverything(t, "streamableHttp", 0)
	p := startMCPPipeline(t, mcpConfig(t, `{"mcpServers": {
		"everything": {"command": "node", "args": ["`+everything+`", "stdio"]},
		"everything_http": {"type": "http", "url": "`+httpURL+`/mcp"}}}`), nil)
	doc := asyncapitest.Load(t)
	raw := make(chan *nats.Msg, 4)
	sub, err := p.connect("watcher").ChanSubscribe(messages.OutputSubject("pictures"), raw)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := p.client.Ask(ctx, "pictures", `<tool_call>{"name": "everything__get-tiny-image", "arguments": {}}</tool_call>
<tool_call>{"name": "everything_http__get-tiny-image", "arguments": {}}</tool_call>`, nil)
	if err != nil || len(out.Results) != 2 {
		t.Fatalf("%v %+v", err, out)
	}
	if strings.Contains(out.Text, "iVBORw0KGgo") {
		t.Errorf("the model's text holds the image's base64: %.400s", out.Text)
	}
	for i, r := range out.Results {
		mcpOK(t, r, "Here's the image you requested:", `[image: image/png, `, `, content 1]`, "The image above is the MCP logo.")
		if len(r.Content) != 1 || r.Content[0].Type != messages.ContentImage || r.Content[0].MimeType != "image/png" {
			t.Fatalf("result %d: content %+v, want one image/png", i, r.Content)
		}
		png, err := p.client.FetchContent(ctx, r.Content[0])
		if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) || len(png) != r.Content[0].Size {
			t.Errorf("result %d: %d bytes (%v), want the PNG of %d bytes", i, len(png), err, r.Content[0].Size)
		}
		if want := "[image: image/png, " + messages.HumanBytes(len(png)) + ", content 1]"; !strings.Contains(string(r.Result), want) {
			t.Errorf("result %d: %s does not name the image as %s", i, r.Result, want)
		}
		if _, err := base64.StdEncoding.DecodeString(r.Content[0].Data); err != nil {
			t.Errorf("result %d: the image's data is not base64: %v", i, err)
		}
	}
	select {
	case m := <-raw:
		if err := doc.Check(m.Subject, m.Header, m.Data); err != nil {
			t.Error(err)
		}
	case <-time.After(10 * time.Second):
		t.Error("no output seen on the wire")
	}
}
