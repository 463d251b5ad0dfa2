package localtools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/toolbus/toolbus/pkg/catalog"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/reaper"
	"github.com/toolbus/toolbus/pkg/toolcall"
)

// ManifestSuffix ends the name of a tool's metadata file in a tools folder: the
// executable NAME is described by NAME.mcp.json.
const ManifestSuffix = ".mcp.json"

// maxManifestBytes bounds a NAME.mcp.json file.
const maxManifestBytes = 1 << 20

// toolName is what MCP allows as a tool name.
var toolName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// manifest is the JSON form of NAME.mcp.json: an MCP tool definition plus a timeout.
type manifest struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema"`
	// The snake_case spellings other tool formats use (lollms bindings, Anthropic's API).
	InputSchemaSnake  json.RawMessage `json:"input_schema"`
	OutputSchemaSnake json.RawMessage `json:"output_schema"`
	Annotations       *struct {
		ReadOnlyHint   bool `json:"readOnlyHint"`
		IdempotentHint bool `json:"idempotentHint"`
	} `json:"annotations"`
	Timeout messages.Duration `json:"timeout"`
	// Limits of this tool's process, over the folder's (local.tools.limits).
	Limits *reaper.Limits `json:"limits"`
}

// toolSpec is a checked manifest.
type toolSpec struct {
	info    messages.ToolInfo
	in, out *jsonschema.Resolved
	timeout time.Duration // 0: the folder's default
	limits  reaper.Limits // zero fields: the folder's
}

// manifestKeys are the keys a manifest may hold: an MCP tool definition's, their
// snake_case spellings, and toolbus's timeout and limits. Another is a mistake (a schema under a
// name nobody reads is a tool whose arguments go unchecked).
var manifestKeys = []string{"name", "title", "description", "inputSchema", "input_schema", "outputSchema", "output_schema",
	"annotations", "icons", "_meta", "execution", "timeout", "limits"}

// parseManifest decodes and checks the manifest of the executable called stem.
func parseManifest(data []byte, stem string) (toolSpec, error) {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(data, &keys); err == nil {
		for k := range keys {
			if !slices.Contains(manifestKeys, k) {
				if near := catalog.ClosestNames(k, manifestKeys, 1); len(near) == 1 && catalog.EditDistance(strings.ToLower(k), strings.ToLower(near[0])) <= 3 {
					return toolSpec{}, fmt.Errorf("unknown key %q (did you mean %q?)", k, near[0])
				}
				return toolSpec{}, fmt.Errorf("unknown key %q (a manifest holds %s)", k, strings.Join(manifestKeys, ", "))
			}
		}
	}
	var m manifest
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&m); err != nil {
		return toolSpec{}, fmt.Errorf("not a valid tool manifest: %w", err)
	}
	if dec.More() {
		return toolSpec{}, errors.New("not a valid tool manifest: more than one JSON value")
	}
	if m.Name == "" {
		m.Name = stem
	}
	if m.Name != stem {
		return toolSpec{}, fmt.Errorf("name %q differs from the file name %q", m.Name, stem)
	}
	if !toolName.MatchString(m.Name) {
		return toolSpec{}, fmt.Errorf("name %q: use 1 to 128 letters, digits, '_', '-' or '.'", m.Name)
	}
	if m.Timeout < 0 {
		return toolSpec{}, errors.New("timeout must not be negative")
	}
	for _, s := range []struct {
		camel, snake *json.RawMessage
		name         string
	}{{&m.InputSchema, &m.InputSchemaSnake, "inputSchema"}, {&m.OutputSchema, &m.OutputSchemaSnake, "outputSchema"}} {
		if len(*s.snake) == 0 {
			continue
		}
		if len(*s.camel) != 0 {
			return toolSpec{}, fmt.Errorf("both %s and its other spelling: give one", s.name)
		}
		*s.camel = *s.snake
	}
	if len(m.InputSchema) == 0 || string(m.InputSchema) == "null" {
		m.InputSchema = json.RawMessage(`{"type":"object"}`)
	}
	spec := toolSpec{
		info: messages.ToolInfo{
			Name:        m.Name,
			Description: m.Description,
			InputSchema: compact(m.InputSchema),
		},
		timeout: time.Duration(m.Timeout),
	}
	if m.Limits != nil {
		spec.limits = *m.Limits
	}
	var err error
	if spec.in, err = toolcall.ResolveSchema(m.InputSchema); err != nil {
		return toolSpec{}, fmt.Errorf("inputSchema: %w", err)
	}
	if len(m.OutputSchema) > 0 && string(m.OutputSchema) != "null" {
		spec.info.OutputSchema = compact(m.OutputSchema)
		if spec.out, err = toolcall.ResolveSchema(m.OutputSchema); err != nil {
			return toolSpec{}, fmt.Errorf("outputSchema: %w", err)
		}
	}
	if a := m.Annotations; a != nil {
		spec.info.ReadOnly, spec.info.Idempotent = a.ReadOnlyHint, a.IdempotentHint
	}
	return spec, nil
}

func compact(raw json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}
