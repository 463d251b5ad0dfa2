package toolbus_test

// The whole pipeline (parser → executor → formatter on embedded NATS) against MCP
// servers nobody here wrote: the npm reference servers over every transport, and the
// ticket-service example (plain JSON-RPC) routed by the example's own configuration.
// pkg/mcpwire's TestEverything and TestMemoryServer prove the pool against the same
// servers; these prove that a model's calls reach them through toolbus.

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/mcpwire"
	"github.com/toolbus/toolbus/pkg/messages"
)

// mcpLocalDecoys are local tools named like remote ones: echo (server-everything has
// one) and create_ticket (the ticket service has one).
func mcpLocalDecoys(t *testing.T) *localtools.Registry {
	t.Helper()
	reg := localtools.New()
	type text struct {
		Message string `json:"message,omitempty"`
		Title   string `json:"title,omitempty"`
	}
	for _, name := range []string{"echo", "create_ticket"} {
		err := localtools.AddFunc(reg, messages.ToolInfo{Name: name, Description: "the local " + name, ReadOnly: true},
			func(_ context.Context, in text) (map[string]string, error) {
				return map[string]string{"ran": "local " + name}, nil
			})
		if err != nil {
			t.Fatal(err)
		}
	}
	return reg
}

func TestMCPReferenceServersThroughPipeline(t *testing.T) {
	t.Parallel()
	everything := mcpNPMScript(t, mcpEverythingPkg)
	memory := mcpNPMScript(t, mcpMemoryPkg)
	_, httpURL := mcpStartEverything(t, "streamableHttp", 0)
	_, sseURL := mcpStartEverything(t, "sse", 0)
	ticketsURL := mcpStartTicketService(t)

	// The ticket-service example's configuration as a user runs it, its npx server
	// replaced by the installed copy (tests do not download), plus the other servers.
	data, err := os.ReadFile(filepath.Join(mcpRepoRoot(t), "examples", "ticket-service", "toolbus.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(data, "examples/ticket-service/toolbus.json", func(k string) (string, bool) {
		return ticketsURL, k == "TICKETS_URL"
	})
	if err != nil {
		t.Fatal(err)
	}
	memoryFile := filepath.Join(t.TempDir(), "memory.jsonl")
	cfg.MCPServers["everything"] = mcpwire.ServerConfig{Command: "node", Args: []string{everything, "stdio"}}
	cfg.MCPServers["everything_http"] = mcpwire.ServerConfig{Type: "http", URL: httpURL + "/mcp"}
	cfg.MCPServers["everything_sse"] = mcpwire.ServerConfig{Type: "sse", URL: sseURL + "/sse"}
	cfg.MCPServers["memory"] = mcpwire.ServerConfig{Command: "node", Args: []string{memory}, Env: map[string]string{"MEMORY_FILE_PATH": memoryFile}}
	toHTTP := "everything_http"
	cfg.Routes["get-sum"] = &toHTTP
	p := startMCPPipeline(t, cfg, mcpLocalDecoys(t))

	r := p.ask(
		mcpCall{"everything__echo", map[string]any{"message": "over stdio"}},
		mcpCall{"everything_http__echo", map[string]any{"message": "over streamable http"}},
		mcpCall{"everything_sse__echo", map[string]any{"message": "over sse"}},
		mcpCall{"everything__get-sum", map[string]any{"a": 2, "b": 3}},
		mcpCall{"everything_sse__get-sum", map[string]any{"a": 40, "b": 2}},
		mcpCall{"everything_http__get-structured-content", map[string]any{"location": "Chicago"}},
		mcpCall{"mcp__everything_sse__echo", map[string]any{"message": "by alias"}},
		mcpCall{"everything::echo", map[string]any{"message": "by the other alias"}},
		mcpCall{"get-sum", map[string]any{"a": 20, "b": 22}},                                     // routed to everything_http
		mcpCall{"echo", map[string]any{"message": "who answers?"}},                               // local wins, no route
		mcpCall{"create_ticket", map[string]any{"title": "printer on fire", "priority": "high"}}, // the route wins
		mcpCall{"create_entities", map[string]any{"entities": []map[string]any{
			{"name": "toolbus", "entityType": "project", "observations": []string{"runs tool calls over NATS"}}}}},
		mcpCall{"create_ticket", map[string]any{"priority": "urgent"}}, // the service rejects it
	)
	mcpOK(t, r[0], `"Echo: over stdio"`)
	mcpOK(t, r[1], `"Echo: over streamable http"`)
	mcpOK(t, r[2], `"Echo: over sse"`)
	mcpOK(t, r[3], "5")
	mcpOK(t, r[4], "42")
	mcpOK(t, r[5], `"temperature"`)
	mcpOK(t, r[6], `"Echo: by alias"`)
	mcpOK(t, r[7], `"Echo: by the other alias"`)
	mcpOK(t, r[8], "42")
	mcpOK(t, r[9], `"local echo"`)
	mcpOK(t, r[10], `"id":"T-1"`, `"status":"open"`, `"priority":"high"`)
	mcpOK(t, r[11], `"toolbus"`)
	mcpFailed(t, r[12], messages.CodeInvalidArguments)

	// Later calls see the effects of earlier ones: the ticket exists, the entity is
	// in the graph (and in the file the configured environment named). Every server
	// has listed its tools by now, so names they lack are known to be unknown.
	r = p.ask(
		mcpCall{"get_ticket_status", map[string]any{"id": "T-1"}},
		mcpCall{"get_ticket_status", map[string]any{"id": "T-99"}},
		mcpCall{"read_graph", nil},
		mcpCall{"memory__search_nodes", map[string]any{"query": "NATS"}},
		mcpCall{"tickets__get_ticket_status", map[string]any{"id": "T-1"}}, // qualified despite the route
		mcpCall{"get-tiny-image", nil},                                     // three servers have it: ambiguous
		mcpCall{"everything__no-such-tool", nil},
	)
	mcpOK(t, r[0], `"status":"open"`)
	mcpFailed(t, r[1], messages.CodeToolError)
	if r[1].Error != nil && !strings.Contains(r[1].Error.Message, "there is no ticket T-99") {
		t.Errorf("the service's own message is lost: %s", r[1].Error.Message)
	}
	mcpOK(t, r[2], `"toolbus"`, `"runs tool calls over NATS"`)
	mcpOK(t, r[3], `"toolbus"`)
	mcpOK(t, r[4], `"status":"open"`)
	mcpFailed(t, r[5], messages.CodeUnknownTool)
	if r[5].Error != nil && !strings.Contains(r[5].Error.Message, "everything_sse__get-tiny-image") {
		t.Errorf("the ambiguous name's error does not say which names to use: %s", r[5].Error.Message)
	}
	mcpFailed(t, r[6], messages.CodeUnknownTool)
	if b, err := os.ReadFile(memoryFile); err != nil || !strings.Contains(string(b), "toolbus") {
		t.Errorf("MEMORY_FILE_PATH not honoured: %q, %v", b, err)
	}
}

// A local tool wins over a remote one of the same name; a route sends the name to the
// server instead, and a null route keeps a name away from the servers.
func TestMCPLocalToolWinsUnlessRouted(t *testing.T) {
	t.Parallel()
	everything := mcpNPMScript(t, mcpEverythingPkg)
	server, _ := json.Marshal(mcpwire.ServerConfig{Command: "node", Args: []string{everything, "stdio"}})
	for _, tt := range []struct {
		name   string
		routes string
		echo   string
		sum    bool
	}{
		{name: "no route", routes: `{}`, echo: `"local echo"`, sum: true},
		{name: "routes", routes: `{"echo": "everything", "get-sum": null}`, echo: `"Echo: hi"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := mcpConfig(t, `{"mcpServers": {"everything": `+string(server)+`}, "routes": `+tt.routes+`}`)
			p := startMCPPipeline(t, cfg, mcpLocalDecoys(t))
			r := p.ask(
				mcpCall{"echo", map[string]any{"message": "hi"}},
				mcpCall{"everything__echo", map[string]any{"message": "hi"}},
				mcpCall{"get-sum", map[string]any{"a": 1, "b": 2}},
			)
			mcpOK(t, r[0], tt.echo)
			mcpOK(t, r[1], `"Echo: hi"`) // the qualified name always reaches the server
			if tt.sum {
				mcpOK(t, r[2], "3")
			} else {
				mcpFailed(t, r[2], messages.CodeUnknownTool)
			}
		})
	}
}
