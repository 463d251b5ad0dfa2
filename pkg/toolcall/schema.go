package toolcall

import (
	"encoding/json"
	"strings"
	"unsafe"

	"github.com/toolbus/toolbus/pkg/jsonrepair"
	"github.com/toolbus/toolbus/pkg/jsonscan"
)

// Schema-guided typing: XML-style values are text, and models write "10" for 10; where
// the tool's input schema says what a parameter is, the value is converted to it. A
// value that does not convert is left as it is, for the schema validation downstream
// to report; nothing is ever invented.

// schema is the part of a JSON schema that typing needs. It is read leniently: a part
// it cannot read (a boolean schema, a $ref) types nothing, and the rest still counts.
type schema struct {
	typ   string             // the one type the schema allows besides null, or ""
	null  bool               // the schema allows null too (["string", "null"], anyOf with {"type": "null"})
	props map[string]*schema // the properties of an object
	items *schema            // the schema of each element of an array
}

// parseSchema reads a JSON schema; nil when raw is not a schema object.
func parseSchema(raw json.RawMessage) *schema {
	var in struct {
		Type       json.RawMessage            `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
		Items      json.RawMessage            `json:"items"`
		AnyOf      []json.RawMessage          `json:"anyOf"`
		OneOf      []json.RawMessage          `json:"oneOf"`
	}
	if json.Unmarshal(raw, &in) != nil {
		return nil
	}
	if len(in.Type) == 0 {
		// Optional[int] in Python's tools: {"anyOf": [{"type": "integer"}, {"type": "null"}]}.
		if one := parseOnlyAlternative(in.AnyOf); one != nil {
			return one
		}
		if one := parseOnlyAlternative(in.OneOf); one != nil {
			return one
		}
	}
	s := &schema{typ: typeName(in.Type), null: admitsNull(in.Type)}
	for name, p := range in.Properties {
		if ps := parseSchema(p); ps != nil {
			if s.props == nil {
				s.props = make(map[string]*schema, len(in.Properties))
			}
			s.props[name] = ps
		}
	}
	if len(in.Items) > 0 && in.Items[0] == '{' {
		s.items = parseSchema(in.Items)
	}
	return s
}

// parseOnlyAlternative returns the one alternative of anyOf or oneOf that is not null.
func parseOnlyAlternative(alts []json.RawMessage) *schema {
	var one *schema
	null := false
	for _, a := range alts {
		s := parseSchema(a)
		switch {
		case s == nil:
			return nil
		case s.typ == "null" && s.props == nil && s.items == nil:
			null = true
		case one != nil:
			return nil
		default:
			one = s
		}
	}
	if one != nil && null {
		one.null = true
	}
	return one
}

// admitsNull says whether a schema's "type" names null ("null" or a list holding it).
func admitsNull(raw json.RawMessage) bool {
	return len(raw) > 0 && strings.Contains(string(raw), `"null"`)
}

// typeName returns the one type of a schema's "type" besides null, or "".
func typeName(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return one
	}
	var many []string
	if json.Unmarshal(raw, &many) != nil {
		return ""
	}
	for _, t := range many {
		if t != "null" {
			if one != "" {
				return ""
			}
			one = t
		}
	}
	if one == "" && len(many) > 0 {
		return "null"
	}
	return one
}

// prop returns the schema of property key, or nil.
func (s *schema) prop(key string) *schema {
	if s == nil {
		return nil
	}
	return s.props[key]
}

func (s *schema) typeName() string {
	if s == nil {
		return ""
	}
	return s.typ
}

// A cachedSchema is a tool's schema as parsed, and the text it was parsed from.
type cachedSchema struct {
	raw string
	s   *schema
}

// maxCachedSchemas bounds the schemas an extractor keeps between runs.
const maxCachedSchemas = 1024

// schemaFor returns the input schema of tool, or nil. Parsed schemas are kept from run
// to run, since a catalog's schemas come back with every response.
func (x *extractor) schemaFor(tool string) *schema {
	raw, ok := x.o.Schemas[tool]
	if !ok {
		return nil
	}
	if c, ok := x.schemas[tool]; ok && c.raw == string(raw) {
		return c.s
	}
	if x.schemas == nil || len(x.schemas) >= maxCachedSchemas {
		x.schemas = make(map[string]cachedSchema)
	}
	s := parseSchema(raw)
	x.schemas[tool] = cachedSchema{raw: string(raw), s: s}
	return s
}

// typedValue appends the XML-style value val of a parameter whose schema is sc as JSON:
// as the schema's type when it converts, else as a string. Without a schema only a JSON
// object or array is taken as JSON; when isJSON (DeepSeek's string="false"), any JSON
// value is.
func (x *extractor) typedValue(out []byte, sc *schema, val string, isJSON bool) []byte {
	text := strings.TrimSpace(val)
	v, ok := x.convert(sc.typeName(), text)
	if !ok && isJSON && text != "" {
		var err error
		v, _, err = x.limits().Repair(text)
		ok = err == nil
	}
	if !ok {
		return appendString(out, val)
	}
	if v[0] == '{' || v[0] == '[' {
		if conv := x.coerceValue(sc, unsafe.String(&v[0], len(v))); conv != nil {
			v = conv
		}
	}
	return append(out, v...)
}

// convert returns text as JSON of type typ, when it is one.
func (x *extractor) convert(typ, text string) ([]byte, bool) {
	if text == "" {
		return nil, false
	}
	switch typ {
	case "integer", "number":
		if end := jsonscan.Number(text, 0); end == len(text) {
			return []byte(text), true
		}
		if num, ok := leadingZeroNumber(text); ok {
			return []byte(num), true
		}
	case "boolean":
		switch strings.ToLower(text) {
		case "true":
			return []byte("true"), true
		case "false":
			return []byte("false"), true
		}
	case "null":
		if text == "null" || text == "None" {
			return []byte("null"), true
		}
	case "object", "array", "":
		if typ == "" && jsonscan.Check(text, x.o.MaxDepth, jsonscan.Strict) != jsonscan.OK {
			return nil, false
		}
		v, _, err := x.limits().Repair(text)
		if err == nil && (typ == "" && (v[0] == '{' || v[0] == '[') || typ == "object" && v[0] == '{' || typ == "array" && v[0] == '[') {
			return v, true
		}
	}
	return nil, false
}

// coerce converts the arguments of a call, at any depth, where their JSON type differs
// from what the tool's schema says: "10" for a number, "true" for a boolean, "[1, 2]"
// for an array, 12345 for a string. It returns false when nothing changed.
func (x *extractor) coerce(tool string, args []byte) ([]byte, bool) {
	sc := x.schemaFor(tool)
	if sc == nil {
		return nil, false
	}
	// args is only read, and not kept.
	conv := x.coerceValue(sc, unsafe.String(&args[0], len(args)))
	return conv, conv != nil
}

// coerceValue returns v, valid JSON, converted to what sc says, or nil when nothing
// changes.
func (x *extractor) coerceValue(sc *schema, v string) []byte {
	if sc == nil {
		return nil
	}
	switch typ := sc.typ; {
	case v[0] == '"':
		if typ == "" || typ == "string" {
			return nil
		}
		conv, ok := x.convert(typ, strings.TrimSpace(decodeString(v)))
		if !ok {
			return nil
		}
		if inner := x.coerceValue(sc, unsafe.String(&conv[0], len(conv))); inner != nil {
			return inner // "[\"1\"]" for an array of numbers
		}
		return conv
	case typ == "string":
		if v[0] != '{' && v[0] != '[' && v != "null" {
			return appendString(nil, v)
		}
	case v[0] == '{' && sc.props != nil:
		return coerceMembers(v, func(key string) *schema { return sc.props[decodeString(key)] }, x)
	case v[0] == '[' && sc.items != nil:
		return coerceElements(v, sc.items, x)
	}
	return nil
}

// coerceMembers returns the object obj with each member coerced to the schema that
// schemaOf gives its key, or nil when nothing changes.
func coerceMembers(obj string, schemaOf func(key string) *schema, x *extractor) []byte {
	var out []byte
	last := 0 // obj[:last] is in out
	for it := objectMembers(obj, nil); ; {
		k, vs, ve, ok := it.next()
		if !ok {
			break
		}
		if conv := x.coerceValue(schemaOf(k), obj[vs:ve]); conv != nil {
			if out == nil {
				out = make([]byte, 0, len(obj)+16)
			}
			out = append(append(out, obj[last:vs]...), conv...)
			last = ve
		}
	}
	if out == nil {
		return nil
	}
	return append(out, obj[last:]...)
}

// coerceElements returns the array arr with each element coerced to items, or nil when
// nothing changes.
func coerceElements(arr string, items *schema, x *extractor) []byte {
	var out []byte
	last := 0
	for it := arrayElements(arr); ; {
		vs, ve, ok := it.nextSpan()
		if !ok {
			break
		}
		if conv := x.coerceValue(items, arr[vs:ve]); conv != nil {
			if out == nil {
				out = make([]byte, 0, len(arr)+16)
			}
			out = append(append(out, arr[last:vs]...), conv...)
			last = ve
		}
	}
	if out == nil {
		return nil
	}
	return append(out, arr[last:]...)
}

// appendString appends s as a JSON string; bytes that are not UTF-8 become U+FFFD.
func appendString(out []byte, s string) []byte {
	out, _ = jsonrepair.AppendString(out, s)
	return out
}
