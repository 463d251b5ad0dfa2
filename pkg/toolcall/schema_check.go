package toolcall

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/toolbus/toolbus/pkg/messages"
)

// Arguments are checked against a tool's input schema in one place, for the parser (schemas
// from the catalog) and for local tools alike.

// ResolveSchema parses a tool schema, which must describe a JSON object.
func ResolveSchema(raw json.RawMessage) (*jsonschema.Resolved, error) {
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("not a JSON schema: %w", err)
	}
	if s.Type != "object" {
		return nil, errors.New(`the schema's type must be "object"`)
	}
	var tree any
	_ = json.Unmarshal(raw, &tree)
	if at, ok := selfReference(tree, ""); ok {
		return nil, fmt.Errorf("the $ref at %s refers back to a schema that encloses it without descending into the value: validation would never end", at)
	}
	return s.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true})
}

// descends are the keywords whose subschemas apply to a part of the value, not the
// value itself: a $ref under one of them can recurse safely.
var descends = map[string]bool{
	"properties": true, "patternProperties": true, "additionalProperties": true, "propertyNames": true,
	"items": true, "prefixItems": true, "additionalItems": true, "contains": true,
	"unevaluatedProperties": true, "unevaluatedItems": true,
}

// selfReference finds a local $ref that points at a schema enclosing it (or itself) with
// no descending keyword between them: jsonschema-go would validate the same value against
// the same schema for ever. (Cycles through several $defs are not detected.)
func selfReference(v any, path string) (string, bool) {
	var walk func(v any, path string, descended map[string]bool) (string, bool)
	walk = func(v any, path string, descended map[string]bool) (string, bool) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok && strings.HasPrefix(ref, "#") {
				target := strings.TrimPrefix(ref, "#")
				if (path == target || strings.HasPrefix(path, target+"/")) && !descended[target] {
					return path + "/$ref", true
				}
			}
			for k, x := range v {
				child := path + "/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(k)
				next := descended
				if descends[k] {
					// Everything enclosing this keyword is now reached only through it.
					next = map[string]bool{}
					for p := range descended {
						next[p] = true
					}
					for p := path; ; {
						next[p] = true
						i := strings.LastIndex(p, "/")
						if i < 0 {
							break
						}
						p = p[:i]
					}
				}
				if at, ok := walk(x, child, next); ok {
					return at, true
				}
			}
		case []any:
			for i, x := range v {
				if at, ok := walk(x, path+"/"+strconv.Itoa(i), descended); ok {
					return at, true
				}
			}
		}
		return "", false
	}
	return walk(v, path, map[string]bool{})
}

// CheckArguments validates args against schema, applying its defaults, and returns the
// arguments to decode. Empty args are an empty object.
func CheckArguments(tool string, schema *jsonschema.Resolved, args json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(args)) == 0 || bytes.Equal(bytes.TrimSpace(args), []byte("null")) {
		args = json.RawMessage("{}")
	}
	if schema == nil {
		return args, nil
	}
	var v any
	if err := json.Unmarshal(args, &v); err != nil {
		return nil, messages.Errorf(messages.CodeInvalidArguments, "invalid arguments for tool %q: not JSON: %v", messages.EchoName(tool), err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, messages.Errorf(messages.CodeInvalidArguments, "invalid arguments for tool %q: the arguments must be a JSON object", messages.EchoName(tool))
	}
	members := countMembers(m)
	if err := schema.ApplyDefaults(&m); err != nil {
		return nil, messages.Errorf(messages.CodeInvalidArguments, "invalid arguments for tool %q: %s", messages.EchoName(tool), DescribeSchemaError(err))
	}
	if err := schema.Validate(m); err != nil {
		return nil, messages.Errorf(messages.CodeInvalidArguments, "invalid arguments for tool %q: %s", messages.EchoName(tool), DescribeSchemaError(err))
	}
	if countMembers(m) == members {
		// No default was added (defaults only ever add members): the arguments stand as
		// the model wrote them, in its order, and need no encoding again.
		return args, nil
	}
	return json.Marshal(m)
}

// countMembers counts the object members in v, at every depth.
func countMembers(v any) int {
	n := 0
	switch v := v.(type) {
	case map[string]any:
		n += len(v)
		for _, x := range v {
			n += countMembers(x)
		}
	case []any:
		for _, x := range v {
			n += countMembers(x)
		}
	}
	return n
}

// DescribeSchemaError rewrites a jsonschema validation error so that it names the
// argument instead of the schema location: jsonschema nests "validating <pointer>: "
// prefixes, and the innermost pointer says which argument failed.
func DescribeSchemaError(err error) string {
	const prefix = "validating "
	msg, ptr := err.Error(), ""
	for {
		i := strings.Index(msg, prefix)
		if i < 0 {
			break
		}
		rest := msg[i+len(prefix):]
		j := strings.Index(rest, ": ")
		if j < 0 || !(rest[:j] == "root" || strings.HasPrefix(rest[:j], "/")) {
			break
		}
		ptr, msg = rest[:j], rest[j+2:]
	}
	if name := argumentName(ptr); name != "" {
		return fmt.Sprintf("argument %q: %s", name, msg)
	}
	return msg
}

// argumentName turns a schema pointer like /properties/a/items/properties/b into a.[].b.
func argumentName(ptr string) string {
	if ptr == "" || ptr == "root" {
		return ""
	}
	var parts []string
	segs := strings.Split(strings.TrimPrefix(ptr, "/"), "/")
	for i := 0; i < len(segs); i++ {
		switch segs[i] {
		case "properties":
			if i+1 < len(segs) {
				i++
				parts = append(parts, strings.NewReplacer("~1", "/", "~0", "~").Replace(segs[i]))
			}
		case "items", "additionalItems":
			parts = append(parts, "[]")
		case "prefixItems":
			if i+1 < len(segs) {
				i++
				if n, err := strconv.Atoi(segs[i]); err == nil {
					parts = append(parts, fmt.Sprintf("[%d]", n))
				}
			}
		case "additionalProperties":
			parts = append(parts, "*")
		case "patternProperties":
			i++
			parts = append(parts, "*")
		}
	}
	return strings.ReplaceAll(strings.Join(parts, "."), ".[", "[")
}
