package toolcall

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// Schema-guided typing: XML-style values are text, and models write "10" for 10; where
// the tool's input schema says what a parameter is, the value is converted to it. A
// value that does not convert is left as it is, for the schema validation downstream
// to report; nothing is ever invented.

// schema is the part of a JSON schema that typing needs.
type schema struct {
	Type       json.RawMessage    `json:"type"`
	Properties map[string]*schema `json:"properties"`
}

// typeName returns the one type the schema allows besides null, or "".
func (s *schema) typeName() string {
	if s == nil || len(s.Type) == 0 {
		return ""
	}
	var one string
	if json.Unmarshal(s.Type, &one) == nil {
		return one
	}
	var many []string
	if json.Unmarshal(s.Type, &many) != nil {
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
	return one
}

// schemaFor returns the input schema of tool, or nil.
func (x *extractor) schemaFor(tool string) *schema {
	raw, ok := x.o.Schemas[tool]
	if !ok {
		return nil
	}
	if s, ok := x.schemas[tool]; ok {
		return s
	}
	var s *schema
	if json.Unmarshal(raw, &s) != nil {
		s = nil
	}
	if x.schemas == nil {
		x.schemas = make(map[string]*schema)
	}
	x.schemas[tool] = s
	return s
}

// paramType returns the schema type of parameter key of tool, or "".
func (x *extractor) paramType(tool, key string) string {
	if s := x.schemaFor(tool); s != nil {
		return s.Properties[key].typeName()
	}
	return ""
}

// typedValue appends the XML-style value val of parameter key as JSON: as the schema's
// type when it converts, else as a string. Without a schema only a JSON object or array
// is taken as JSON.
func (x *extractor) typedValue(out []byte, tool, key, val string) []byte {
	if v, ok := x.convert(x.paramType(tool, key), strings.TrimSpace(val)); ok {
		return append(out, v...)
	}
	return appendString(out, val)
}

// convert returns text as JSON of type typ, when it is one.
func (x *extractor) convert(typ, text string) ([]byte, bool) {
	if text == "" {
		return nil, false
	}
	switch typ {
	case "integer", "number":
		if end := scanNumber(text, 0); end == len(text) {
			return []byte(text), true
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
		if typ == "" && checkStrict(text, x.o.MaxDepth) != strictOK {
			return nil, false
		}
		v, _, err := repairJSON(text, x.o.MaxDepth, x.o.MaxInputSize)
		if err == nil && (typ == "" && (v[0] == '{' || v[0] == '[') || typ == "object" && v[0] == '{' || typ == "array" && v[0] == '[') {
			return v, true
		}
	}
	return nil, false
}

// coerce converts the top-level arguments of a call whose JSON type differs from what
// the tool's schema says: "10" for a number, "true" for a boolean, "[1, 2]" for an
// array, 12345 for a string. It returns false when nothing changed.
func (x *extractor) coerce(tool string, args []byte) ([]byte, bool) {
	sc := x.schemaFor(tool)
	if sc == nil || len(sc.Properties) == 0 {
		return nil, false
	}
	src := string(args)
	var out []byte
	last := 0 // src[:last] is in out
	for it := objectMembers(src); ; {
		k, vs, ve, ok := it.next()
		if !ok {
			break
		}
		v := src[vs:ve]
		typ := sc.Properties[decodeString(k)].typeName()
		var conv []byte
		switch {
		case typ == "" || typ == "string" && v[0] == '"':
		case typ == "string":
			if v[0] != '{' && v[0] != '[' && v != "null" {
				conv = appendString(nil, v)
			}
		case v[0] == '"':
			conv, _ = x.convert(typ, strings.TrimSpace(decodeString(v)))
		}
		if conv != nil {
			if out == nil {
				out = make([]byte, 0, len(src)+16)
			}
			out = append(out, src[last:vs]...)
			out = append(out, conv...)
			last = ve
		}
	}
	if out == nil {
		return nil, false
	}
	return append(out, src[last:]...), true
}

// appendString appends s as a JSON string; bytes that are not UTF-8 become U+FFFD.
func appendString(out []byte, s string) []byte {
	out = append(out, '"')
	for i := 0; i < len(s); {
		start := i
		for i < len(s) && plainStringByte[s[i]] {
			i++
		}
		out = append(out, s[start:i]...)
		if i >= len(s) {
			break
		}
		switch c := s[i]; {
		case c == '"' || c == '\\':
			out = append(out, '\\', c)
			i++
		case c == '\n':
			out = append(out, `\n`...)
			i++
		case c == '\r':
			out = append(out, `\r`...)
			i++
		case c == '\t':
			out = append(out, `\t`...)
			i++
		case c < ' ':
			const hex = "0123456789abcdef"
			out = append(out, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
			i++
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				out = append(out, "\uFFFD"...)
			} else {
				out = append(out, s[i:i+size]...)
			}
			i += size
		}
	}
	return append(out, '"')
}
