package localtools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolcall"
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
	if in, err = toolcall.ResolveSchema(info.InputSchema); err != nil {
		return Tool{}, fmt.Errorf("localtools: tool %q: input schema: %w", info.Name, err)
	}
	if len(info.OutputSchema) == 0 && isStruct(reflect.TypeFor[Out]()) {
		if info.OutputSchema, err = inferSchema[Out](); err != nil {
			return Tool{}, fmt.Errorf("localtools: tool %q: output schema: %w", info.Name, err)
		}
	}
	if len(info.OutputSchema) > 0 {
		if out, err = toolcall.ResolveSchema(info.OutputSchema); err != nil {
			return Tool{}, fmt.Errorf("localtools: tool %q: output schema: %w", info.Name, err)
		}
	}
	name := info.Name
	run := func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
		args, err := toolcall.CheckArguments(name, in, args)
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
			return nil, &messages.ToolError{Code: messages.CodeInternal, Message: fmt.Sprintf("the result of tool %q does not match its output schema: %s", name, toolcall.DescribeSchemaError(err)), Err: err}
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
