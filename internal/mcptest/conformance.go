package mcptest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A 1x1 PNG and a minimal WAV: the content the conformance suite's tools return.
var (
	tinyPNG, _ = base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
	tinyWAV, _ = base64.StdEncoding.DecodeString("UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA=")
)

// ConformanceTools is an MCP server with the tools the server scenarios of the MCP
// conformance suite (@modelcontextprotocol/conformance) call, as its descriptions ask:
// text, image, audio, embedded resource, mixed content, an error, progress, logging,
// sampling and elicitation.
// Behind toolbus's front door (routed by their bare names) they let the suite's tool
// scenarios run through the whole pipeline (internal/cli TestMCPConformanceServer).
func ConformanceTools() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "conformance-tools", Version: "1"}, nil)
	none := func(name, desc string, h func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error)) {
		mcp.AddTool(srv, &mcp.Tool{Name: name, Description: desc}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			res, err := h(ctx, req)
			return res, nil, err
		})
	}
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	none("test_simple_text", "returns a text", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return text("This is a simple text response for testing."), nil
	})
	none("test_image_content", "returns an image", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{Data: tinyPNG, MIMEType: "image/png"}}}, nil
	})
	none("test_audio_content", "returns audio", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.AudioContent{Data: tinyWAV, MIMEType: "audio/wav"}}}, nil
	})
	none("test_embedded_resource", "returns an embedded resource", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
			URI: "test://embedded-resource", MIMEType: "text/plain", Text: "This is an embedded resource content."}}}}, nil
	})
	none("test_multiple_content_types", "returns text, an image and a resource", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{
			&mcp.TextContent{Text: "Multiple content types test:"},
			&mcp.ImageContent{Data: tinyPNG, MIMEType: "image/png"},
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "test://mixed-content-resource", MIMEType: "application/json", Text: `{"test":"data","value":123}`}},
		}}, nil
	})
	none("test_error_handling", "always fails", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, errors.New("This tool intentionally returns an error for testing")
	})
	none("test_tool_with_progress", "reports progress 0, 50, 100 of 100", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		for _, p := range []float64{0, 50, 100} {
			if token := req.Params.GetProgressToken(); token != nil {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: p, Total: 100})
			}
			time.Sleep(50 * time.Millisecond)
		}
		return text("Progress test completed"), nil
	})
	none("test_tool_with_logging", "logs three messages", func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		for _, msg := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
			_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: msg})
			time.Sleep(50 * time.Millisecond)
		}
		return text("Logging test completed"), nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "test_sampling", Description: "asks the client's model"}, func(ctx context.Context, req *mcp.CallToolRequest, in struct {
		Prompt string `json:"prompt"`
	}) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 100,
			Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: in.Prompt}}}})
		if err != nil {
			return nil, nil, err
		}
		text, _ := res.Content.(*mcp.TextContent)
		if text == nil {
			return nil, nil, errors.New("the completion is not text")
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "LLM response: " + text.Text}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "test_elicitation", Description: "asks the client's user"}, func(ctx context.Context, req *mcp.CallToolRequest, in struct {
		Message string `json:"message"`
	}) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: in.Message, RequestedSchema: json.RawMessage(`{"type": "object",
			"properties": {"username": {"type": "string", "description": "User's response"}, "email": {"type": "string", "description": "User's email address"}},
			"required": ["username", "email"]}`)})
		if err != nil {
			return nil, nil, err
		}
		content, _ := json.Marshal(res.Content)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("User response: action %s, content %s", res.Action, content)}}}, nil, nil
	})
	elicitWith := func(name, schema string) {
		srv.AddTool(&mcp.Tool{Name: name, Description: "asks the client's user with a schema of " + name, InputSchema: json.RawMessage(`{"type": "object"}`)},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Please answer", RequestedSchema: json.RawMessage(schema)})
				if err != nil {
					return nil, err
				}
				content, _ := json.Marshal(res.Content)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("Elicitation completed: action=%s, content=%s", res.Action, content)}}}, nil
			})
	}
	elicitWith("test_elicitation_sep1034_defaults", `{"type": "object", "properties": {
		"name": {"type": "string", "default": "John Doe"}, "age": {"type": "integer", "default": 30},
		"score": {"type": "number", "default": 95.5}, "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
		"verified": {"type": "boolean", "default": true}}}`)
	elicitWith("test_elicitation_sep1330_enums", `{"type": "object", "properties": {
		"untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
		"titledSingle": {"type": "string", "oneOf": [{"const": "value1", "title": "First Option"}, {"const": "value2", "title": "Second Option"}, {"const": "value3", "title": "Third Option"}]},
		"legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"], "enumNames": ["Option One", "Option Two", "Option Three"]},
		"untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
		"titledMulti": {"type": "array", "items": {"anyOf": [{"const": "value1", "title": "First Choice"}, {"const": "value2", "title": "Second Choice"}, {"const": "value3", "title": "Third Choice"}]}}}}`)
	srv.AddTool(&mcp.Tool{Name: "json_schema_2020_12_tool", Description: "Tool with JSON Schema 2020-12 features", InputSchema: json.RawMessage(`{
		"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
		"$defs": {"address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
		"properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
		"additionalProperties": false}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return text("ok"), nil })
	return srv
}
