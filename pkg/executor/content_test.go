package executor

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/claims/claimstest"
	"github.com/toolbus/toolbus/pkg/mcpwire"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/results"
)

// imageServer is a go-sdk MCP server, in process, whose tool "shot" answers with a
// line of text and a PNG image of the size it is asked for.
func imageServer(t *testing.T) *mcpwire.Pool {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "browser"}, nil)
	type args struct {
		Bytes int `json:"bytes"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "shot", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, a args) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.TextContent{Text: "the page:"},
				&mcp.ImageContent{MIMEType: "image/png", Data: pngOf(a.Bytes)},
			}}, nil, nil
		})
	p, err := mcpwire.NewPool(map[string]mcpwire.ServerConfig{"browser": {Command: "in-memory"}}, &mcpwire.Options{
		Dial: func(ctx context.Context, _ string) (mcp.Transport, error) {
			ct, st := mcp.NewInMemoryTransports()
			_, err := srv.Connect(ctx, st, nil)
			return ct, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// pngOf is n bytes that start as a PNG does.
func pngOf(n int) []byte {
	b := bytes.Repeat([]byte{0x5a}, n)
	copy(b, "\x89PNG\r\n\x1a\n")
	return b
}

// An MCP tool's image travels as a content block of its result, which the model's value
// names instead of holding its base64; an image too large to travel inline is kept
// whole in the results bucket, named by the call id and its place, and the block names
// it; without a store its data is left out and the block says so.
func TestContentBlocksAreKept(t *testing.T) {
	const limit = 16 << 10
	pool := imageServer(t)
	store, js := resultsBucket(t)
	tests := []struct {
		name       string
		bytes      int
		store      results.Fitter
		wantInline bool
		wantStored bool
	}{
		{name: "small: inline", bytes: 2000, store: store, wantInline: true},
		{name: "large: stored", bytes: 200_000, store: store, wantStored: true},
		{name: "large, no store: left out", bytes: 200_000},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			s := &Stage{Claims: &claimstest.Memory{}, MaxInlineResultBytes: limit, Results: tt.store, StoreWait: 200 * time.Millisecond,
				Exec: &Executor{Router: NewRouter(MCPBackend{Pool: pool})}}
			conv := "shots"
			call := messages.ToolCall{ID: messages.CallID(conv, "r", i), ResponseID: "r", Conversation: conv, Index: i, Count: 3,
				Tool: "browser__shot", Arguments: json.RawMessage(`{"bytes": ` + strconv.Itoa(tt.bytes) + `}`)}
			out, err := deliver(s, ctx, call, &bus.Delivery{Delivered: 1})
			if err != nil || len(out) != 1 {
				t.Fatalf("%d messages, %v", len(out), err)
			}
			if len(out[0].Body) > limit+2048 {
				t.Errorf("the answer is %d bytes, over the inline limit %d", len(out[0].Body), limit)
			}
			var res messages.ToolResult
			if err := messages.DecodeResult(out[0].Body, &res); err != nil || !res.Success {
				t.Fatalf("%+v, %v", res, err)
			}
			want := `"the page:\n[image: image/png, ` + messages.HumanBytes(tt.bytes) + `, content 1]"`
			if string(res.Result) != want {
				t.Errorf("the model reads %s, want %s", res.Result, want)
			}
			if len(res.Content) != 1 || res.Content[0].Type != "image" || res.Content[0].MimeType != "image/png" || res.Content[0].Size != tt.bytes {
				t.Fatalf("content %+v, want one image/png of %d bytes", res.Content, tt.bytes)
			}
			c := res.Content[0]
			var got []byte
			switch {
			case tt.wantInline:
				if c.Stored != nil || c.Omitted {
					t.Errorf("stored %+v, omitted %v; want it inline", c.Stored, c.Omitted)
				}
				got, _ = base64.StdEncoding.DecodeString(c.Data)
			case tt.wantStored:
				if c.Data != "" || c.Stored == nil || c.Stored.Name != call.ID+"/content/1" || c.Stored.Size != tt.bytes {
					t.Fatalf("data %d bytes, stored %+v; want it stored as %s/content/1", len(c.Data), c.Stored, call.ID)
				}
				if got, err = results.Fetch(ctx, js, c.Stored); err != nil {
					t.Fatal(err)
				}
			default:
				if c.Data != "" || c.Stored != nil || !c.Omitted {
					t.Fatalf("data %d bytes, stored %+v, omitted %v; want it left out", len(c.Data), c.Stored, c.Omitted)
				}
				return
			}
			if !bytes.Equal(got, pngOf(tt.bytes)) {
				t.Errorf("the image is %d bytes, not the server's %d", len(got), tt.bytes)
			}
		})
	}
}
