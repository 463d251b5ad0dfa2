package localtools

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/toolbus/toolbus/pkg/toolcall"
)

func TestParseManifest(t *testing.T) {
	tests := []struct {
		name        string
		data        string
		wantErr     string
		wantTimeout time.Duration
		wantRO      bool
		wantIn      string
	}{
		{name: "minimal", data: `{}`, wantIn: `{"type":"object"}`},
		{name: "full", data: `{"name": "t", "description": "d", "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
			"outputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true, "title": "T"}, "timeout": "1.5s", "title": "ignored", "_meta": {}}`,
			wantTimeout: 1500 * time.Millisecond, wantRO: true, wantIn: `{"type":"object","properties":{"q":{"type":"string"}}}`},
		{name: "timeout in seconds", data: `{"timeout": 3}`, wantTimeout: 3 * time.Second, wantIn: `{"type":"object"}`},
		{name: "null schema", data: `{"inputSchema": null}`, wantIn: `{"type":"object"}`},
		{name: "not JSON", data: `{"name": t}`, wantErr: "not a valid tool manifest"},
		{name: "two values", data: `{} {}`, wantErr: "more than one"},
		{name: "array", data: `[]`, wantErr: "not a valid tool manifest"},
		{name: "other name", data: `{"name": "u"}`, wantErr: "differs"},
		{name: "bad timeout", data: `{"timeout": "soon"}`, wantErr: "duration"},
		{name: "negative timeout", data: `{"timeout": "-1s"}`, wantErr: "negative"},
		{name: "input schema not an object", data: `{"inputSchema": {"type": "array"}}`, wantErr: "inputSchema"},
		{name: "input schema broken", data: `{"inputSchema": {"type": "object", "properties": {"a": {"$ref": "#/nope"}}}}`, wantErr: "inputSchema"},
		{name: "output schema not an object", data: `{"outputSchema": {"type": "string"}}`, wantErr: "outputSchema"},
		{name: "input_schema, as lollms bindings write it", data: `{"input_schema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}`,
			wantIn: `{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`},
		{name: "both spellings", data: `{"inputSchema": {"type": "object"}, "input_schema": {"type": "object"}}`, wantErr: "both inputSchema"},
		{name: "a misspelt key", data: `{"inputschema": {"type": "object"}}`, wantErr: `unknown key "inputschema" (did you mean "inputSchema"?)`},
		{name: "an unknown key", data: `{"handler": "main.py"}`, wantErr: `unknown key "handler"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, err := parseManifest([]byte(tt.data), "t")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if spec.info.Name != "t" || spec.timeout != tt.wantTimeout || spec.info.ReadOnly != tt.wantRO || string(spec.info.InputSchema) != tt.wantIn {
				t.Errorf("spec = %+v, timeout %v", spec.info, spec.timeout)
			}
		})
	}
	if _, err := parseManifest([]byte(`{}`), "bad name"); err == nil {
		t.Error("a tool name with a space was accepted")
	}
}

func FuzzParseManifest(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"name":"tool","inputSchema":{"type":"object","properties":{"a":{"type":"string"}}},"timeout":"2s"}`,
		`{"inputSchema":{"type":"object","$defs":{"x":{"type":"integer"}},"properties":{"a":{"$ref":"#/$defs/x"}}}}`,
		`{"outputSchema":{"type":"object","required":["x"]},"annotations":{"readOnlyHint":true}}`,
		`{"timeout":1e300}`, `[`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		spec, err := parseManifest(data, "tool")
		if err != nil {
			return
		}
		if spec.info.Name != "tool" || spec.in == nil || !json.Valid(spec.info.InputSchema) || spec.timeout < 0 {
			t.Fatalf("accepted %q as %+v", data, spec)
		}
		// The schema accepted must be usable for checking arguments.
		_, _ = toolcall.CheckArguments("tool", spec.in, json.RawMessage(`{}`))
	})
}
