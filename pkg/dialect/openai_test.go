package dialect_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/toolbus/toolbus/pkg/catalog"
	"github.com/toolbus/toolbus/pkg/dialect"
	"github.com/toolbus/toolbus/pkg/mcpwire"
)

func TestShortenDescription(t *testing.T) {
	long := strings.Repeat("Reads a file from the disk — every byte of it, naïvely. ", 60) // 3,000+ characters, some of several bytes
	tests := []struct {
		name, in string
		max      int
		same     bool
	}{
		{name: "fits", in: "short", max: 1024, same: true},
		{name: "exactly the limit", in: strings.Repeat("a", 1024), max: 1024, same: true},
		{name: "3,000 characters", in: long, max: 1024},
		{name: "no spaces, runes of three bytes", in: strings.Repeat("€", 1500), max: 1024},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := dialect.ShortenDescription(tt.in, tt.max)
			if tt.same {
				if got != tt.in {
					t.Errorf("changed a description that fits: %q", got)
				}
				return
			}
			if len(got) > tt.max || !utf8.ValidString(got) {
				t.Errorf("%d bytes, valid UTF-8 %v", len(got), utf8.ValidString(got))
			}
			if !strings.Contains(got, "shortened by toolbus") || !strings.HasPrefix(tt.in, strings.TrimSpace(strings.SplitN(got, " …", 2)[0])) {
				t.Errorf("no note or not the beginning: %q", got)
			}
			if len(got) < tt.max-100 {
				t.Errorf("shortened to %d bytes, far below %d", len(got), tt.max)
			}
		})
	}
}

// A server with a 3,000-character description exports within OpenAI's limit, and says so.
func TestOpenAIDescriptionLimit(t *testing.T) {
	long := strings.Repeat("x", 2000) + strings.Repeat("é", 1000)
	tools := []catalog.Tool{{Name: "s__long", Description: long}, {Name: "s__short", Description: "fine"}}
	got, err := dialect.DeclarationsWith(dialect.OpenAI, tools, nil)
	if err != nil {
		t.Fatal(err)
	}
	var decls []dialect.OpenAITool
	if err := json.Unmarshal(got.Tools, &decls); err != nil {
		t.Fatal(err)
	}
	for _, d := range decls {
		if n := utf8.RuneCountInString(d.Function.Description); len(d.Function.Description) > dialect.MaxOpenAIDescription || n > dialect.MaxOpenAIDescription {
			t.Errorf("%s: %d characters", d.Function.Name, n)
		}
	}
	if decls[1].Function.Description != "fine" || strings.Join(got.Shortened, ",") != "s__long" {
		t.Errorf("shortened %v, second %q", got.Shortened, decls[1].Function.Description)
	}
	// Anthropic has no such limit: the description stays whole.
	a, _ := dialect.Declarations(dialect.Anthropic, tools)
	if !strings.Contains(string(a), long) {
		t.Error("anthropic's description was shortened")
	}
}

func TestStrictSchema(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    string
		wantErr bool
	}{
		{name: "optional becomes nullable, all required, closed",
			in:   `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"path":{"type":"string"},"depth":{"type":"integer","minimum":1,"default":2}},"required":["path"]}`,
			want: `{"type":"object","properties":{"depth":{"type":["integer","null"],"description":"(minimum 1, default 2)"},"path":{"type":"string"}},"required":["depth","path"],"additionalProperties":false}`},
		{name: "no arguments", in: `{"type":"object"}`,
			want: `{"type":"object","properties":{},"required":[],"additionalProperties":false}`},
		{name: "format moves into the description",
			in:   `{"type":"object","properties":{"u":{"type":"string","format":"uri","description":"Where"}},"required":["u"]}`,
			want: `{"type":"object","properties":{"u":{"type":"string","description":"Where (format \"uri\")"}},"required":["u"],"additionalProperties":false}`},
		{name: "optional enum takes null",
			in:   `{"type":"object","properties":{"k":{"type":"string","enum":["a","b"]}}}`,
			want: `{"type":"object","properties":{"k":{"type":["string","null"],"enum":["a","b",null]}},"required":["k"],"additionalProperties":false}`},
		{name: "nested objects and arrays",
			in:   `{"type":"object","properties":{"edits":{"type":"array","items":{"type":"object","properties":{"old":{"type":"string"},"new":{"type":"string"}},"required":["old","new"],"additionalProperties":true}}},"required":["edits"]}`,
			want: `{"type":"object","properties":{"edits":{"type":"array","items":{"type":"object","properties":{"new":{"type":"string"},"old":{"type":"string"}},"required":["new","old"],"additionalProperties":false}}},"required":["edits"],"additionalProperties":false}`},
		{name: "oneOf as anyOf, optional $ref nullable",
			in:   `{"type":"object","properties":{"v":{"oneOf":[{"type":"string"},{"type":"number"}]},"p":{"$ref":"#/$defs/p"}},"required":["v"],"$defs":{"p":{"type":"object","properties":{"x":{"type":"number"}},"required":["x"]}}}`,
			want: `{"type":"object","properties":{"p":{"anyOf":[{"$ref":"#/$defs/p"},{"type":"null"}]},"v":{"anyOf":[{"type":"string"},{"type":"number"}]}},"required":["p","v"],"additionalProperties":false,"$defs":{"p":{"type":"object","properties":{"x":{"type":"number"}},"required":["x"],"additionalProperties":false}}}`},
		{name: "const", in: `{"type":"object","properties":{"c":{"const":"fixed"}},"required":["c"]}`,
			want: `{"type":"object","properties":{"c":{"type":"string","enum":["fixed"]}},"required":["c"],"additionalProperties":false}`},
		{name: "an object of any keys", in: `{"type":"object","properties":{"env":{"type":"object","additionalProperties":{"type":"string"}}}}`, wantErr: true},
		{name: "a value of any type", in: `{"type":"object","properties":{"v":{}}}`, wantErr: true},
		{name: "an array of anything", in: `{"type":"object","properties":{"a":{"type":"array"}}}`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := dialect.StrictSchema(json.RawMessage(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if !jsonEqual(t, got, []byte(tt.want)) {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
			if err := dialect.CheckStrictSchema(got); err != nil {
				t.Errorf("the output breaks the rules: %v", err)
			}
		})
	}
}

// The validator catches each rule broken.
func TestCheckStrictSchema(t *testing.T) {
	tests := []struct {
		name, in string
		wantErr  bool
	}{
		{name: "valid", in: `{"type":"object","properties":{"a":{"type":["string","null"]}},"required":["a"],"additionalProperties":false}`},
		{name: "root not an object", in: `{"type":"string"}`, wantErr: true},
		{name: "open object", in: `{"type":"object","properties":{},"required":[]}`, wantErr: true},
		{name: "a property not required", in: `{"type":"object","properties":{"a":{"type":"string"}},"required":[],"additionalProperties":false}`, wantErr: true},
		{name: "format", in: `{"type":"object","properties":{"a":{"type":"string","format":"uri"}},"required":["a"],"additionalProperties":false}`, wantErr: true},
		{name: "minLength", in: `{"type":"object","properties":{"a":{"type":"string","minLength":1}},"required":["a"],"additionalProperties":false}`, wantErr: true},
		{name: "no type", in: `{"type":"object","properties":{"a":{"description":"x"}},"required":["a"],"additionalProperties":false}`, wantErr: true},
		{name: "array without items", in: `{"type":"object","properties":{"a":{"type":"array"}},"required":["a"],"additionalProperties":false}`, wantErr: true},
		{name: "nested open object", in: `{"type":"object","properties":{"a":{"type":"object","properties":{},"required":[]}},"required":["a"],"additionalProperties":false}`, wantErr: true},
		{name: "oneOf", in: `{"type":"object","properties":{"a":{"oneOf":[{"type":"string"}]}},"required":["a"],"additionalProperties":false}`, wantErr: true},
		{name: "too deep", in: strings.Repeat(`{"type":"object","properties":{"a":`, 12) + `{"type":"string"}` + strings.Repeat(`},"required":["a"],"additionalProperties":false}`, 12), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := dialect.CheckStrictSchema(json.RawMessage(tt.in))
			if (err != nil) != tt.wantErr {
				t.Errorf("err = %v, wantErr %v", err, tt.wantErr)
			}
		})
	}
}

// server-everything's tools, as it lists them, are all written strict, and each passes the
// rules.
func TestStrictEverything(t *testing.T) {
	data, err := os.ReadFile(everythingTools)
	if err != nil {
		t.Fatal(err)
	}
	var tools []mcpwire.Tool
	if err := json.Unmarshal(data, &tools); err != nil {
		t.Fatal(err)
	}
	got, err := dialect.DeclarationsWith(dialect.OpenAI, tools, &dialect.Options{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.NotStrict) > 0 {
		t.Errorf("left non-strict: %v", got.NotStrict)
	}
	var decls []dialect.OpenAITool
	if err := json.Unmarshal(got.Tools, &decls); err != nil {
		t.Fatal(err)
	}
	for _, d := range decls {
		if !d.Function.Strict {
			t.Errorf("%s is not strict", d.Function.Name)
		}
		if err := dialect.CheckStrictSchema(d.Function.Parameters); err != nil {
			t.Errorf("%s: %v", d.Function.Name, err)
		}
	}
}
