package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolbus/toolbus/pkg/toolcall"
)

// TestParseTools checks that `toolbus parse --tools FILE` reads as the parser does with
// the file's catalog: XML-style and pythonic values typed by the tools' schemas, tools
// named by bare JSON recognised, and a schema violation answered, in both spellings of
// a tools file.
func TestParseTools(t *testing.T) {
	dir := t.TempDir()
	const schema = `{"type": "object", "properties": {"month": {"type": "integer"}, "day": {"type": "integer"}, "note": {"type": "string"}}, "required": ["month"]}`
	files := map[string]string{
		"mcp.json":     `{"tools": [{"name": "set_date", "inputSchema": ` + schema + `}, {"name": "clock"}]}`,
		"openai.json":  `[{"type": "function", "function": {"name": "set_date", "parameters": ` + schema + `}}, {"type": "function", "function": {"name": "clock"}}]`,
		"wrapped.json": `{"tools": [{"type": "function", "function": {"name": "set_date", "parameters": ` + schema + `}}, {"type": "function", "function": {"name": "clock"}}]}`,
	}
	for _, tt := range []struct {
		name, text, format string
		want               string // the calls, name and arguments
		wantErr            bool   // an error result
	}{
		{name: "qwen xml typed", text: "<tool_call>\n<function=set_date>\n<parameter=month>\n07\n</parameter>\n<parameter=note>\n05\n</parameter>\n</function>\n</tool_call>", want: `set_date{"month":7,"note":"05"}`},
		{name: "minimax xml typed", text: `<minimax:tool_call><invoke name="set_date"><parameter name="month">7</parameter><parameter name="day">5</parameter></invoke></minimax:tool_call>`, want: `set_date{"month":7,"day":5}`},
		{name: "lfm2 leading zeros", text: "<|tool_call_start|>[set_date(month=07, day=05)]<|tool_call_end|>", want: `set_date{"month":7,"day":5}`},
		{name: "bare json of a known tool", text: `{"name": "clock", "arguments": {}}`, want: `clock{}`},
		{name: "schema violation", text: `<|tool_call>call:set_date{day:5}<tool_call|>`, wantErr: true},
		{name: "format pin by alias", text: `<tool_calls>[{"name": "clock", "arguments": {}}]</tool_calls>`, format: "hunyuan", want: `clock{}`},
	} {
		for file, body := range files {
			t.Run(tt.name+"/"+file, func(t *testing.T) {
				path := filepath.Join(dir, file)
				if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
				args := []string{"parse", "--tools", path}
				if tt.format != "" {
					args = append(args, "--format", tt.format)
				}
				stdout, stderr, code := runMain(t, tt.text, args...)
				if code != 0 {
					t.Fatalf("exit %d: %s", code, stderr)
				}
				var p parsed
				if err := json.Unmarshal([]byte(stdout), &p); err != nil {
					t.Fatalf("%v: %s", err, stdout)
				}
				var got []string
				for _, c := range p.Calls {
					var args bytes.Buffer
					if err := json.Compact(&args, c.Arguments); err != nil {
						t.Fatal(err)
					}
					got = append(got, c.Name+args.String())
				}
				if strings.Join(got, " ") != tt.want {
					t.Errorf("calls %q, want %q (errors %+v)", got, tt.want, p.Errors)
				}
				if (len(p.Errors) > 0) != tt.wantErr {
					t.Errorf("errors %+v, wantErr %v", p.Errors, tt.wantErr)
				}
			})
		}
	}
	for _, bad := range []string{`{}`, `[{"inputSchema": {}}]`, `not json`} {
		path := filepath.Join(dir, "bad.json")
		if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, _, code := runMain(t, "x", "parse", "--tools", path); code == 0 {
			t.Errorf("--tools file %s: exit 0", bad)
		}
	}
	if _, _, code := runMain(t, "x", "parse", "--tools", filepath.Join(dir, "mcp.json"), "--known-tools", "a"); code == 0 {
		t.Error("--tools with --known-tools: exit 0")
	}
}

// TestParseFormatFlag checks that --format takes every format and every model alias, and
// reads the format's marker with it.
func TestParseFormatFlag(t *testing.T) {
	names := []string{"auto"}
	for _, f := range toolcall.Formats() {
		names = append(names, string(f))
	}
	for alias := range toolcall.FormatAliases() {
		names = append(names, alias)
	}
	for _, name := range names {
		if _, stderr, code := runMain(t, "no call here", "parse", "--format", name); code != 0 {
			t.Errorf("--format %s: exit %d: %s", name, code, stderr)
		}
	}
	if _, _, code := runMain(t, "x", "parse", "--format", "no_such_format"); code == 0 {
		t.Error("--format no_such_format: exit 0")
	}
	stdout, _, _ := runMain(t, `<|channel|>commentary to=functions.clock <|constrain|>json<|message|>{}<|call|>`, "parse", "--format", "gpt_oss")
	if !strings.Contains(stdout, `"format": "harmony"`) {
		t.Errorf("--format gpt_oss: %s", stdout)
	}
}
