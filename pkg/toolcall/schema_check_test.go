package toolcall

import (
	"encoding/json"
	"testing"
)

func TestArgumentName(t *testing.T) {
	tests := []struct{ ptr, want string }{
		{"", ""},
		{"root", ""},
		{"/properties/a", "a"},
		{"/properties/a/properties/b", "a.b"},
		{"/properties/items/items/properties/sku", "items[].sku"},
		{"/properties/a~1b", "a/b"},
		{"/properties/p/prefixItems/2", "p[2]"},
		{"/properties/m/additionalProperties", "m.*"},
		{"/properties/m/patternProperties/^x$", "m.*"},
		{"/properties/u/anyOf/1/properties/v", "u.v"},
	}
	for _, tt := range tests {
		if got := argumentName(tt.ptr); got != tt.want {
			t.Errorf("argumentName(%q) = %q, want %q", tt.ptr, got, tt.want)
		}
	}
}

func TestResolveSchemaRejectsEndlessRefs(t *testing.T) {
	tests := []struct {
		name    string
		schema  string
		wantErr bool
	}{
		{"root refers to itself", `{"type":"object","$ref":"#"}`, true},
		{"allOf back to the root", `{"type":"object","allOf":[{"$ref":"#"}]}`, true},
		{"def refers to itself", `{"type":"object","$defs":{"a":{"$ref":"#/$defs/a"}},"properties":{"x":{"$ref":"#/$defs/a"}}}`, true},
		{"recursion through a property", `{"type":"object","properties":{"child":{"$ref":"#"}}}`, false},
		{"recursion through items", `{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#"}}}}`, false},
		{"plain", `{"type":"object","properties":{"id":{"type":"integer"}}}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ResolveSchema([]byte(tt.schema))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
		})
	}
}

// Defaults are applied at any depth; arguments that need none come back as written.
func TestCheckArgumentsDefaults(t *testing.T) {
	schema, err := ResolveSchema(json.RawMessage(`{"type": "object", "properties": {
		"unit": {"type": "string", "default": "mm"},
		"pipe": {"type": "object", "properties": {"material": {"type": "string", "default": "steel"}, "d": {"type": "number"}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ in, want string }{
		{`{"pipe": {"d": 10}}`, `{"pipe":{"d":10,"material":"steel"},"unit":"mm"}`},
		{`{"unit": "m", "pipe": {"d": 10}}`, `{"pipe":{"d":10,"material":"steel"},"unit":"m"}`},
		{`{"unit": "m", "pipe": {"material": "Cu", "d": 10}}`, `{"unit": "m", "pipe": {"material": "Cu", "d": 10}}`},
	} {
		got, err := CheckArguments("t", schema, json.RawMessage(tc.in))
		if err != nil || string(got) != tc.want {
			t.Errorf("CheckArguments(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
}
