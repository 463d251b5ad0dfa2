package dialect_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"testing"

	"github.com/toolbus/toolbus/internal/mcptest"
	"github.com/toolbus/toolbus/pkg/dialect"
	"github.com/toolbus/toolbus/pkg/mcpwire"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// everythingTools is server-everything's tool list, which pkg/mcpwire's TestEverything
// captures.
const everythingTools = "../mcpwire/testdata/everything-tools.json"

// TestDeclarationsGolden converts server-everything's real tool list (captured by
// TestEverything into testdata) into every vendor's declarations.
func TestDeclarationsGolden(t *testing.T) {
	data, err := os.ReadFile(everythingTools)
	if err != nil {
		t.Fatal(err)
	}
	var tools []mcpwire.Tool
	if err := json.Unmarshal(data, &tools); err != nil {
		t.Fatal(err)
	}
	if len(tools) < 10 {
		t.Fatalf("%s holds %d tools; it should be server-everything's whole list", everythingTools, len(tools))
	}
	for _, d := range dialect.Dialects() {
		t.Run(string(d), func(t *testing.T) {
			got, err := dialect.Declarations(d, tools)
			if err != nil {
				t.Fatal(err)
			}
			var pretty bytes.Buffer
			if err := json.Indent(&pretty, got, "", "  "); err != nil {
				t.Fatal(err)
			}
			pretty.WriteByte('\n')
			mcptest.Golden(t, "testdata/everything."+string(d)+".json", pretty.Bytes(), *update)
		})
	}
}

func TestDeclarationsUnknownDialect(t *testing.T) {
	if _, err := dialect.Declarations("cobol", nil); err == nil {
		t.Error("no error for an unknown dialect")
	}
}

func TestGeminiSchemaOf(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    string
		wantErr bool
	}{
		{name: "drops what Gemini rejects",
			in:   `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","additionalProperties":false,"properties":{"a":{"type":"string","default":"x","format":"uri","examples":["y"]}},"required":["a","ghost"]}`,
			want: `{"type":"OBJECT","properties":{"a":{"type":"STRING"}},"required":["a"]}`},
		{name: "type list with null",
			in:   `{"type":"object","properties":{"n":{"type":["integer","null"],"minimum":1}}}`,
			want: `{"type":"OBJECT","properties":{"n":{"type":"INTEGER","nullable":true,"minimum":1}}}`},
		{name: "anyOf with a null branch",
			in:   `{"type":"object","properties":{"s":{"description":"maybe","anyOf":[{"type":"string"},{"type":"null"}]}}}`,
			want: `{"type":"OBJECT","properties":{"s":{"type":"STRING","description":"maybe","nullable":true}}}`},
		{name: "oneOf of two becomes anyOf",
			in:   `{"oneOf":[{"type":"string"},{"type":"number"}]}`,
			want: `{"anyOf":[{"type":"STRING"},{"type":"NUMBER"}]}`},
		{name: "refs inlined",
			in:   `{"type":"object","properties":{"p":{"$ref":"#/$defs/point"},"q":{"$ref":"#/definitions/tag"}},"$defs":{"point":{"type":"object","properties":{"x":{"type":"number"}}}},"definitions":{"tag":{"type":"string","enum":["a","b"]}}}`,
			want: `{"type":"OBJECT","properties":{"p":{"type":"OBJECT","properties":{"x":{"type":"NUMBER"}}},"q":{"type":"STRING","enum":["a","b"]}}}`},
		{name: "recursive ref is cut",
			in:   `{"$ref":"#/$defs/node","$defs":{"node":{"type":"object","properties":{"next":{"$ref":"#/$defs/node"}}}}}`,
			want: ""}, // only checks that it terminates
		{name: "allOf merged",
			in:   `{"allOf":[{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]},{"properties":{"b":{"type":"boolean"}},"required":["b"]}]}`,
			want: `{"type":"OBJECT","properties":{"a":{"type":"STRING"},"b":{"type":"BOOLEAN"}},"required":["a","b"]}`},
		{name: "const and numeric enum",
			in:   `{"type":"object","properties":{"k":{"const":"fixed"},"n":{"type":"integer","enum":[1,2]}}}`,
			want: `{"type":"OBJECT","properties":{"k":{"type":"STRING","enum":["fixed"]},"n":{"type":"INTEGER","description":"One of [1,2]."}}}`},
		{name: "array needs items",
			in:   `{"type":"array","minItems":1}`,
			want: `{"type":"ARRAY","items":{"type":"STRING"},"minItems":1}`},
		{name: "formats Gemini knows are kept",
			in:   `{"type":"object","properties":{"t":{"type":"string","format":"date-time"},"i":{"type":"integer","format":"int64"}}}`,
			want: `{"type":"OBJECT","properties":{"i":{"type":"INTEGER","format":"int64"},"t":{"type":"STRING","format":"date-time"}}}`},
		{name: "not JSON", in: `{`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := dialect.GeminiSchemaOf(json.RawMessage(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil || tt.want == "" {
				return
			}
			b, _ := json.Marshal(got)
			if !jsonEqual(t, b, []byte(tt.want)) {
				t.Errorf("got  %s\nwant %s", b, tt.want)
			}
		})
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	ab, _ := json.Marshal(x)
	bb, _ := json.Marshal(y)
	return bytes.Equal(ab, bb)
}
