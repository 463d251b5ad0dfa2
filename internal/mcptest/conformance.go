package mcptest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A 1x1 PNG and a minimal WAV: the content the conformance suite's tools return.
var (
	tinyPNG, _ = base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
	tinyWAV, _ = base64.StdEncoding.DecodeString("UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA=")
)

// ConformanceServer is an MCP server with what the server scenarios of the MCP
// conformance suite (@modelcontextprotocol/conformance) ask of a server, as its
// descriptions say: the tools they call (text, image, audio, embedded resource, mixed
// content, an error, progress, logging, sampling and elicitation), its resources (a
// text, a binary, a template, one to watch: a subscription to it is followed by an
// update of it), its prompts (simple, with arguments, with an embedded resource, with an
// image) and completions of their arguments.
// Behind toolbus's front door (its tools routed by their bare names) it lets the suite's
// scenarios run through the whole pipeline (internal/cli TestMCPConformanceServer).
func ConformanceServer() *mcp.Server {
	var srv *mcp.Server
	srv = mcp.NewServer(&mcp.Implementation{Name: "conformance-tools", Version: "1"}, &mcp.ServerOptions{
		CompletionHandler: complete,
		SubscribeHandler: func(ctx context.Context, req *mcp.SubscribeRequest) error {
			// The watched resource changes at once, so that a subscriber sees an update.
			uri := req.Params.URI
			time.AfterFunc(100*time.Millisecond, func() {
				_ = srv.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: uri})
			})
			return nil
		},
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	conformanceResources(srv)
	conformancePrompts(srv)
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

// The texts of the conformance suite's resources and prompts.
const (
	StaticText       = "This is the content of the static text resource."
	EmbeddedText     = "Embedded resource content for testing."
	WatchedText      = "Watched resource content."
	SimplePromptText = "This is a simple prompt for testing."
)

// conformanceResources adds the resources the suite reads: test://static-text,
// test://static-binary (a PNG), test://template/{id}/data and test://watched-resource.
func conformanceResources(srv *mcp.Server) {
	srv.AddResource(&mcp.Resource{URI: "test://static-text", Name: "static-text", Description: "A static text resource", MIMEType: "text/plain"},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "test://static-text", MIMEType: "text/plain", Text: StaticText}}}, nil
		})
	srv.AddResource(&mcp.Resource{URI: "test://static-binary", Name: "static-binary", Description: "A static binary resource", MIMEType: "image/png"},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "test://static-binary", MIMEType: "image/png", Blob: tinyPNG}}}, nil
		})
	srv.AddResource(&mcp.Resource{URI: "test://watched-resource", Name: "watched-resource", Description: "A resource to subscribe to", MIMEType: "text/plain"},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "test://watched-resource", MIMEType: "text/plain", Text: WatchedText}}}, nil
		})
	srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "test://template/{id}/data", Name: "template", Description: "A resource template", MIMEType: "application/json"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			id := strings.TrimSuffix(strings.TrimPrefix(req.Params.URI, "test://template/"), "/data")
			b, _ := json.Marshal(map[string]any{"id": id, "templateTest": true, "data": "Data for ID: " + id})
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "application/json", Text: string(b)}}}, nil
		})
}

// conformancePrompts adds the prompts the suite gets.
func conformancePrompts(srv *mcp.Server) {
	user := func(c mcp.Content) *mcp.PromptMessage { return &mcp.PromptMessage{Role: "user", Content: c} }
	srv.AddPrompt(&mcp.Prompt{Name: "test_simple_prompt", Description: "A simple prompt without arguments"},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{user(&mcp.TextContent{Text: SimplePromptText})}}, nil
		})
	srv.AddPrompt(&mcp.Prompt{Name: "test_prompt_with_arguments", Description: "A prompt with arguments", Arguments: []*mcp.PromptArgument{
		{Name: "arg1", Description: "First test argument", Required: true}, {Name: "arg2", Description: "Second test argument", Required: true}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			a := req.Params.Arguments
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{user(&mcp.TextContent{Text: fmt.Sprintf("Prompt with arguments: arg1='%s', arg2='%s'", a["arg1"], a["arg2"])})}}, nil
		})
	srv.AddPrompt(&mcp.Prompt{Name: "test_prompt_with_embedded_resource", Description: "A prompt with an embedded resource", Arguments: []*mcp.PromptArgument{
		{Name: "resourceUri", Description: "URI of the resource to embed", Required: true}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{
				user(&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: req.Params.Arguments["resourceUri"], MIMEType: "text/plain", Text: EmbeddedText}}),
				user(&mcp.TextContent{Text: "Please process the embedded resource above."})}}, nil
		})
	srv.AddPrompt(&mcp.Prompt{Name: "test_prompt_with_image", Description: "A prompt with an image"},
		func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{
				user(&mcp.ImageContent{MIMEType: "image/png", Data: tinyPNG}),
				user(&mcp.TextContent{Text: "Please analyze the image above."})}}, nil
		})
}

// complete completes a prompt's or a template's argument: the values of a few made-up
// words that begin with what was typed.
func complete(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	values := []string{}
	for _, w := range []string{"paris", "park", "party", "test", "testValue1"} {
		if strings.HasPrefix(w, req.Params.Argument.Value) {
			values = append(values, w)
		}
	}
	return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: values, Total: len(values)}}, nil
}
