package frontdoor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolbus/toolbus/pkg/messages"
)

// MetaErrorCode is the _meta key of a failed result's toolbus error code
// (messages.ErrorCode: not_allowed, timeout, tool_error, …).
const MetaErrorCode = "toolbus/error_code"

// Fetcher reads what a result keeps out of line: pkg/client's Client.
type Fetcher interface {
	FetchResult(ctx context.Context, stored *messages.StoredResult) ([]byte, error)
	FetchContent(ctx context.Context, block messages.Content) ([]byte, error)
}

// Result is the tools/call result of one call's output result:
//   - a failure is isError, its text "<error_code>: <message>", the code in _meta too;
//   - a value that is a JSON string is its text; any other value is its JSON text, and
//     an object is the structured content as well;
//   - the result's images, audio and embedded resources follow as MCP content blocks
//     (embedded text resources, which the text writes out, as text resources), their
//     bytes read from the object store when they were stored (f), as is a value too
//     large to travel inline.
func Result(ctx context.Context, f Fetcher, r messages.OutputResult) (*mcp.CallToolResult, error) {
	if !r.Success {
		e := r.Error
		if e == nil {
			e = &messages.ResultError{Code: messages.CodeInternal, Message: "the call failed without a reason"}
		}
		res := failed(e.Code, e.Message)
		return res, nil
	}
	value := r.Result
	if r.Stored != nil {
		whole, err := f.FetchResult(ctx, r.Stored)
		if err != nil {
			return nil, fmt.Errorf("toolbus: the stored result: %w", err)
		}
		value = whole
	}
	value = bytes.TrimSpace(value)
	res := &mcp.CallToolResult{Content: []mcp.Content{}}
	var s string
	switch {
	case len(value) == 0:
		res.Content = append(res.Content, &mcp.TextContent{Text: "null"})
	case value[0] == '"' && json.Unmarshal(value, &s) == nil:
		res.Content = append(res.Content, &mcp.TextContent{Text: s})
	default:
		res.Content = append(res.Content, &mcp.TextContent{Text: string(value)})
		if value[0] == '{' {
			res.StructuredContent = json.RawMessage(value)
		}
	}
	for i, block := range r.Content {
		c, err := contentBlock(ctx, f, block)
		if err != nil {
			return nil, fmt.Errorf("toolbus: content %d: %w", i+1, err)
		}
		res.Content = append(res.Content, c)
	}
	return res, nil
}

// contentBlock is a kept block as MCP content, its bytes in hand.
func contentBlock(ctx context.Context, f Fetcher, block messages.Content) (mcp.Content, error) {
	data, err := f.FetchContent(ctx, block)
	if err != nil {
		return nil, err
	}
	switch block.Type {
	case messages.ContentImage:
		return &mcp.ImageContent{MIMEType: block.MimeType, Data: data}, nil
	case messages.ContentAudio:
		return &mcp.AudioContent{MIMEType: block.MimeType, Data: data}, nil
	case messages.ContentResource:
		rc := &mcp.ResourceContents{MIMEType: block.MimeOf(), Blob: data}
		if block.Resource != nil {
			rc.URI = block.Resource.URI
			if block.Resource.IsText {
				// A text resource, which the model's text writes out: its text again.
				rc.Blob, rc.Text = nil, string(data)
			}
		}
		return &mcp.EmbeddedResource{Resource: rc}, nil
	}
	return nil, fmt.Errorf("a block of type %q", block.Type)
}

// failed is an isError result with toolbus's error code.
func failed(code messages.ErrorCode, msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: string(code) + ": " + msg}},
		Meta: mcp.Meta{MetaErrorCode: string(code)}}
}
