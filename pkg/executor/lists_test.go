package executor_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/toolbus/toolbus/pkg/catalog"
	"github.com/toolbus/toolbus/pkg/executor"
	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/messages"
)

// The top-level lists cover every backend: a tool of no server by its name, a Go tool
// of a server under every spelling; what they refuse is answered not_allowed naming the
// list, and is not listed.
func TestRouterTopLevelLists(t *testing.T) {
	ok := func(context.Context, json.RawMessage) (json.RawMessage, error) { return json.RawMessage(`true`), nil }
	reg := localtools.New()
	for _, name := range []string{"clock", "file_writer"} {
		reg.Add(localtools.Tool{Info: messages.ToolInfo{Name: name}, Run: ok})
	}
	reg.Server("calc").Add(localtools.Tool{Info: messages.ToolInfo{Name: "add"}, Run: ok})
	reg.Server("calc").Add(localtools.Tool{Info: messages.ToolInfo{Name: "sub"}, Run: ok})
	router := executor.NewRouter(executor.LocalBackend{Registry: reg})
	exec := &executor.Executor{Router: router}
	ctx := context.Background()
	call := func(name string) messages.ToolResult {
		res, _ := exec.Execute(ctx, messages.ToolCall{ID: "c/r/0", Tool: name, Count: 1})
		return res
	}

	router.SetLists(catalog.Lists{Allowed: []string{"mcp__calc__add"}})
	for _, name := range []string{"calc__add", "mcp__calc__add", "calc::add", "add"} {
		if res := call(name); !res.Success {
			t.Errorf("%s: %+v, want it run", name, res.Error)
		}
	}
	for _, name := range []string{"clock", "file_writer", "calc__sub", "mcp__calc__sub", "sub"} {
		res := call(name)
		if res.Success || res.Error.Code != messages.CodeNotAllowed || !strings.Contains(res.Error.Message, "allowedTools does not list it") {
			t.Errorf("%s: %+v, want not_allowed by allowedTools", name, res.Error)
		}
	}
	var listed []string
	for _, info := range router.Tools(ctx) {
		listed = append(listed, info.Name)
	}
	if !slices.Equal(listed, []string{"calc__add"}) {
		t.Errorf("Tools = %v, want [calc__add]", listed)
	}
	offered := router.Offered(ctx, router.Backends()[0])
	if len(offered) != 1 || offered[0].Name != "calc__add" || offered[0].Server != "calc" || offered[0].Remote != "add" {
		t.Errorf("Offered = %+v, want calc__add of calc", offered)
	}

	router.SetLists(catalog.Lists{Blocked: []string{"file_writer"}})
	if res := call("file_writer"); res.Success || res.Error.Code != messages.CodeNotAllowed || !strings.Contains(res.Error.Message, `blockedTools lists it ("file_writer")`) {
		t.Errorf("file_writer: %+v, want not_allowed by blockedTools", res.Error)
	}
	for _, name := range []string{"clock", "calc__sub"} {
		if res := call(name); !res.Success {
			t.Errorf("%s: %+v, want it run", name, res.Error)
		}
	}
	router.SetLists(catalog.Lists{})
	if res := call("file_writer"); !res.Success {
		t.Errorf("file_writer without lists: %+v", res.Error)
	}
}
