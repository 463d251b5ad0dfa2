package localtools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/toolbus/toolbus/pkg/messages"
)

type orderIn struct {
	Customer string   `json:"customer" jsonschema:"the customer's id"`
	Items    []item   `json:"items"`
	Note     string   `json:"note,omitempty"`
	Priority *int     `json:"priority,omitempty"`
	Address  *address `json:"address,omitempty"`
}

type item struct {
	SKU      string `json:"sku"`
	Quantity int    `json:"quantity"`
}

type address struct {
	City string `json:"city"`
}

type orderOut struct {
	ID    string `json:"id"`
	Items int    `json:"items"`
}

func TestNewToolArguments(t *testing.T) {
	tool, err := NewTool(messages.ToolInfo{Name: "order"}, func(ctx context.Context, in orderIn) (orderOut, error) {
		switch in.Customer {
		case "refused":
			return orderOut{}, messages.Errorf(messages.CodeNotAllowed, "customer is blocked")
		case "broken":
			return orderOut{}, errors.New("database is down")
		case "slow":
			return orderOut{}, fmt.Errorf("query: %w", context.DeadlineExceeded)
		}
		return orderOut{ID: in.Customer + "-1", Items: len(in.Items)}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    string
		want    string
		wantErr messages.ErrorCode
		wantMsg string
	}{
		{name: "valid", args: `{"customer": "c7", "items": [{"sku": "a", "quantity": 2}]}`, want: `{"id":"c7-1","items":1}`},
		{name: "optional fields", args: `{"customer": "c7", "items": [], "note": "x", "priority": 2, "address": {"city": "Wien"}}`, want: `{"id":"c7-1","items":0}`},
		{name: "missing required", args: `{"items": []}`, wantErr: messages.CodeInvalidArguments, wantMsg: `"customer"`},
		{name: "wrong type", args: `{"customer": 7, "items": []}`, wantErr: messages.CodeInvalidArguments, wantMsg: `argument "customer"`},
		{name: "wrong type in a list", args: `{"customer": "c", "items": [{"sku": "a", "quantity": "two"}]}`, wantErr: messages.CodeInvalidArguments, wantMsg: `argument "items[].quantity"`},
		{name: "missing in a nested object", args: `{"customer": "c", "items": [], "address": {}}`, wantErr: messages.CodeInvalidArguments, wantMsg: `argument "address"`},
		{name: "unknown argument", args: `{"customer": "c", "items": [], "colour": "red"}`, wantErr: messages.CodeInvalidArguments, wantMsg: `"colour"`},
		{name: "not an object", args: `[1]`, wantErr: messages.CodeInvalidArguments, wantMsg: "must be a JSON object"},
		{name: "not JSON", args: `{customer`, wantErr: messages.CodeInvalidArguments, wantMsg: "not JSON"},
		{name: "empty is an empty object", args: ``, wantErr: messages.CodeInvalidArguments, wantMsg: `"customer"`},
		{name: "tool's own code kept", args: `{"customer": "refused", "items": []}`, wantErr: messages.CodeNotAllowed, wantMsg: "blocked"},
		{name: "plain error is a tool_error", args: `{"customer": "broken", "items": []}`, wantErr: messages.CodeToolError, wantMsg: "database is down"},
		{name: "deadline is a timeout", args: `{"customer": "slow", "items": []}`, wantErr: messages.CodeTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := tool.Run(context.Background(), json.RawMessage(tt.args))
			if tt.wantErr == "" {
				if err != nil || string(out) != tt.want {
					t.Fatalf("got %s, %v; want %s", out, err, tt.want)
				}
				return
			}
			var te *messages.ToolError
			if !errors.As(err, &te) || te.Code != tt.wantErr || !strings.Contains(te.Message, tt.wantMsg) {
				t.Fatalf("err = %v, want %s saying %s", err, tt.wantErr, tt.wantMsg)
			}
		})
	}
}

func TestNewToolSchemas(t *testing.T) {
	type noJSON struct {
		Fn func() `json:"fn"`
	}
	tests := []struct {
		name       string
		make       func() (Tool, error)
		wantErr    bool
		wantIn     string // in the input schema
		wantOut    string // in the output schema; "-" for none
		args, want string // a call, when set
	}{
		{
			name: "inferred",
			make: func() (Tool, error) {
				return NewTool(messages.ToolInfo{Name: "t"}, func(context.Context, orderIn) (orderOut, error) { return orderOut{}, nil })
			},
			wantIn: `"customer":{"type":"string","description":"the customer's id"}`, wantOut: `"id":{"type":"string"}`,
		},
		{
			name: "pointers",
			make: func() (Tool, error) {
				return NewTool(messages.ToolInfo{Name: "t"}, func(context.Context, *item) (*orderOut, error) { return &orderOut{}, nil })
			},
			wantIn: `"sku"`, wantOut: `"id"`,
		},
		{
			name: "given input schema with a default",
			make: func() (Tool, error) {
				return NewTool(messages.ToolInfo{Name: "t", InputSchema: json.RawMessage(`{"type":"object","properties":{"sku":{"type":"string","default":"none"},"quantity":{"type":"integer"}}}`)},
					func(_ context.Context, in item) (item, error) { return in, nil })
			},
			wantIn: `"default":"none"`, wantOut: `"quantity"`,
			args: `{"quantity": 3}`, want: `{"sku":"none","quantity":3}`,
		},
		{
			name: "any input, map output has no output schema",
			make: func() (Tool, error) {
				return NewTool(messages.ToolInfo{Name: "t"}, func(context.Context, any) (map[string]int, error) { return map[string]int{"n": 1}, nil })
			},
			wantIn: `{"type":"object"}`, wantOut: "-",
			args: `{"whatever": true}`, want: `{"n":1}`,
		},
		{
			name: "raw input",
			make: func() (Tool, error) {
				return NewTool(messages.ToolInfo{Name: "t"}, func(_ context.Context, in json.RawMessage) (json.RawMessage, error) { return in, nil })
			},
			wantIn: `{"type":"object"}`, wantOut: "-",
			args: `{"a":1}`, want: `{"a":1}`,
		},
		{
			name: "given output schema",
			make: func() (Tool, error) {
				return NewTool(messages.ToolInfo{Name: "t", OutputSchema: json.RawMessage(`{"type":"object","properties":{"ok":{"type":"boolean"}}}`)},
					func(context.Context, any) (any, error) { return map[string]bool{"ok": true}, nil })
			},
			wantIn: `{"type":"object"}`, wantOut: `"ok"`, args: `{}`, want: `{"ok":true}`,
		},
		{
			name: "input not an object",
			make: func() (Tool, error) {
				return NewTool(messages.ToolInfo{Name: "t"}, func(context.Context, string) (any, error) { return nil, nil })
			},
			wantErr: true,
		},
		{
			name: "input type without a schema",
			make: func() (Tool, error) {
				return NewTool(messages.ToolInfo{Name: "t"}, func(context.Context, noJSON) (any, error) { return nil, nil })
			},
			wantErr: true,
		},
		{
			name: "given schema not an object",
			make: func() (Tool, error) {
				return NewTool(messages.ToolInfo{Name: "t", InputSchema: json.RawMessage(`{"type":"array"}`)}, func(context.Context, any) (any, error) { return nil, nil })
			},
			wantErr: true,
		},
		{
			name: "given schema not JSON",
			make: func() (Tool, error) {
				return NewTool(messages.ToolInfo{Name: "t", InputSchema: json.RawMessage(`{`)}, func(context.Context, any) (any, error) { return nil, nil })
			},
			wantErr: true,
		},
		{
			name: "no name",
			make: func() (Tool, error) {
				return NewTool(messages.ToolInfo{}, func(context.Context, any) (any, error) { return nil, nil })
			},
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool, err := tt.make()
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if !strings.Contains(string(tool.Info.InputSchema), tt.wantIn) {
				t.Errorf("input schema %s lacks %s", tool.Info.InputSchema, tt.wantIn)
			}
			if tt.wantOut == "-" && len(tool.Info.OutputSchema) != 0 || tt.wantOut != "-" && !strings.Contains(string(tool.Info.OutputSchema), tt.wantOut) {
				t.Errorf("output schema %s, want %s", tool.Info.OutputSchema, tt.wantOut)
			}
			if tt.args != "" {
				if out, err := tool.Run(context.Background(), json.RawMessage(tt.args)); err != nil || string(out) != tt.want {
					t.Errorf("Run = %s, %v; want %s", out, err, tt.want)
				}
			}
		})
	}
}

func TestNewToolOutputChecked(t *testing.T) {
	tool, err := NewTool(messages.ToolInfo{Name: "t", OutputSchema: json.RawMessage(`{"type":"object","required":["ok"]}`)},
		func(context.Context, any) (map[string]int, error) { return map[string]int{"n": 1}, nil })
	if err != nil {
		t.Fatal(err)
	}
	_, err = tool.Run(context.Background(), nil)
	if te := messages.AsToolError(err); te.Code != messages.CodeInternal || !strings.Contains(te.Message, "output schema") {
		t.Errorf("err = %v, want internal: does not match its output schema", err)
	}
}

func TestRegistry(t *testing.T) {
	r := New()
	if err := r.Add(Tool{Info: messages.ToolInfo{Name: "x"}}); err == nil {
		t.Error("Add accepted a tool without a function")
	}
	if err := AddFunc(r, messages.ToolInfo{Name: "b"}, func(context.Context, any) (any, error) { return "b", nil }); err != nil {
		t.Fatal(err)
	}
	if err := AddFunc(r, messages.ToolInfo{Name: "a"}, func(context.Context, any) (any, error) { return "a", nil }); err != nil {
		t.Fatal(err)
	}
	if err := AddFunc(r, messages.ToolInfo{Name: "bad"}, func(context.Context, int) (any, error) { return nil, nil }); err == nil {
		t.Error("AddFunc accepted an int input")
	}
	// A folder tool of the same name as an added one is hidden by it.
	dir := toolsFolder(t, "sh_echo")
	f, err := NewFolder(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.AddFolder(f)
	if err := AddFunc(r, messages.ToolInfo{Name: "sh_echo", Description: "in Go"}, func(context.Context, any) (any, error) { return "go", nil }); err != nil {
		t.Fatal(err)
	}
	if got := toolNames(r); strings.Join(got, ",") != "a,b,sh_echo" {
		t.Errorf("Tools = %v", got)
	}
	if tool, _ := r.Lookup("sh_echo"); tool.Info.Description != "in Go" {
		t.Errorf("sh_echo = %+v, want the Go one", tool.Info)
	}
	if _, ok := r.Lookup("nope"); ok {
		t.Error("Lookup found an unknown tool")
	}
}
