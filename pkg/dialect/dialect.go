// Package dialect writes tool declarations in the formats of the model vendors' APIs —
// OpenAI's Chat Completions tools, Anthropic's Messages tools, Gemini's function
// declarations with its OpenAPI subset of JSON Schema — and as MCP's tools/list gives
// them, from a list of [catalog.Tool] (an MCP pool's, the catalog bucket's). `toolbus tools
// --format` and the console print them.
//
//	decls, err := dialect.Declarations(dialect.OpenAI, pool.Tools(ctx))
//
// [Turn] writes the other way round: toolbus's results as the next turn of a hosted API
// (OpenAI Chat Completions and Responses, Anthropic, Gemini, Bedrock, Ollama), each
// result answering its call by the call's id — the output's native turn, which the
// formatter adds when a response asks for it (docs/hosted-apis.md).
package dialect

import (
	"encoding/json"
	"fmt"
	"github.com/toolbus/toolbus/pkg/catalog"
	"slices"
	"sort"
	"strings"
)

// Dialect is a vendor's format of tool declarations.
type Dialect string

// The dialects [Declarations] writes.
const (
	// MCP: the tools as tools/list gives them.
	MCP Dialect = "mcp"
	// OpenAI: Chat Completions tools, {"type":"function","function":{...}}.
	OpenAI Dialect = "openai"
	// Anthropic: Messages API tools, {"name","description","input_schema"}.
	Anthropic Dialect = "anthropic"
	// Gemini: one {"functionDeclarations":[...]} tool whose parameters use Gemini's
	// OpenAPI subset of JSON Schema.
	Gemini Dialect = "gemini"
)

// Dialects lists every dialect.
func Dialects() []Dialect {
	return []Dialect{MCP, OpenAI, Anthropic, Gemini}
}

// Options shape the declarations; nil means the defaults.
type Options struct {
	// Strict writes OpenAI's functions in strict mode ("strict": true, the schema
	// rewritten by [StrictSchema]); a function whose schema strict mode cannot express
	// stays non-strict and is named in [Declared.NotStrict].
	Strict bool
}

// Declared is what [DeclarationsWith] wrote.
type Declared struct {
	// Tools is the value of the "tools" field of the dialect's API.
	Tools json.RawMessage
	// Shortened names the tools whose descriptions were shortened to the vendor's limit.
	Shortened []string
	// NotStrict names the tools Options.Strict left non-strict, with the reason.
	NotStrict []string
}

// Declarations returns tools as the value of the "tools" field of the dialect's API. The
// vendors' dialects name each tool by its [catalog.VendorNames] alias, which toolbus
// accepts back, and keep to the vendor's limits (OpenAI's descriptions are shortened, see
// [ShortenDescription]).
func Declarations(d Dialect, tools []catalog.Tool) (json.RawMessage, error) {
	out, err := DeclarationsWith(d, tools, nil)
	if err != nil {
		return nil, err
	}
	return out.Tools, nil
}

// DeclarationsWith is [Declarations] with options, saying what it changed.
func DeclarationsWith(d Dialect, tools []catalog.Tool, opts *Options) (Declared, error) {
	if opts == nil {
		opts = &Options{}
	}
	var res Declared
	var out any
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	alias := catalog.VendorNames(names)
	switch d {
	case MCP:
		list := make([]mcpDeclaration, 0, len(tools))
		for _, t := range tools {
			list = append(list, mcpDeclaration{Name: t.Name, Title: t.Title, Description: t.Description,
				InputSchema: objectSchema(t.InputSchema), OutputSchema: t.OutputSchema, Annotations: annotationsOf(t)})
		}
		out = list
	case OpenAI:
		list := make([]OpenAITool, 0, len(tools))
		for _, t := range tools {
			f := OpenAIFunction{Name: alias[t.Name], Description: ShortenDescription(t.Description, MaxOpenAIDescription), Parameters: objectSchema(t.InputSchema)}
			if f.Description != t.Description {
				res.Shortened = append(res.Shortened, t.Name)
			}
			if opts.Strict {
				if strict, err := StrictSchema(t.InputSchema); err == nil {
					f.Parameters, f.Strict = strict, true
				} else {
					res.NotStrict = append(res.NotStrict, t.Name+": "+err.Error())
				}
			}
			list = append(list, OpenAITool{Type: "function", Function: f})
		}
		out = list
	case Anthropic:
		list := make([]AnthropicTool, 0, len(tools))
		for _, t := range tools {
			list = append(list, AnthropicTool{Name: alias[t.Name], Description: t.Description, InputSchema: objectSchema(t.InputSchema)})
		}
		out = list
	case Gemini:
		decls := make([]GeminiFunctionDeclaration, 0, len(tools))
		for _, t := range tools {
			params, err := GeminiSchemaOf(t.InputSchema)
			if err != nil {
				return Declared{}, fmt.Errorf("%s: %w", t.Name, err)
			}
			if params != nil && params.Type == "OBJECT" && len(params.Properties) == 0 {
				params = nil // Gemini rejects an OBJECT without properties; no parameters says the same
			}
			decl := GeminiFunctionDeclaration{Name: alias[t.Name], Description: t.Description, Parameters: params}
			if params.freeForm() {
				// An object of any keys (execute_tool's parameters) has no OpenAPI form
				// Gemini accepts: the JSON Schema goes as it is, in parametersJsonSchema.
				decl.Parameters, decl.ParametersJSONSchema = nil, objectSchema(t.InputSchema)
			}
			decls = append(decls, decl)
		}
		out = []GeminiTool{{FunctionDeclarations: decls}}
	default:
		return Declared{}, fmt.Errorf("unknown dialect %q (want mcp, openai, anthropic or gemini)", d)
	}
	var err error
	res.Tools, err = json.Marshal(out)
	return res, err
}

type mcpDeclaration struct {
	Name         string          `json:"name"`
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  map[string]bool `json:"annotations,omitempty"`
}

func annotationsOf(t catalog.Tool) map[string]bool {
	if !t.ReadOnly && !t.Idempotent && t.Destructive {
		return nil
	}
	return map[string]bool{"readOnlyHint": t.ReadOnly, "idempotentHint": t.Idempotent, "destructiveHint": t.Destructive}
}

// OpenAITool is one entry of an OpenAI Chat Completions "tools" array.
type OpenAITool struct {
	Type     string         `json:"type"`
	Function OpenAIFunction `json:"function"`
}

// OpenAIFunction is the function of an [OpenAITool].
type OpenAIFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
	// Strict: the parameters meet OpenAI's strict-mode rules ([CheckStrictSchema]), and
	// the model's arguments will fit them exactly.
	Strict bool `json:"strict,omitempty"`
}

// AnthropicTool is one entry of an Anthropic Messages API "tools" array.
type AnthropicTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// GeminiTool is one entry of a Gemini "tools" array.
type GeminiTool struct {
	FunctionDeclarations []GeminiFunctionDeclaration `json:"functionDeclarations"`
}

// GeminiFunctionDeclaration declares one function to Gemini.
type GeminiFunctionDeclaration struct {
	Name        string        `json:"name"`
	Description string        `json:"description,omitempty"`
	Parameters  *GeminiSchema `json:"parameters,omitempty"`
	// ParametersJSONSchema is the alternative to Parameters for a schema Gemini's OpenAPI
	// subset cannot say (an object of any keys below the top).
	ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema,omitempty"`
}

// freeForm reports whether s holds, below its top, an OBJECT without properties, which
// Gemini rejects in parameters.
func (s *GeminiSchema) freeForm() bool {
	if s == nil {
		return false
	}
	var walk func(g *GeminiSchema, top bool) bool
	walk = func(g *GeminiSchema, top bool) bool {
		if g == nil {
			return false
		}
		if !top && g.Type == "OBJECT" && len(g.Properties) == 0 {
			return true
		}
		for _, p := range g.Properties {
			if walk(p, false) {
				return true
			}
		}
		for _, a := range g.AnyOf {
			if walk(a, false) {
				return true
			}
		}
		return walk(g.Items, false)
	}
	return walk(s, true)
}

// GeminiSchema is the OpenAPI 3.0 subset of JSON Schema that Gemini accepts.
type GeminiSchema struct {
	Type        string                   `json:"type,omitempty"`
	Format      string                   `json:"format,omitempty"`
	Title       string                   `json:"title,omitempty"`
	Description string                   `json:"description,omitempty"`
	Nullable    bool                     `json:"nullable,omitempty"`
	Enum        []string                 `json:"enum,omitempty"`
	Items       *GeminiSchema            `json:"items,omitempty"`
	MinItems    *int64                   `json:"minItems,omitempty"`
	MaxItems    *int64                   `json:"maxItems,omitempty"`
	Properties  map[string]*GeminiSchema `json:"properties,omitempty"`
	Required    []string                 `json:"required,omitempty"`
	Minimum     *float64                 `json:"minimum,omitempty"`
	Maximum     *float64                 `json:"maximum,omitempty"`
	MinLength   *int64                   `json:"minLength,omitempty"`
	MaxLength   *int64                   `json:"maxLength,omitempty"`
	Pattern     string                   `json:"pattern,omitempty"`
	AnyOf       []*GeminiSchema          `json:"anyOf,omitempty"`
}

// objectSchema returns an input schema OpenAI and Anthropic accept: an object schema,
// without "$schema".
func objectSchema(raw json.RawMessage) json.RawMessage {
	var m map[string]any
	if len(raw) == 0 || json.Unmarshal(raw, &m) != nil || m == nil {
		return json.RawMessage(`{"type":"object","properties":{}}`)
	}
	delete(m, "$schema")
	if _, ok := m["type"]; !ok {
		m["type"] = "object"
	}
	if _, ok := m["properties"]; !ok && m["type"] == "object" {
		m["properties"] = map[string]any{}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return json.RawMessage(`{"type":"object","properties":{}}`)
	}
	return b
}

// maxSchemaDepth bounds the inlining of $ref, which may be recursive.
const maxSchemaDepth = 16

// GeminiSchemaOf converts a JSON Schema into Gemini's subset: $ref inlined from $defs or
// definitions, "type" lists and null branches of anyOf/oneOf turned into nullable,
// allOf merged, const into a one-value enum, and every keyword Gemini rejects dropped.
// An empty input gives nil.
func GeminiSchemaOf(raw json.RawMessage) (*GeminiSchema, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var root map[string]any
	if err := json.Unmarshal(raw, &root); err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	g := geminiConverter{root: root}
	return g.convert(root, 0), nil
}

type geminiConverter struct{ root map[string]any }

func (g geminiConverter) convert(s map[string]any, depth int) *GeminiSchema {
	if s == nil {
		return &GeminiSchema{}
	}
	if depth > maxSchemaDepth {
		return &GeminiSchema{Type: "OBJECT", Description: str(s["description"])}
	}
	if ref, ok := s["$ref"].(string); ok {
		target := g.lookup(ref)
		merged := map[string]any{}
		for k, v := range target {
			merged[k] = v
		}
		for k, v := range s { // siblings of $ref override the target
			if k != "$ref" {
				merged[k] = v
			}
		}
		return g.convert(merged, depth+1)
	}
	if merged, ok := allOfMerged(s, func(p map[string]any) map[string]any { return g.resolved(p, depth) }); ok {
		return g.convert(merged, depth+1)
	}

	out := &GeminiSchema{
		Title:       str(s["title"]),
		Description: str(s["description"]),
		Pattern:     str(s["pattern"]),
		MinItems:    integer(s["minItems"]),
		MaxItems:    integer(s["maxItems"]),
		MinLength:   integer(s["minLength"]),
		MaxLength:   integer(s["maxLength"]),
		Minimum:     number(s["minimum"]),
		Maximum:     number(s["maximum"]),
	}
	if b, ok := s["nullable"].(bool); ok {
		out.Nullable = b
	}

	// "type" may be a list; "null" in it means nullable.
	var types []string
	switch t := s["type"].(type) {
	case string:
		types = []string{t}
	case []any:
		for _, x := range t {
			if x, ok := x.(string); ok {
				types = append(types, x)
			}
		}
	}
	var nonNull []string
	for _, t := range types {
		if t == "null" {
			out.Nullable = true
		} else {
			nonNull = append(nonNull, t)
		}
	}

	// anyOf and oneOf: null branches become nullable; one branch left is the schema.
	for _, key := range []string{"anyOf", "oneOf"} {
		branches, ok := s[key].([]any)
		if !ok {
			continue
		}
		var kept []*GeminiSchema
		for _, b := range branches {
			bm, ok := b.(map[string]any)
			if !ok {
				continue
			}
			if t, _ := bm["type"].(string); t == "null" && len(bm) == 1 {
				out.Nullable = true
				continue
			}
			kept = append(kept, g.convert(bm, depth+1))
		}
		switch {
		case len(kept) == 1 && len(nonNull) == 0:
			one := kept[0]
			one.Nullable = one.Nullable || out.Nullable
			if one.Description == "" {
				one.Description = out.Description
			}
			if one.Title == "" {
				one.Title = out.Title
			}
			return one
		case len(kept) > 1:
			out.AnyOf = append(out.AnyOf, kept...)
		}
	}

	switch {
	case len(nonNull) == 1:
		out.Type = strings.ToUpper(nonNull[0])
	case len(nonNull) > 1:
		for _, t := range nonNull {
			out.AnyOf = append(out.AnyOf, &GeminiSchema{Type: strings.ToUpper(t)})
		}
	case len(out.AnyOf) > 0:
	case s["properties"] != nil:
		out.Type = "OBJECT"
	case s["items"] != nil:
		out.Type = "ARRAY"
	case s["enum"] != nil || s["const"] != nil:
		out.Type = "STRING"
	}

	// Gemini takes enums of strings only; other enums are dropped, and the description
	// keeps their values so the model still knows them.
	var enum []any
	if e, ok := s["enum"].([]any); ok {
		enum = e
	} else if c, ok := s["const"]; ok {
		enum = []any{c}
	}
	if len(enum) > 0 {
		strs := make([]string, 0, len(enum))
		for _, v := range enum {
			if v, ok := v.(string); ok {
				strs = append(strs, v)
			}
		}
		if len(strs) == len(enum) && (out.Type == "STRING" || out.Type == "") {
			out.Type, out.Enum = "STRING", strs
		} else {
			b, _ := json.Marshal(enum)
			out.Description = strings.TrimSpace(out.Description + " One of " + string(b) + ".")
		}
	}

	out.Format = geminiFormat(out.Type, str(s["format"]))

	if props, ok := s["properties"].(map[string]any); ok {
		out.Properties = map[string]*GeminiSchema{}
		names := make([]string, 0, len(props))
		for name := range props {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			pm, _ := props[name].(map[string]any)
			out.Properties[name] = g.convert(pm, depth+1)
		}
		if out.Type == "" {
			out.Type = "OBJECT"
		}
		if req, ok := s["required"].([]any); ok {
			for _, r := range req {
				if r, ok := r.(string); ok && props[r] != nil {
					out.Required = append(out.Required, r)
				}
			}
		}
	}
	if items, ok := s["items"].(map[string]any); ok {
		out.Items = g.convert(items, depth+1)
	} else if out.Type == "ARRAY" {
		out.Items = &GeminiSchema{Type: "STRING"} // Gemini needs items; tuples and "any" have none
	}
	return out
}

// resolved follows a top-level $ref of s.
func (g geminiConverter) resolved(s map[string]any, depth int) map[string]any {
	for i := 0; i < maxSchemaDepth; i++ {
		ref, ok := s["$ref"].(string)
		if !ok {
			return s
		}
		s = g.lookup(ref)
	}
	return s
}

// lookup finds a local reference: "#", "#/$defs/X", "#/definitions/X", or any JSON
// pointer into the root.
func (g geminiConverter) lookup(ref string) map[string]any {
	if !strings.HasPrefix(ref, "#") {
		return map[string]any{} // remote references are not fetched
	}
	var cur any = g.root
	for _, part := range strings.Split(strings.TrimPrefix(ref, "#"), "/") {
		if part == "" {
			continue
		}
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return map[string]any{}
		}
		cur = m[part]
	}
	m, _ := cur.(map[string]any)
	if m == nil {
		return map[string]any{}
	}
	return m
}

// allOfMerged returns schema s with the schemas of its allOf merged into it (each
// resolved first), and whether s has an allOf: a schema both vendors' rules can read.
func allOfMerged(s map[string]any, resolve func(map[string]any) map[string]any) (map[string]any, bool) {
	all, ok := s["allOf"].([]any)
	if !ok || len(all) == 0 {
		return nil, false
	}
	merged := map[string]any{}
	for k, v := range s {
		if k != "allOf" {
			merged[k] = v
		}
	}
	for _, part := range all {
		if p, ok := part.(map[string]any); ok {
			mergeSchema(merged, resolve(p))
		}
	}
	return merged, true
}

// mergeSchema merges src into dst for allOf: properties and required are united, other
// keywords of dst win.
func mergeSchema(dst, src map[string]any) {
	for k, v := range src {
		switch k {
		case "properties":
			dp, _ := dst[k].(map[string]any)
			if dp == nil {
				dp = map[string]any{}
			}
			if sp, ok := v.(map[string]any); ok {
				for name, p := range sp {
					if _, exists := dp[name]; !exists {
						dp[name] = p
					}
				}
			}
			dst[k] = dp
		case "required":
			dr, _ := dst[k].([]any)
			if sr, ok := v.([]any); ok {
				dst[k] = slices.Concat(dr, sr)
			}
		default:
			if _, exists := dst[k]; !exists {
				dst[k] = v
			}
		}
	}
}

// geminiFormat keeps the formats Gemini supports for the type.
func geminiFormat(typ, format string) string {
	switch {
	case typ == "STRING" && (format == "date-time" || format == "enum"):
		return format
	case typ == "NUMBER" && (format == "float" || format == "double"):
		return format
	case typ == "INTEGER" && (format == "int32" || format == "int64"):
		return format
	}
	return ""
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func number(v any) *float64 {
	if f, ok := v.(float64); ok {
		return &f
	}
	return nil
}

func integer(v any) *int64 {
	if f, ok := v.(float64); ok && f >= 0 {
		n := int64(f)
		return &n
	}
	return nil
}
