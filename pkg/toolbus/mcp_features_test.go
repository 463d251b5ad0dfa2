package toolbus_test

import (
	"regexp"
	"slices"
	"testing"

	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/mcpwire"
	"github.com/toolbus/toolbus/pkg/messages"
)

// The whole pipeline against server-everything over stdio and streamable HTTP: a model
// reads a resource, follows the resource links a tool answered with through the tool the
// result names, gets a prompt, and calls a tool that runs only as an MCP task.
func TestMCPResourcesPromptsAndTasksThroughPipeline(t *testing.T) {
	t.Parallel()
	everything := mcpNPMScript(t, mcpEverythingPkg)
	_, httpURL := mcpStartEverything(t, "streamableHttp", 0)
	cfg := &config.Config{MCPServers: map[string]mcpwire.ServerConfig{
		"everything":      {Command: "node", Args: []string{everything, "stdio"}},
		"everything_http": {Type: "http", URL: httpURL + "/mcp"},
	}}
	p := startMCPPipeline(t, cfg, nil)

	servers := []string{"everything", "everything_http"}
	var calls []mcpCall
	for _, s := range servers {
		calls = append(calls,
			mcpCall{s + "__resources_read", map[string]any{"uri": "demo://resource/dynamic/text/2"}},
			mcpCall{s + "__get-resource-links", map[string]any{"count": 2}},
			mcpCall{s + "__prompts_get", map[string]any{"name": "args-prompt", "arguments": map[string]string{"city": "Oslo"}}},
			mcpCall{s + "__simulate-research-query", map[string]any{"topic": "the bus"}},
			mcpCall{s + "__resources_read", map[string]any{"uri": 2}},
		)
	}
	r := p.ask(calls...)
	link := regexp.MustCompile(`demo://resource/dynamic/(text|blob)/[0-9]+`)
	var follow []mcpCall
	for i, s := range servers {
		got := r[i*5 : i*5+5]
		mcpOK(t, got[0], "Resource 2: This is a plaintext resource")
		mcpOK(t, got[1], s+`__resources_read`)
		mcpOK(t, got[2], "Oslo")
		mcpOK(t, got[3], "# Research Report: the bus")
		mcpFailed(t, got[4], messages.CodeInvalidArguments)
		uris := slices.Compact(slices.Sorted(slices.Values(link.FindAllString(string(got[1].Result), -1))))
		if len(uris) != 2 {
			t.Fatalf("%s: links %q in %.400s", s, uris, got[1].Result)
		}
		for _, uri := range uris {
			follow = append(follow, mcpCall{s + "__resources_read", map[string]any{"uri": uri}})
		}
	}
	r = p.ask(follow...)
	for i, want := range []string{"Resource 1: This is a base64 blob", "Resource 2: This is a plaintext resource"} {
		mcpOK(t, r[i], want)
		mcpOK(t, r[i+2], want)
	}
}
