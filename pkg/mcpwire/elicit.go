package mcpwire

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The elicitation policies of ServerConfig.Elicitation.
const (
	ElicitDecline  = "decline"
	ElicitDefaults = "defaults"
)

// elicitationPolicy is the client's elicitation handler under policy: none for
// decline (the client then does not offer elicitation, and the SDK refuses a request
// that comes anyway), else one that accepts with the requested schema's defaults when
// every required field has one and declines otherwise.
func elicitationPolicy(policy string) func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	if policy != ElicitDefaults {
		return nil
	}
	return func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		if req.Params.Mode != "url" && req.Params.URL == "" {
			if content, ok := schemaDefaults(req.Params.RequestedSchema); ok {
				return &mcp.ElicitResult{Action: "accept", Content: content}, nil
			}
		}
		return &mcp.ElicitResult{Action: "decline"}, nil
	}
}

// schemaDefaults returns the defaults of the properties of a requested schema (a flat
// object, as elicitation allows); ok is false when a required property has none.
func schemaDefaults(schema any) (map[string]any, bool) {
	b, err := json.Marshal(schema)
	if err != nil {
		return nil, false
	}
	var s struct {
		Required   []string                   `json:"required"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(b, &s) != nil {
		return nil, false
	}
	content := map[string]any{}
	for name, raw := range s.Properties {
		var p struct {
			Default any `json:"default"`
		}
		if json.Unmarshal(raw, &p) == nil && p.Default != nil {
			content[name] = p.Default
		}
	}
	for _, name := range s.Required {
		if _, ok := content[name]; !ok {
			return nil, false
		}
	}
	return content, true
}
