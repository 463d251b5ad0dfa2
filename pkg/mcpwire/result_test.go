package mcpwire

import (
	"encoding/base64"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolbus/toolbus/pkg/messages"
)

func TestResultValue(t *testing.T) {
	text := func(s ...string) []mcp.Content {
		var out []mcp.Content
		for _, x := range s {
			out = append(out, &mcp.TextContent{Text: x})
		}
		return out
	}
	tests := []struct {
		name    string
		res     *mcp.CallToolResult
		want    string
		wantErr string
	}{
		{name: "structured wins over text", res: &mcp.CallToolResult{Content: text("ignored"), StructuredContent: map[string]int{"n": 1}}, want: `{"n":1}`},
		{name: "JSON text", res: &mcp.CallToolResult{Content: text(" [1,2] ")}, want: `[1,2]`},
		{name: "number text", res: &mcp.CallToolResult{Content: text("42")}, want: `42`},
		{name: "plain text", res: &mcp.CallToolResult{Content: text("hi there")}, want: `"hi there"`},
		{name: "texts joined", res: &mcp.CallToolResult{Content: text("a", "{}")}, want: `"a\n{}"`},
		{name: "no content", res: &mcp.CallToolResult{}, want: `null`},
		{name: "nil result", res: nil, want: `null`},
		{name: "error text", res: &mcp.CallToolResult{IsError: true, Content: text("boom")}, wantErr: "boom"},
		{name: "error structured", res: &mcp.CallToolResult{IsError: true, StructuredContent: map[string]string{"why": "x"}}, wantErr: `{"why":"x"}`},
		{name: "error without message", res: &mcp.CallToolResult{IsError: true}, wantErr: "the tool reported an error without a message"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, _, err := resultValue("s", "t", tt.res)
			if tt.wantErr != "" {
				var te *ToolError
				if !errors.As(err, &te) || te.Message != tt.wantErr {
					t.Fatalf("err = %v, want a *ToolError %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Errorf("got %s, %v; want %s", got, err, tt.want)
			}
		})
	}
}

func TestToolErrorKinds(t *testing.T) {
	tests := []struct {
		name        string
		err         ToolError
		wantInvalid bool
		wantUnknown bool
	}{
		{name: "isError", err: ToolError{Message: "x"}},
		{name: "invalid params", err: ToolError{Code: -32602, Message: "want an id"}, wantInvalid: true},
		{name: "unknown tool as invalid params", err: ToolError{Code: -32602, Message: `unknown tool "x"`}, wantUnknown: true},
		{name: "method not found", err: ToolError{Code: -32601, Message: "no"}, wantUnknown: true},
		{name: "other", err: ToolError{Code: -32000, Message: "db down"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.err.InvalidArguments() != tt.wantInvalid || tt.err.UnknownTool() != tt.wantUnknown {
				t.Errorf("InvalidArguments %v, UnknownTool %v", tt.err.InvalidArguments(), tt.err.UnknownTool())
			}
		})
	}
}

// Images, audio and embedded blobs are kept for the orchestrator and named in the text
// the model reads, in their place; an embedded text resource and a resource link are
// written out, the text resource kept too, after the named blocks (IsText). With
// structured content the blocks are kept and the named ones named in a notice.
func TestResultValueKeepsContent(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\n-not-really-an-image-")
	pdf := make([]byte, 3000)
	image := messages.Content{Type: "image", MimeType: "image/png", Data: base64.StdEncoding.EncodeToString(png), Size: len(png)}
	tests := []struct {
		name       string
		res        *mcp.CallToolResult
		want       string
		wantKept   []messages.Content
		wantNotice string
	}{
		{name: "image between texts",
			res:  &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Here:"}, &mcp.ImageContent{MIMEType: "image/png", Data: png}, &mcp.TextContent{Text: "above"}}},
			want: `"Here:\n[image: image/png, 29 bytes, content 1]\nabove"`, wantKept: []messages.Content{image}},
		{name: "audio and a blob",
			res: &mcp.CallToolResult{Content: []mcp.Content{&mcp.AudioContent{MIMEType: "audio/wav", Data: []byte("RIFF")},
				&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///r.pdf", MIMEType: "application/pdf", Blob: pdf}}}},
			want: `"[audio: audio/wav, 4 bytes, content 1]\n[resource: file:///r.pdf, application/pdf, 3 KB, content 2]"`,
			wantKept: []messages.Content{{Type: "audio", MimeType: "audio/wav", Data: "UklGRg==", Size: 4},
				{Type: "resource", Size: 3000, Resource: &messages.ResourceContents{URI: "file:///r.pdf", MimeType: "application/pdf", Blob: base64.StdEncoding.EncodeToString(pdf)}}}},
		{name: "text resource and link written out",
			res: &mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "demo://1", MIMEType: "text/plain", Text: "hello"}},
				&mcp.ResourceLink{URI: "demo://2", Name: "two"}}},
			want:     `"[resource: demo://1, text/plain]\nhello\n[resource link: demo://2, two]"`,
			wantKept: []messages.Content{{Type: "resource", Size: 5, Resource: &messages.ResourceContents{URI: "demo://1", MimeType: "text/plain", Blob: "aGVsbG8=", IsText: true}}}},
		{name: "a text resource kept after the named blocks",
			res: &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "mixed:"}, &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "demo://1", MIMEType: "application/json", Text: `{"a":1}`}},
				&mcp.ImageContent{MIMEType: "image/png", Data: png}}},
			want:     `"mixed:\n[resource: demo://1, application/json]\n{\"a\":1}\n[image: image/png, 29 bytes, content 1]"`,
			wantKept: []messages.Content{image, {Type: "resource", Size: 7, Resource: &messages.ResourceContents{URI: "demo://1", MimeType: "application/json", Blob: "eyJhIjoxfQ==", IsText: true}}}},
		{name: "structured with a text resource",
			res:  &mcp.CallToolResult{StructuredContent: map[string]int{"n": 1}, Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "demo://1", Text: "hi"}}}},
			want: `{"n":1}`, wantKept: []messages.Content{{Type: "resource", Size: 2, Resource: &messages.ResourceContents{URI: "demo://1", Blob: "aGk=", IsText: true}}}},
		{name: "structured with an image",
			res:  &mcp.CallToolResult{StructuredContent: map[string]int{"n": 1}, Content: []mcp.Content{&mcp.TextContent{Text: `{"n":1}`}, &mcp.ImageContent{MIMEType: "image/png", Data: png}}},
			want: `{"n":1}`, wantKept: []messages.Content{image},
			wantNotice: "the result also holds content the orchestrator has: [image: image/png, 29 bytes, content 1]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, kept, notice, err := resultValue("s", "t", tt.res)
			if err != nil || string(got) != tt.want {
				t.Errorf("value %s, %v; want %s", got, err, tt.want)
			}
			if !reflect.DeepEqual(kept, tt.wantKept) || notice != tt.wantNotice {
				t.Errorf("kept %+v, notice %q; want %+v, %q", kept, notice, tt.wantKept, tt.wantNotice)
			}
			if strings.Contains(string(got), base64.StdEncoding.EncodeToString(png)[:12]) {
				t.Errorf("the model's value holds the image's base64: %s", got)
			}
		})
	}
}
