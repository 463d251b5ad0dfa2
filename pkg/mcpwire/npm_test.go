package mcpwire_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolbus/toolbus/internal/mcptest"
	"github.com/toolbus/toolbus/pkg/mcpwire"
)

// The reference servers of the MCP project, installed from npm by
// scripts/install-mcp-servers: servers nobody here wrote.

const everythingPkg = "@modelcontextprotocol/server-everything"

// everythingTools is the golden copy of server-everything's catalog, the input of the
// declaration goldens.
const everythingTools = "testdata/everything-tools.json"

func TestEverything(t *testing.T) {
	dir := npmPackage(t, everythingPkg)
	index := filepath.Join(dir, "dist", "index.js")
	for _, tt := range []struct {
		name   string
		config func(t *testing.T) mcpwire.ServerConfig
	}{
		{name: "stdio", config: func(*testing.T) mcpwire.ServerConfig {
			return mcpwire.ServerConfig{Command: "node", Args: []string{index, "stdio"}}
		}},
		{name: "streamable http", config: func(t *testing.T) mcpwire.ServerConfig {
			return mcpwire.ServerConfig{Type: "http", URL: everythingURL(t, "streamableHttp") + "/mcp"}
		}},
		{name: "sse", config: func(t *testing.T) mcpwire.ServerConfig {
			return mcpwire.ServerConfig{Type: "sse", URL: everythingURL(t, "sse") + "/sse"}
		}},
		// Cursor's entry of an SSE server: a url and no type, tried as streamable HTTP
		// first (server-everything answers its POST with a 4xx), then over SSE.
		{name: "sse without a type", config: func(t *testing.T) mcpwire.ServerConfig {
			return mcpwire.ServerConfig{URL: everythingURL(t, "sse") + "/sse"}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newPool(t, map[string]mcpwire.ServerConfig{"everything": tt.config(t)}, nil)
			ctx := ctxT(t)
			if err := p.Connect(ctx); err != nil {
				t.Fatal(err)
			}
			checkGolden(t, everythingTools, marshalIndent(t, p.Tools(ctx)), tt.name == "stdio")
			checkEverythingTask(t, p)

			calls := []struct {
				name    string
				tool    string
				args    string
				want    func(string) bool
				wantErr error
			}{
				{name: "echo", tool: "echo", args: `{"message":"hi"}`, want: func(s string) bool { return s == `"Echo: hi"` }},
				{name: "qualified", tool: "everything__get-sum", args: `{"a":2,"b":3}`, want: func(s string) bool { return strings.Contains(s, "5") }},
				{name: "structured content", tool: "get-structured-content", args: `{"location":"Chicago"}`,
					want: func(s string) bool { return strings.HasPrefix(s, "{") && strings.Contains(s, "temperature") }},
				// The image is named for the model, its base64 kept apart (messages.Content).
				{name: "image content", tool: "get-tiny-image", want: func(s string) bool {
					return strings.Contains(s, `[image: image/png, `) && !strings.Contains(s, "iVBORw0KGgo")
				}},
				{name: "unknown", tool: "everything__nope", wantErr: mcpwire.ErrUnknownTool},
			}
			for _, c := range calls {
				out, err := p.Call(ctx, c.tool, json.RawMessage(c.args))
				if c.wantErr != nil {
					if !errors.Is(err, c.wantErr) {
						t.Errorf("%s: err = %v, want %v", c.name, err, c.wantErr)
					}
					continue
				}
				if err != nil || !json.Valid(out) || !c.want(string(out)) {
					t.Errorf("%s: %s = %.200s, %v", c.name, c.tool, out, err)
				}
			}
			checkEverythingFeatures(t, p)
			// The server validates its arguments itself and says so as a tool error.
			_, err := p.Call(ctx, "get-sum", json.RawMessage(`{"a":"two"}`))
			var te *mcpwire.ToolError
			if !errors.As(err, &te) {
				t.Errorf("get-sum with a string: err = %v, want a *ToolError", err)
			}
		})
	}
}

func TestMemoryServer(t *testing.T) {
	dir := npmPackage(t, "@modelcontextprotocol/server-memory")
	file := filepath.Join(t.TempDir(), "memory.jsonl")
	p := newPool(t, map[string]mcpwire.ServerConfig{"memory": {
		Command: "node",
		Args:    []string{filepath.Join(dir, "dist", "index.js")},
		Env:     map[string]string{"MEMORY_FILE_PATH": file},
	}}, nil)
	ctx := ctxT(t)
	if _, err := p.Call(ctx, "create_entities", json.RawMessage(`{"entities":[
		{"name":"toolbus","entityType":"project","observations":["runs tool calls over NATS"]}]}`)); err != nil {
		t.Fatal(err)
	}
	out, err := p.Call(ctx, "memory__search_nodes", json.RawMessage(`{"query":"NATS"}`))
	if err != nil || !strings.Contains(string(out), `"toolbus"`) {
		t.Fatalf("search_nodes = %s, %v", out, err)
	}
	// The configured environment reached the server: it wrote where it was told.
	if data, err := os.ReadFile(file); err != nil || !bytes.Contains(data, []byte("toolbus")) {
		t.Errorf("MEMORY_FILE_PATH not honoured: %q, %v", data, err)
	}
	read, err := p.Lookup(ctx, "read_graph")
	if err != nil || !read.ReadOnly {
		t.Errorf("read_graph = %+v, %v; want read-only from its annotations", read, err)
	}
}

// startNode runs server-everything in an HTTP mode on a free port and returns its base
// URL; the process is killed when the test ends.
func everythingURL(t *testing.T, mode string) string {
	_, url := mcptest.StartEverything(t, mode)
	return url
}

func marshalIndent(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// checkGolden compares got with the file. With -update it rewrites the file instead
// when mayUpdate, and skips the comparison otherwise (the file may be mid-write).
func checkGolden(t *testing.T, file string, got []byte, mayUpdate bool) {
	t.Helper()
	if *update && !mayUpdate {
		return
	}
	mcptest.Golden(t, file, got, *update)
}

// toolbus advertises roots only when a server's configuration gives some, and then
// answers roots/list with them. The reference filesystem server reads its folders from
// roots when its client has them: given a folder on its command line and another as a
// root, it serves the root; with no roots configured it keeps its own folder (before,
// toolbus advertised roots and answered none).
func TestRootsOnlyWhenConfigured(t *testing.T) {
	index := filepath.Join(npmPackage(t, "@modelcontextprotocol/server-filesystem"), "dist", "index.js")
	arg, root := t.TempDir(), t.TempDir()
	plain := mcpwire.ServerConfig{Command: "node", Args: []string{index, arg}}
	rooted := plain
	rooted.Roots = []string{root}
	p := newPool(t, map[string]mcpwire.ServerConfig{"plain": plain, "rooted": rooted}, nil)
	for server, want := range map[string]string{"plain": arg, "rooted": root} {
		var got string
		// The server asks for roots after it initialized: look until it answers with them.
		eventually(t, server+" serving "+want, func() bool {
			out, err := p.Call(ctxT(t), server+"__list_allowed_directories", nil)
			if err != nil {
				t.Fatalf("%s: %v", server, err)
			}
			got = string(out)
			return strings.Contains(got, want)
		})
		other := map[string]string{"plain": root, "rooted": arg}[server]
		if strings.Contains(got, other) {
			t.Errorf("%s serves %s too: %s", server, other, got)
		}
	}
}
