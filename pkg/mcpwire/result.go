package mcpwire

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolbus/toolbus/pkg/messages"
)

// KeptContent receives what a call's result holds besides the value the model reads:
// its images, audio and embedded blobs (messages.ToolResult.Content), which the value
// names, and, when the value is the tool's structured content, which cannot name them,
// a notice that does.
type KeptContent struct {
	Content []messages.Content
	Notice  string
}

type keptKey struct{}

// WithKeptContent returns ctx whose tool calls put the content blocks of their result in
// k ([Pool.CallTool]).
func WithKeptContent(ctx context.Context, k *KeptContent) context.Context {
	return context.WithValue(ctx, keptKey{}, k)
}

func keep(ctx context.Context, kept []messages.Content, notice string) {
	if k, ok := ctx.Value(keptKey{}).(*KeptContent); ok {
		k.Content, k.Notice = kept, notice
	}
}

// resultValue turns a tool's result into the JSON value a model is shown, and the
// blocks of it kept for the orchestrator (messages.Content): structuredContent when
// present; else the text content, where a single text block that holds JSON becomes that
// JSON value; else the content as text, each image, audio or embedded blob named in its
// place (messages.ContentName) and kept, an embedded text resource and a resource link
// written out. With structuredContent the blocks are kept too, and named in notice. A
// result with isError is a [*ToolError] carrying the server's text.
func resultValue(server, tool string, res *mcp.CallToolResult) (value json.RawMessage, kept []messages.Content, notice string, err error) {
	if res == nil {
		return json.RawMessage("null"), nil, "", nil
	}
	if res.IsError {
		msg := strings.TrimSpace(contentText(res.Content))
		if msg == "" && res.StructuredContent != nil {
			b, _ := json.Marshal(res.StructuredContent)
			msg = string(b)
		}
		if msg == "" {
			msg = "the tool reported an error without a message"
		}
		return nil, nil, "", &ToolError{Server: server, Tool: tool, Message: msg}
	}
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return nil, nil, "", fmt.Errorf("%s: %s: structuredContent: %w", server, tool, err)
		}
		if allText(res.Content) {
			return b, nil, "", nil
		}
		_, kept, names := contentValue(res.Content)
		if len(names) > 0 {
			notice = "the result also holds content the orchestrator has: " + strings.Join(names, ", ")
		}
		return b, kept, notice, nil
	}
	if len(res.Content) == 0 {
		return json.RawMessage("null"), nil, "", nil
	}
	if allText(res.Content) {
		if len(res.Content) == 1 {
			text := strings.TrimSpace(res.Content[0].(*mcp.TextContent).Text)
			if text != "" && messages.Valid([]byte(text)) {
				return json.RawMessage(text), nil, "", nil
			}
		}
		b, err := json.Marshal(contentText(res.Content))
		return b, nil, "", err
	}
	text, kept, _ := contentValue(res.Content)
	b, err := json.Marshal(text)
	return b, kept, "", err
}

// contentValue is content as the model reads it, a line or more per block, and the
// blocks kept for the orchestrator with the names the text gives them, followed by the
// embedded text resources the text writes out (named nowhere, so that the names of the
// others say their places as they always did).
func contentValue(content []mcp.Content) (string, []messages.Content, []string) {
	var kept, written []messages.Content
	var names []string
	keep := func(c messages.Content) string {
		kept = append(kept, c)
		names = append(names, messages.ContentName(c, len(kept)))
		return names[len(names)-1]
	}
	parts := make([]string, 0, len(content))
	for _, c := range content {
		switch c := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, c.Text)
		case *mcp.ImageContent:
			parts = append(parts, keep(messages.Content{Type: messages.ContentImage, MimeType: c.MIMEType,
				Data: base64.StdEncoding.EncodeToString(c.Data), Size: len(c.Data)}))
		case *mcp.AudioContent:
			parts = append(parts, keep(messages.Content{Type: messages.ContentAudio, MimeType: c.MIMEType,
				Data: base64.StdEncoding.EncodeToString(c.Data), Size: len(c.Data)}))
		case *mcp.EmbeddedResource:
			r := c.Resource
			switch {
			case r == nil:
			case r.Blob != nil:
				parts = append(parts, keep(resourceBlock(r)))
			default:
				// Text the model can read: written out, under its URI.
				parts = append(parts, "[resource: "+resourceHead(r.URI, r.MIMEType)+"]\n"+r.Text)
				written = append(written, resourceBlock(r))
			}
		case *mcp.ResourceLink:
			parts = append(parts, "[resource link: "+resourceHead(c.URI, c.MIMEType, c.Name, c.Description)+"]")
		default:
			b, err := json.Marshal(c)
			if err == nil {
				parts = append(parts, string(b))
			}
		}
	}
	return strings.Join(parts, "\n"), append(kept, written...), names
}

// resourceBlock is an embedded resource as a kept block: a text resource's text as its
// UTF-8 bytes, IsText.
func resourceBlock(r *mcp.ResourceContents) messages.Content {
	data, isText := r.Blob, r.Blob == nil
	if isText {
		data = []byte(r.Text)
	}
	return messages.Content{Type: messages.ContentResource, Size: len(data),
		Resource: &messages.ResourceContents{URI: r.URI, MimeType: r.MIMEType, Blob: base64.StdEncoding.EncodeToString(data), IsText: isText}}
}

// resourceHead joins what names a resource, leaving out what is empty.
func resourceHead(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		if p == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(p)
	}
	return b.String()
}

func allText(content []mcp.Content) bool {
	for _, c := range content {
		if _, ok := c.(*mcp.TextContent); !ok {
			return false
		}
	}
	return true
}

// contentText joins the text blocks of content.
func contentText(content []mcp.Content) string {
	var texts []string
	for _, c := range content {
		if t, ok := c.(*mcp.TextContent); ok {
			texts = append(texts, t.Text)
		}
	}
	return strings.Join(texts, "\n")
}
