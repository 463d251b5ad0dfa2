package localtools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/toolbus/toolbus/pkg/messages"
)

// AddFunc registers fn as the tool described by info; see [NewTool].
func AddFunc[In, Out any](r *Registry, info messages.ToolInfo, fn func(context.Context, In) (Out, error)) error {
	t, err := NewTool(info, fn)
	if err != nil {
		return err
	}
	return r.Add(t)
}

// NewTool makes a [Tool] of a typed function, as the go-sdk's mcp.AddTool does.
//
// An empty info.InputSchema is inferred from In (a struct: a field is required unless
// its json tag says omitempty or omitzero; the jsonschema tag is its description). An
// empty info.OutputSchema is inferred from Out when Out is a struct or a pointer to
// one. Every call's arguments are checked against the input schema, defaults applied,
// before fn sees them: a mismatch is an invalid_arguments error naming the argument.
// fn's error is passed on when it is a *messages.ToolError, becomes a timeout when it
// is a context deadline, and a tool_error otherwise.
func NewTool[In, Out any](info messages.ToolInfo, fn func(context.Context, In) (Out, error)) (Tool, error) {
	if info.Name == "" || fn == nil {
		return Tool{}, errors.New("localtools: a tool needs a name and a function")
	}
	var (
		in, out *jsonschema.Resolved
		err     error
	)
	if len(info.InputSchema) == 0 {
		if info.InputSchema, err = inferSchema[In](); err != nil {
			return Tool{}, fmt.Errorf("localtools: tool %q: input schema: %w", info.Name, err)
		}
	}
	if in, err = resolveSchema(info.InputSchema); err != nil {
		return Tool{}, fmt.Errorf("localtools: tool %q: input schema: %w", info.Name, err)
	}
	if len(info.OutputSchema) == 0 && isStruct(reflect.TypeFor[Out]()) {
		if info.OutputSchema, err = inferSchema[Out](); err != nil {
			return Tool{}, fmt.Errorf("localtools: tool %q: output schema: %w", info.Name, err)
		}
	}
	if len(info.OutputSchema) > 0 {
		if out, err = resolveSchema(info.OutputSchema); err != nil {
			return Tool{}, fmt.Errorf("localtools: tool %q: output schema: %w", info.Name, err)
		}
	}
	name := info.Name
	run := func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
		args, err := checkArguments(name, in, args)
		if err != nil {
			return nil, err
		}
		var v In
		if err := json.Unmarshal(args, &v); err != nil {
			return nil, messages.Errorf(messages.CodeInvalidArguments, "invalid arguments for tool %q: %v", name, err)
		}
		res, err := fn(ctx, v)
		if err != nil {
			return nil, toolFailure(name, err)
		}
		b, err := json.Marshal(res)
		if err != nil {
			return nil, &messages.ToolError{Code: messages.CodeInternal, Message: fmt.Sprintf("the result of tool %q cannot be encoded", name), Err: err}
		}
		if err := checkResult(out, b); err != nil {
			return nil, &messages.ToolError{Code: messages.CodeInternal, Message: fmt.Sprintf("the result of tool %q does not match its output schema: %s", name, describeSchemaError(err)), Err: err}
		}
		return b, nil
	}
	return Tool{Info: info, Run: run}, nil
}

// toolFailure turns the error of a tool into the *messages.ToolError the model sees.
func toolFailure(name string, err error) error {
	var te *messages.ToolError
	switch {
	case errors.As(err, &te):
		return err
	case errors.Is(err, context.DeadlineExceeded):
		return &messages.ToolError{Code: messages.CodeTimeout, Message: fmt.Sprintf("the tool %q did not finish in time", name), Err: err}
	default:
		return &messages.ToolError{Code: messages.CodeToolError, Message: err.Error(), Err: err}
	}
}

var rawMessageType = reflect.TypeFor[json.RawMessage]()

func isStruct(t reflect.Type) bool {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind() == reflect.Struct
}

// inferSchema is the JSON schema of T's JSON form; T must be an object.
func inferSchema[T any]() (json.RawMessage, error) {
	t := reflect.TypeFor[T]()
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Interface || t == rawMessageType {
		return json.RawMessage(`{"type":"object"}`), nil
	}
	s, err := jsonschema.ForType(t, &jsonschema.ForOptions{})
	if err != nil {
		return nil, err
	}
	if s.Type != "object" {
		return nil, fmt.Errorf("%v is not a JSON object; use a struct or a map", t)
	}
	return json.Marshal(s)
}

// resolveSchema parses a tool schema, which must describe a JSON object.
func resolveSchema(raw json.RawMessage) (*jsonschema.Resolved, error) {
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("not a JSON schema: %w", err)
	}
	if s.Type != "object" {
		return nil, errors.New(`the schema's type must be "object"`)
	}
	return s.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true})
}

// checkArguments validates args against schema, applying its defaults, and returns the
// arguments to decode. Empty args are an empty object.
func checkArguments(tool string, schema *jsonschema.Resolved, args json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(args)) == 0 || bytes.Equal(bytes.TrimSpace(args), []byte("null")) {
		args = json.RawMessage("{}")
	}
	if schema == nil {
		return args, nil
	}
	var v any
	if err := json.Unmarshal(args, &v); err != nil {
		return nil, messages.Errorf(messages.CodeInvalidArguments, "invalid arguments for tool %q: not JSON: %v", tool, err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, messages.Errorf(messages.CodeInvalidArguments, "invalid arguments for tool %q: the arguments must be a JSON object", tool)
	}
	if err := schema.ApplyDefaults(&m); err != nil {
		return nil, messages.Errorf(messages.CodeInvalidArguments, "invalid arguments for tool %q: %s", tool, describeSchemaError(err))
	}
	if err := schema.Validate(m); err != nil {
		return nil, messages.Errorf(messages.CodeInvalidArguments, "invalid arguments for tool %q: %s", tool, describeSchemaError(err))
	}
	return json.Marshal(m)
}

// checkResult validates a tool's JSON result against its output schema, if any.
func checkResult(schema *jsonschema.Resolved, result []byte) error {
	if schema == nil {
		return nil
	}
	var v any
	if err := json.Unmarshal(result, &v); err != nil {
		return err
	}
	return schema.Validate(v)
}

// describeSchemaError rewrites a jsonschema validation error so that it names the
// argument instead of the schema location: jsonschema nests "validating <pointer>: "
// prefixes, and the innermost pointer says which argument failed.
func describeSchemaError(err error) string {
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
