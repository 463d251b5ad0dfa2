package mcpwire_test

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/toolbus/toolbus/pkg/mcpwire"
	"github.com/toolbus/toolbus/pkg/messages"
)

// linkedURI finds the URIs of resource links in a result's text.
var linkedURI = regexp.MustCompile(`demo://resource/dynamic/(text|blob)/[0-9]+`)

// checkEverythingFeatures reads server-everything's resources — one by URI, and each a
// resource link of get-resource-links points at, through the tool the result names — and
// fetches a prompt with an argument.
func checkEverythingFeatures(t *testing.T, p *mcpwire.Pool) {
	t.Helper()
	ctx := ctxT(t)
	out, err := p.Call(ctx, "everything__resources_read", json.RawMessage(`{"uri":"demo://resource/dynamic/text/4"}`))
	if err != nil || !strings.Contains(string(out), "Resource 4: This is a plaintext resource") {
		t.Errorf("resources_read: %.300s, %v", out, err)
	}
	out, err = p.Call(ctx, "everything__resources_list", nil)
	if err != nil || !strings.Contains(string(out), `"uriTemplate":"demo://resource/dynamic/text/{resourceId}"`) || !strings.Contains(string(out), "demo://resource/static/document/") {
		t.Errorf("resources_list: %.300s, %v", out, err)
	}
	links, err := p.Call(ctx, "get-resource-links", json.RawMessage(`{"count":2}`))
	if err != nil || !strings.Contains(string(links), "everything__resources_read") {
		t.Fatalf("get-resource-links does not name the tool that reads its links: %.600s, %v", links, err)
	}
	uris := linkedURI.FindAllString(string(links), -1)
	slices.Sort(uris)
	if uris = slices.Compact(uris); len(uris) != 2 {
		t.Fatalf("links %q in %.600s", uris, links)
	}
	for _, uri := range uris {
		out, err := p.Call(ctx, "everything__resources_read", json.RawMessage(`{"uri":"`+uri+`"}`))
		n := uri[strings.LastIndexByte(uri, '/')+1:]
		want := "Resource " + n + ": This is a plaintext resource" // text
		if strings.Contains(uri, "/blob/") {
			want = "Resource " + n + ": This is a base64 blob" // a text/plain blob, shown as its text
		}
		if err != nil || !strings.Contains(string(out), want) {
			t.Errorf("the linked %s: %.400s, %v; want %q in it", uri, out, err, want)
		}
	}
	out, err = p.Call(ctx, "everything__prompts_get", json.RawMessage(`{"name":"args-prompt","arguments":{"city":"Lisbon","state":"Lisboa"}}`))
	if err != nil || !strings.Contains(string(out), "Lisbon") || !strings.Contains(string(out), `"role":"user"`) {
		t.Errorf("prompts_get: %.300s, %v", out, err)
	}
	_, err = p.Call(ctx, "everything__prompts_get", json.RawMessage(`{"name":"args-prompt","arguments":{"city":3}}`))
	var te *messages.ToolError
	if !errors.As(err, &te) || te.Code != messages.CodeInvalidArguments {
		t.Errorf("a prompt argument that is no string: %v, want invalid_arguments", err)
	}
}

// checkEverythingTask calls simulate-research-query, which server-everything runs only as
// an MCP task (taskSupport "required"): listed, and answered with its report after the
// task's four stages, polled with tasks/get and fetched with tasks/result.
func checkEverythingTask(t *testing.T, p *mcpwire.Pool) {
	t.Helper()
	ctx := ctxT(t)
	tool, err := p.Lookup(ctx, "everything__simulate-research-query")
	if err != nil {
		t.Fatalf("the task-only tool: %v", err)
	}
	out, err := p.CallTool(ctx, tool, json.RawMessage(`{"topic":"MCP tasks"}`))
	if err != nil || !strings.Contains(string(out), "# Research Report: MCP tasks") || !strings.Contains(string(out), "Stage 4: Generating report") {
		t.Errorf("simulate-research-query: %.300s, %v", out, err)
	}
}

// A task that asks for input (simulate-research-query on an ambiguous topic, to a client
// that offers elicitation) gets its question through tasks/result's answer, and the
// server's elicitation policy answers it: under "defaults" with no default to give, it
// declines, and the task goes on with its own interpretation.
func TestEverythingTaskAsksForInput(t *testing.T) {
	dir := npmPackage(t, everythingPkg)
	for _, tt := range []struct {
		name string
		cfg  func(t *testing.T) mcpwire.ServerConfig
	}{
		{"stdio", func(*testing.T) mcpwire.ServerConfig {
			return mcpwire.ServerConfig{Command: "node", Args: []string{filepath.Join(dir, "dist", "index.js"), "stdio"}}
		}},
		{"streamable http", func(t *testing.T) mcpwire.ServerConfig {
			return mcpwire.ServerConfig{Type: "http", URL: everythingURL(t, "streamableHttp") + "/mcp"}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := tt.cfg(t)
			cfg.Elicitation = mcpwire.ElicitDefaults
			p := newPool(t, map[string]mcpwire.ServerConfig{"everything": cfg}, nil)
			out, err := p.Call(ctxT(t), "everything__simulate-research-query", json.RawMessage(`{"topic":"python","ambiguous":true}`))
			if err != nil || !strings.Contains(string(out), "User declined - using default interpretation") {
				t.Errorf("= %.600s, %v", out, err)
			}
		})
	}
}
