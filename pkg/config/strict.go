package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/toolbus/toolbus/pkg/catalog"
)

// Unknown keys. A configuration file is also the one MCP clients read, so keys toolbus
// does not know are of two kinds:
//
//   - inside toolbus's own sections (engineering, local, parser, executor, health, nats)
//     every unknown key is a mistake: an error naming its path and the closest known key;
//   - at the top level and in an mcpServers entry, a key other clients use ("autoApprove",
//     "alwaysAllow", an app's own settings) is ignored and listed in Config.Ignored, but one
//     that is a near miss of a key toolbus knows ("mcpServer", "timout", "allowedtools")
//     is an error, since toolbus would otherwise silently run without it.

// ownSections are the top-level keys whose content is toolbus's alone.
var ownSections = map[string]bool{"engineering": true, "local": true, "parser": true, "executor": true, "health": true, "nats": true}

// unknownKeys checks v, a decoded JSON value, against the JSON fields of t. It returns
// the errors of mistaken keys and the paths of ignored ones.
func unknownKeys(path string, v any, t reflect.Type, strict bool) (errs []string, ignored []string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	// A value with its own decoding (a duration) has no keys to check; a struct that
	// decodes itself (a server entry taking a command line as a list) still has its fields.
	if t.Kind() != reflect.Struct && (t.Implements(reflect.TypeFor[json.Unmarshaler]()) || reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]())) {
		return nil, nil
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, nil // a type error, which decoding reports
		}
		fields := jsonFields(t)
		// A type that decodes itself may accept other names for its fields.
		if a, ok := reflect.New(t).Interface().(interface{ JSONAliases() map[string]string }); ok {
			for alias, field := range a.JSONAliases() {
				if f, ok := fields[field]; ok {
					fields[alias] = f
				}
			}
		}
		names := make([]string, 0, len(fields))
		for name := range fields {
			names = append(names, name)
		}
		sort.Strings(names)
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			at := join(path, k)
			f, ok := fields[k]
			if !ok {
				near := nearest(k, names)
				switch {
				case strict:
					errs = append(errs, unknownError(at, near))
				case near != "":
					errs = append(errs, unknownError(at, near))
				default:
					ignored = append(ignored, at)
				}
				continue
			}
			e, i := unknownKeys(at, obj[k], f.Type, strict || (path == "" && ownSections[k]))
			errs, ignored = append(errs, e...), append(ignored, i...)
		}
	case reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, nil
		}
		for k, val := range obj {
			e, i := unknownKeys(join(path, k), val, t.Elem(), strict)
			errs, ignored = append(errs, e...), append(ignored, i...)
		}
	case reflect.Slice, reflect.Array:
		arr, ok := v.([]any)
		if !ok {
			return nil, nil
		}
		for n, val := range arr {
			e, i := unknownKeys(fmt.Sprintf("%s[%d]", path, n), val, t.Elem(), strict)
			errs, ignored = append(errs, e...), append(ignored, i...)
		}
	}
	return errs, ignored
}

func unknownError(at, near string) string {
	if near == "" {
		return fmt.Sprintf("unknown key %q", at)
	}
	return fmt.Sprintf("unknown key %q (did you mean %q?)", at, near)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// jsonFields are the fields of a struct by their JSON names (embedded structs' fields
// included).
func jsonFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					out[k] = v
				}
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f
	}
	return out
}

// nearest is the known key a key is a near miss of: the same but for case, '_' and '-',
// or within an edit distance of 2 (a third of a short key); "" when there is none.
func nearest(key string, known []string) string {
	norm := func(s string) string {
		return strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(s))
	}
	best, bestD := "", 0
	for _, k := range known {
		if norm(k) == norm(key) {
			return k
		}
		d := catalog.EditDistance(strings.ToLower(key), strings.ToLower(k))
		if d <= min(2, max(1, len(k)/3)) && (best == "" || d < bestD) {
			best, bestD = k, d
		}
	}
	return best
}

// syntaxError says where in data a JSON error is: line and column.
func syntaxError(source string, data []byte, err error) error {
	var offset int64 = -1
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		offset = se.Offset
	case errors.As(err, &te):
		offset = te.Offset
	}
	if offset < 0 || offset > int64(len(data)) {
		return fmt.Errorf("%s: not valid JSON: %w", source, err)
	}
	before := data[:offset]
	line := 1 + strings.Count(string(before), "\n")
	col := int(offset) - strings.LastIndex(string(before), "\n") - 1 // the offset is just past the byte at fault
	return fmt.Errorf("%s:%d:%d: not valid JSON: %w", source, line, col, err)
}
