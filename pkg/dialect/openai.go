package dialect

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// OpenAI's published limits of function calling
// (https://platform.openai.com/docs/guides/function-calling and the API reference of
// Chat Completions' "tools"): a function's description of at most 1,024 characters, and
// at most 128 tools in one request.
const (
	MaxOpenAIDescription = 1024
	MaxOpenAITools       = 128
)

// MaxTools is the most tools the dialect's API takes in one request; 0 for no limit.
func MaxTools(d Dialect) int {
	if d == OpenAI {
		return MaxOpenAITools
	}
	return 0
}

// ShortenDescription returns desc when it fits in max bytes (and so in max characters,
// however they are counted), and otherwise its beginning, cut at a word where it can
// and never inside a UTF-8 sequence, with a note saying that it was shortened and from
// how long.
func ShortenDescription(desc string, max int) string {
	if len(desc) <= max {
		return desc
	}
	note := fmt.Sprintf(" … [description shortened by toolbus from %d characters]", utf8.RuneCountInString(desc))
	cut := max - len(note)
	if cut <= 0 {
		return ""
	}
	for cut > 0 && !utf8.RuneStart(desc[cut]) {
		cut--
	}
	// A word boundary among the last 80 bytes reads better than half a word.
	if i := strings.LastIndexFunc(desc[:cut], unicode.IsSpace); i > 0 && cut-i < 80 {
		cut = i
	}
	return strings.TrimRightFunc(desc[:cut], unicode.IsSpace) + note
}

// strictKeywords are the JSON Schema keywords OpenAI's strict mode takes. Structured
// Outputs' "Supported schemas"
// (https://platform.openai.com/docs/guides/structured-outputs#supported-schemas) lists the
// types, anyOf, $defs with $ref, enum and description, and the keywords it does not take
// (format, pattern, minLength, maxLength, minimum, maximum, multipleOf, minItems,
// maxItems, uniqueItems, patternProperties, allOf, oneOf, not, default…); toolbus keeps
// to the first list, which every revision of the page accepts.
var strictKeywords = map[string]bool{
	"type": true, "properties": true, "required": true, "additionalProperties": true, "items": true,
	"enum": true, "anyOf": true, "$ref": true, "$defs": true, "definitions": true, "description": true,
}

var strictTypes = map[string]bool{"string": true, "number": true, "integer": true, "boolean": true, "object": true, "array": true, "null": true}

// The bounds of a strict schema, from the same page: nesting, properties, enum values.
const (
	maxStrictDepth      = 10
	maxStrictProperties = 5000
	maxStrictEnumValues = 1000
)

// CheckStrictSchema reports the first way schema breaks OpenAI's strict-mode rules (the
// page [strictKeywords] cites), or nil:
//   - the root is an object, not an anyOf;
//   - every schema has a type (of the JSON types), an anyOf, or a $ref into the document;
//   - every object has "additionalProperties": false and lists every property in
//     "required" (an optional one is a nullable one: "type": [T, "null"]);
//   - every array has items;
//   - no keyword beyond [strictKeywords];
//   - at most 10 levels of nesting, 5,000 properties and 1,000 enum values.
//
// The strict export ([Options.Strict]) writes a tool strict only when its schema passes.
func CheckStrictSchema(schema json.RawMessage) error {
	var root map[string]any
	if err := json.Unmarshal(schema, &root); err != nil {
		return fmt.Errorf("not a JSON object: %w", err)
	}
	if root["type"] != "object" {
		return errors.New("the root is not an object")
	}
	c := strictChecker{}
	if err := c.check(root, "", 0); err != nil {
		return err
	}
	for _, key := range []string{"$defs", "definitions"} {
		defs, _ := root[key].(map[string]any)
		for name, d := range defs {
			dm, ok := d.(map[string]any)
			if !ok {
				return fmt.Errorf("%s/%s: not a schema", key, name)
			}
			if err := c.check(dm, key+"/"+name, 1); err != nil {
				return err
			}
		}
	}
	switch {
	case c.properties > maxStrictProperties:
		return fmt.Errorf("%d properties, more than %d", c.properties, maxStrictProperties)
	case c.enumValues > maxStrictEnumValues:
		return fmt.Errorf("%d enum values, more than %d", c.enumValues, maxStrictEnumValues)
	}
	return nil
}

type strictChecker struct{ properties, enumValues int }

func (c *strictChecker) check(s map[string]any, at string, depth int) error {
	where := at
	if where == "" {
		where = "the root"
	}
	if depth > maxStrictDepth {
		return fmt.Errorf("%s: nested deeper than %d levels", where, maxStrictDepth)
	}
	for k := range s {
		if !strictKeywords[k] && !(depth == 0 && at == "" && (k == "$defs" || k == "definitions")) {
			return fmt.Errorf("%s: keyword %q", where, k)
		}
		if (k == "$defs" || k == "definitions") && at != "" {
			return fmt.Errorf("%s: %s below the root", where, k)
		}
	}
	if ref, ok := s["$ref"].(string); ok {
		if !strings.HasPrefix(ref, "#") {
			return fmt.Errorf("%s: $ref %q outside the schema", where, ref)
		}
		return nil
	}
	if alts, ok := s["anyOf"].([]any); ok {
		if at == "" {
			return errors.New("the root is an anyOf")
		}
		for i, a := range alts {
			am, ok := a.(map[string]any)
			if !ok {
				return fmt.Errorf("%s: anyOf[%d] is not a schema", where, i)
			}
			if err := c.check(am, fmt.Sprintf("%s|%d", at, i), depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	types, err := typesOf(s["type"])
	if err != nil || len(types) == 0 {
		return fmt.Errorf("%s: no type (%v)", where, s["type"])
	}
	for _, t := range types {
		if !strictTypes[t] {
			return fmt.Errorf("%s: type %q", where, t)
		}
	}
	if e, ok := s["enum"].([]any); ok {
		c.enumValues += len(e)
	}
	if slices.Contains(types, "object") {
		if s["additionalProperties"] != false {
			return fmt.Errorf("%s: an object without \"additionalProperties\": false", where)
		}
		props, _ := s["properties"].(map[string]any)
		required, _ := s["required"].([]any)
		if len(required) != len(props) {
			return fmt.Errorf("%s: %d properties, %d required", where, len(props), len(required))
		}
		for _, r := range required {
			if _, ok := props[fmt.Sprint(r)]; !ok {
				return fmt.Errorf("%s: %v is required but not a property", where, r)
			}
		}
		c.properties += len(props)
		for name, p := range props {
			pm, ok := p.(map[string]any)
			if !ok {
				return fmt.Errorf("%s.%s: not a schema", at, name)
			}
			if err := c.check(pm, at+"."+name, depth+1); err != nil {
				return err
			}
		}
	}
	if slices.Contains(types, "array") {
		items, ok := s["items"].(map[string]any)
		if !ok {
			return fmt.Errorf("%s: an array without items", where)
		}
		if err := c.check(items, at+"[]", depth+1); err != nil {
			return err
		}
	}
	return nil
}

// typesOf reads "type": a name or a list of names.
func typesOf(v any) ([]string, error) {
	switch t := v.(type) {
	case nil:
		return nil, nil
	case string:
		return []string{t}, nil
	case []any:
		out := make([]string, 0, len(t))
		for _, x := range t {
			s, ok := x.(string)
			if !ok {
				return nil, fmt.Errorf("type %v", v)
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, fmt.Errorf("type %v", v)
}

// errNotStrict: a schema says something strict mode cannot (an object of any keys, a
// value of any type, an array of anything).
var errNotStrict = errors.New("strict mode cannot say it")

// StrictSchema rewrites an input schema for OpenAI's strict mode: every object closed
// ("additionalProperties": false) with every property required, the optional ones made
// nullable; oneOf as anyOf, allOf merged, const as a one-value enum; and the keywords
// strict mode rejects dropped, those that tell the model something (format, minimum,
// default…) moved into the description. It fails, and the tool stays non-strict, when
// the schema has a part strict mode cannot express or the result does not pass
// [CheckStrictSchema].
func StrictSchema(raw json.RawMessage) (json.RawMessage, error) {
	var root map[string]any
	if err := json.Unmarshal(objectSchema(raw), &root); err != nil {
		return nil, err
	}
	if _, ok := root["anyOf"]; ok {
		return nil, fmt.Errorf("the root is an anyOf: %w", errNotStrict)
	}
	sc := strictConverter{geminiConverter{root: root}}
	out, err := sc.convert(root, true, 0)
	if err != nil {
		return nil, err
	}
	for _, key := range []string{"$defs", "definitions"} {
		defs, ok := root[key].(map[string]any)
		if !ok {
			continue
		}
		conv := map[string]any{}
		for name, d := range defs {
			dm, _ := d.(map[string]any)
			if conv[name], err = sc.convert(dm, false, 1); err != nil {
				return nil, fmt.Errorf("%s/%s: %w", key, name, err)
			}
		}
		out[key] = conv
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	if err := CheckStrictSchema(b); err != nil {
		return nil, fmt.Errorf("%w: %w", errNotStrict, err)
	}
	return b, nil
}

type strictConverter struct{ geminiConverter }

// hinted are the dropped keywords whose values the model should still read, in the
// order the description names them.
var hinted = []string{"format", "pattern", "minLength", "maxLength", "minimum", "exclusiveMinimum",
	"maximum", "exclusiveMaximum", "multipleOf", "minItems", "maxItems", "uniqueItems", "default"}

func (sc strictConverter) convert(s map[string]any, top bool, depth int) (map[string]any, error) {
	if s == nil {
		return nil, fmt.Errorf("a schema of anything: %w", errNotStrict)
	}
	if depth > maxStrictDepth {
		return nil, fmt.Errorf("nested deeper than %d: %w", maxStrictDepth, errNotStrict)
	}
	if ref, ok := s["$ref"].(string); ok {
		if !strings.HasPrefix(ref, "#") {
			return nil, fmt.Errorf("remote $ref %q: %w", ref, errNotStrict)
		}
		return map[string]any{"$ref": ref}, nil
	}
	if merged, ok := allOfMerged(s, func(p map[string]any) map[string]any { return sc.resolved(p, depth) }); ok {
		return sc.convert(merged, top, depth)
	}
	out := map[string]any{}
	var hints []string
	for _, k := range hinted {
		if v, ok := s[k]; ok {
			b, _ := json.Marshal(v)
			hints = append(hints, k+" "+string(b))
		}
	}
	desc := str(s["description"])
	if len(hints) > 0 {
		desc = strings.TrimSpace(desc + " (" + strings.Join(hints, ", ") + ")")
	}
	if desc != "" {
		out["description"] = desc
	}

	alts, _ := s["anyOf"].([]any)
	if alts == nil {
		alts, _ = s["oneOf"].([]any)
	}
	if len(alts) > 0 {
		var conv []any
		for _, a := range alts {
			am, _ := a.(map[string]any)
			c, err := sc.convert(am, false, depth+1)
			if err != nil {
				return nil, err
			}
			conv = append(conv, c)
		}
		out["anyOf"] = conv
		return out, nil
	}

	types, err := typesOf(s["type"])
	if err != nil {
		return nil, err
	}
	enum, _ := s["enum"].([]any)
	if c, ok := s["const"]; ok && enum == nil {
		enum = []any{c}
	}
	if len(types) == 0 {
		switch {
		case s["properties"] != nil:
			types = []string{"object"}
		case s["items"] != nil:
			types = []string{"array"}
		case len(enum) > 0:
			types = enumTypes(enum)
		}
	}
	if len(types) == 0 {
		return nil, fmt.Errorf("a value of any type: %w", errNotStrict)
	}
	if len(types) == 1 {
		out["type"] = types[0]
	} else {
		out["type"] = toAny(types)
	}
	if len(enum) > 0 {
		out["enum"] = enum
	}

	if slices.Contains(types, "object") {
		props, _ := s["properties"].(map[string]any)
		// An object without properties is an object of any keys, except at the top, where
		// it says the tool takes no arguments.
		if len(props) == 0 && !top {
			return nil, fmt.Errorf("an object of any keys: %w", errNotStrict)
		}
		if ap, ok := s["additionalProperties"].(map[string]any); ok && len(ap) > 0 {
			return nil, fmt.Errorf("an object of any keys: %w", errNotStrict)
		}
		required := map[string]bool{}
		if req, ok := s["required"].([]any); ok {
			for _, r := range req {
				required[fmt.Sprint(r)] = true
			}
		}
		names := make([]string, 0, len(props))
		for name := range props {
			names = append(names, name)
		}
		sort.Strings(names)
		conv := map[string]any{}
		for _, name := range names {
			pm, _ := props[name].(map[string]any)
			c, err := sc.convert(pm, false, depth+1)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			if !required[name] {
				c = nullable(c)
			}
			conv[name] = c
		}
		out["properties"] = conv
		out["required"] = toAny(names)
		out["additionalProperties"] = false
	}
	if slices.Contains(types, "array") {
		items, ok := s["items"].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("an array of anything: %w", errNotStrict)
		}
		c, err := sc.convert(items, false, depth+1)
		if err != nil {
			return nil, fmt.Errorf("items: %w", err)
		}
		out["items"] = c
	}
	return out, nil
}

// nullable makes a converted schema also take null: what an optional property becomes
// when every property is required.
func nullable(s map[string]any) map[string]any {
	if alts, ok := s["anyOf"].([]any); ok {
		s["anyOf"] = append(alts, map[string]any{"type": "null"})
		return s
	}
	if _, ok := s["$ref"]; ok {
		return map[string]any{"anyOf": []any{s, map[string]any{"type": "null"}}}
	}
	types, _ := typesOf(s["type"])
	if !slices.Contains(types, "null") {
		s["type"] = toAny(append(types, "null"))
	}
	if e, ok := s["enum"].([]any); ok && !slices.Contains(e, nil) {
		s["enum"] = append(e, nil)
	}
	return s
}

// enumTypes are the JSON types of an enum's values.
func enumTypes(enum []any) []string {
	var out []string
	for _, v := range enum {
		t := "null"
		switch v.(type) {
		case string:
			t = "string"
		case float64:
			t = "number"
		case bool:
			t = "boolean"
		case map[string]any, []any:
			return nil
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
