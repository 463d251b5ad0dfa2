package toolbus_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolbus/toolbus/internal/cli"
)

// `toolbus tools --format` prints the catalog a model sees, server-everything's tools
// and the visible engineering tools (never the hidden calculators), as each vendor's
// declarations. The conversions themselves have golden tests in pkg/mcpwire.
func TestMCPToolsCommandFormats(t *testing.T) {
	t.Parallel()
	_, url := mcpStartEverything(t, "streamableHttp", 0)
	cfgPath := filepath.Join(t.TempDir(), "toolbus.json")
	if err := os.WriteFile(cfgPath, []byte(`{"mcpServers": {"everything": {"type": "http", "url": "`+url+`/mcp"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tools := func(t *testing.T, args ...string) (string, int) {
		t.Helper()
		var out, errOut bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		code := cli.Main(ctx, append([]string{"tools", "--config", cfgPath}, args...), cli.Env{
			Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" },
		})
		if code != 0 && errOut.Len() > 0 {
			t.Logf("stderr: %s", errOut.String())
		}
		return out.String(), code
	}

	for _, tt := range []struct {
		format string
		// names extracts the declared names.
		names func(t *testing.T, out []byte) []string
		// must appear in the output (a field of the dialect).
		want string
	}{
		{format: "openai", want: `"parameters"`, names: func(t *testing.T, out []byte) []string {
			var decls []struct {
				Type     string                `json:"type"`
				Function struct{ Name string } `json:"function"`
			}
			mcpDecode(t, out, &decls)
			var names []string
			for _, d := range decls {
				if d.Type != "function" {
					t.Errorf("type %q, want function", d.Type)
				}
				names = append(names, d.Function.Name)
			}
			return names
		}},
		{format: "anthropic", want: `"input_schema"`, names: mcpDeclaredNames},
		{format: "mcp", want: `"readOnlyHint": true`, names: mcpDeclaredNames},
		{format: "gemini", want: `"type": "OBJECT"`, names: func(t *testing.T, out []byte) []string {
			var tools []struct {
				FunctionDeclarations []struct{ Name string } `json:"functionDeclarations"`
			}
			mcpDecode(t, out, &tools)
			if len(tools) != 1 {
				t.Fatalf("%d gemini tools, want one holding every declaration", len(tools))
			}
			var names []string
			for _, d := range tools[0].FunctionDeclarations {
				names = append(names, d.Name)
			}
			if bytes.Contains(out, []byte(`"$schema"`)) || bytes.Contains(out, []byte(`"additionalProperties"`)) {
				t.Error("gemini declarations keep keys Gemini rejects")
			}
			return names
		}},
	} {
		t.Run(tt.format, func(t *testing.T) {
			out, code := tools(t, "--format", tt.format)
			if code != 0 {
				t.Fatalf("exit %d", code)
			}
			if !strings.Contains(out, tt.want) {
				t.Errorf("no %s in the %s declarations", tt.want, tt.format)
			}
			names := strings.Join(tt.names(t, []byte(out)), " ")
			for _, want := range []string{"clock", "dispatch_engineering", "execute_tool", "everything__echo", "everything__get-sum"} {
				if !strings.Contains(" "+names+" ", " "+want+" ") {
					t.Errorf("%s missing from %s", want, names)
				}
			}
			if strings.Contains(names, "solve_") {
				t.Errorf("hidden calculators declared: %s", names)
			}
		})
	}
	if _, code := tools(t, "--format", "cobol"); code != 2 {
		t.Errorf("an unknown format: exit %d, want 2", code)
	}
}

func mcpDeclaredNames(t *testing.T, out []byte) []string {
	var decls []struct{ Name string }
	mcpDecode(t, out, &decls)
	var names []string
	for _, d := range decls {
		names = append(names, d.Name)
	}
	return names
}

func mcpDecode(t *testing.T, out []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(out, v); err != nil {
		t.Fatalf("not the JSON wanted: %v\n%.500s", err, out)
	}
}
