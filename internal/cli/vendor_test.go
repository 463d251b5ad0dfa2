package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/toolbus/toolbus/internal/mcptest"
	"github.com/toolbus/toolbus/pkg/dialect"
)

// The vendors' published rules for a tool declaration: the name's alphabet and length,
// and, for Gemini, the OpenAPI subset of its parameters.
var (
	openAIName    = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	anthropicName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	geminiName    = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$`)
	geminiTypes   = map[string]bool{"STRING": true, "NUMBER": true, "INTEGER": true, "BOOLEAN": true, "ARRAY": true, "OBJECT": true}
)

// checkGemini reports what Gemini rejects in a parameters schema: a type it does not
// know, an ARRAY without items, an OBJECT without properties below the top.
func checkGemini(t *testing.T, where string, s map[string]any, top bool) {
	t.Helper()
	typ, _ := s["type"].(string)
	if typ != "" && !geminiTypes[typ] {
		t.Errorf("%s: type %q", where, typ)
	}
	props, _ := s["properties"].(map[string]any)
	if typ == "OBJECT" && !top && len(props) == 0 {
		t.Errorf("%s: a nested OBJECT without properties", where)
	}
	if typ == "ARRAY" && s["items"] == nil {
		t.Errorf("%s: an ARRAY without items", where)
	}
	for name, p := range props {
		if pm, ok := p.(map[string]any); ok {
			checkGemini(t, where+"."+name, pm, false)
		}
	}
	if items, ok := s["items"].(map[string]any); ok {
		checkGemini(t, where+"[]", items, false)
	}
	if alts, ok := s["anyOf"].([]any); ok {
		for _, a := range alts {
			if am, ok := a.(map[string]any); ok {
				checkGemini(t, where+"|", am, false)
			}
		}
	}
}

// Every tool list toolbus emits — the local tools, the engineering suite in both modes,
// the npm reference servers — is valid for each vendor by construction, and the names
// it gives tools whose own names a vendor rejects are accepted back.
func TestVendorDeclarationsAreValid(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "kb"), 0o755)
	os.MkdirAll(filepath.Join(dir, "out"), 0o755)
	files := t.TempDir()
	configs := map[string]string{
		"local and hierarchical engineering": `{"local": {"clock": true, "knowledge_base": {"folder": "kb"}, "file_writer": {"root": "out"}}}`,
		"flat engineering":                   `{"engineering": {"expose": "flat"}}`,
		// A server whose tool has a description of 3,000 characters, declared so that
		// nothing needs to answer.
		"a long description": `{"engineering": {"enabled": false}, "mcpServers": {"long": {"type": "jsonrpc", "url": "http://127.0.0.1:9/rpc",
			"tools": [{"name": "essay", "description": "` + strings.Repeat("Très long. ", 300) + `"}]}}}`,
		"reference servers": `{"engineering": {"enabled": false}, "mcpServers": {
			"everything": {"command": "node", "args": ["` + filepath.Join(mcptest.NPMPackage(t, "@modelcontextprotocol/server-everything"), "dist", "index.js") + `", "stdio"]},
			"memory": {"command": "node", "args": ["` + filepath.Join(mcptest.NPMPackage(t, "@modelcontextprotocol/server-memory"), "dist", "index.js") + `"], "env": {"MEMORY_FILE_PATH": "` + filepath.Join(files, "m.jsonl") + `"}},
			"file.system": {"command": "node", "args": ["` + filepath.Join(mcptest.NPMPackage(t, "@modelcontextprotocol/server-filesystem"), "dist", "index.js") + `", "` + files + `"]}}}`,
	}
	for name, cfg := range configs {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".json")
			if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, dialect := range []string{"openai", "anthropic", "gemini"} {
				stdout, stderr, code := runMain(t, "", "tools", "--config", path, "--format", dialect)
				if code != 0 {
					t.Fatalf("%s: exit %d: %s", dialect, code, stderr)
				}
				var decls []map[string]any
				if err := json.Unmarshal([]byte(stdout), &decls); err != nil {
					t.Fatalf("%s: %v", dialect, err)
				}
				n := 0
				switch dialect {
				case "openai":
					for _, d := range decls {
						f, _ := d["function"].(map[string]any)
						fname, _ := f["name"].(string)
						params, _ := f["parameters"].(map[string]any)
						if !openAIName.MatchString(fname) || params["type"] != "object" {
							t.Errorf("openai: %q with parameters of type %v", fname, params["type"])
						}
						if desc, _ := f["description"].(string); utf8.RuneCountInString(desc) > 1024 {
							t.Errorf("openai: %q has a description of %d characters", fname, utf8.RuneCountInString(desc))
						}
						n++
					}
					if n > 128 && !strings.Contains(stderr, "more than openai accepts") {
						t.Errorf("openai: %d tools without a warning", n)
					}
				case "anthropic":
					for _, d := range decls {
						dname, _ := d["name"].(string)
						schema, _ := d["input_schema"].(map[string]any)
						if !anthropicName.MatchString(dname) || schema["type"] != "object" {
							t.Errorf("anthropic: %q with input_schema of type %v", dname, schema["type"])
						}
						n++
					}
				case "gemini":
					fns, _ := decls[0]["functionDeclarations"].([]any)
					for _, f := range fns {
						fm := f.(map[string]any)
						fname, _ := fm["name"].(string)
						if !geminiName.MatchString(fname) {
							t.Errorf("gemini: name %q", fname)
						}
						if params, ok := fm["parameters"].(map[string]any); ok {
							checkGemini(t, "gemini "+fname, params, true)
						} else if js, ok := fm["parametersJsonSchema"].(map[string]any); ok && js["type"] != "object" {
							t.Errorf("gemini %s: parametersJsonSchema of type %v", fname, js["type"])
						}
						n++
					}
				}
				if n == 0 {
					t.Errorf("%s: no tools", dialect)
				}
			}
			checkStrict(t, path, name == "reference servers")
		})
	}

	// A flat calculator, declared to OpenAI as geometry_solve_circle_area, is called by that
	// name and runs.
	path := filepath.Join(dir, "flat_engineering.json")
	stdout, stderr, code := runMain(t, `<tool_call>{"name": "geometry_solve_circle_area", "arguments": {"r": 2}}</tool_call>`, "run", "--json", "--config", path)
	if code != 0 || !strings.Contains(stdout, `"success":true`) {
		t.Errorf("calling a tool by its vendor name: exit %d, %s %s", code, stdout, stderr)
	}
}

// checkStrict checks the --strict OpenAI export of a configuration with OpenAI's
// strict-mode rules (dialect.CheckStrictSchema): every strict function's parameters pass,
// and, when allStrict, every tool of server-everything and the filesystem server is strict.
func checkStrict(t *testing.T, path string, allStrict bool) {
	t.Helper()
	stdout, stderr, code := runMain(t, "", "tools", "--config", path, "--format", "openai", "--strict")
	if code != 0 {
		t.Fatalf("--strict: exit %d: %s", code, stderr)
	}
	var decls []dialect.OpenAITool
	if err := json.Unmarshal([]byte(stdout), &decls); err != nil {
		t.Fatal(err)
	}
	strict := 0
	for _, d := range decls {
		f := d.Function
		if f.Strict {
			strict++
			if err := dialect.CheckStrictSchema(f.Parameters); err != nil {
				t.Errorf("--strict: %s: %v", f.Name, err)
			}
		} else if allStrict && (strings.HasPrefix(f.Name, "everything") || strings.HasPrefix(f.Name, "file")) {
			t.Errorf("--strict: %s is not strict (%s)", f.Name, stderr)
		}
	}
	if strict == 0 {
		t.Errorf("--strict: no strict function among %d", len(decls))
	}
}

// More tools than OpenAI takes in one request (128) is an error that says how to narrow
// them, never an export OpenAI would refuse; Anthropic's has no such limit, and one
// tool fewer is exported.
func TestOpenAIToolLimit(t *testing.T) {
	dir := t.TempDir()
	tools := filepath.Join(dir, "tools")
	if err := os.MkdirAll(tools, 0o755); err != nil {
		t.Fatal(err)
	}
	// The clock and 128 folder tools: 129.
	for i := range dialect.MaxOpenAITools {
		name := "tool_" + strings.Repeat("x", i%3) + string(rune('a'+i%26)) + string(rune('a'+i/26))
		if err := os.WriteFile(filepath.Join(tools, name), []byte("#!/bin/sh\necho '\"ok\"'\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tools, name+".mcp.json"), []byte(`{"name": "`+name+`", "inputSchema": {"type": "object"}}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write := func(extra string) string {
		path := filepath.Join(dir, "c.json")
		if err := os.WriteFile(path, []byte(`{"engineering": {"enabled": false}, "local": {"tools": {"folder": "`+tools+`"}}`+extra+`}`), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	path := write("")
	stdout, stderr, code := runMain(t, "", "tools", "--config", path, "--format", "openai")
	if code != 1 || stdout != "" || !strings.Contains(stderr, "129 tools, more than openai accepts in one request (128): narrow them with allowedTools") {
		t.Errorf("openai, 129 tools: exit %d, %d bytes out, stderr %q", code, len(stdout), stderr)
	}
	if _, stderr, code := runMain(t, "", "tools", "--config", path, "--format", "anthropic"); code != 0 {
		t.Errorf("anthropic, 129 tools: exit %d: %s", code, stderr)
	}
	stdout, stderr, code = runMain(t, "", "tools", "--config", write(`, "blockedTools": ["clock"]`), "--format", "openai")
	var decls []json.RawMessage
	if code != 0 || json.Unmarshal([]byte(stdout), &decls) != nil || len(decls) != dialect.MaxOpenAITools {
		t.Errorf("openai, 128 tools: exit %d, %d declarations, stderr %q", code, len(decls), stderr)
	}
}
