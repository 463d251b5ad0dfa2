package mcpwire_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/toolbus/toolbus/pkg/catalog"
	"github.com/toolbus/toolbus/pkg/mcpwire"
)

// The top-level block-list refuses a server's tool as the server's own lists do, and
// the refusal names the list that refused it.
func TestPoolGlobalBlockList(t *testing.T) {
	p := newPool(t, map[string]mcpwire.ServerConfig{"a": {Command: "in-memory", BlockedTools: []string{"fail"}}, "b": placeholder},
		&mcpwire.Options{Dial: inMemory(testServer()), AllowedTools: []string{"a__*", "b::*"}, BlockedTools: []string{"mcp__b__gr*", "image"}})
	ctx := ctxT(t)
	tests := []struct {
		tool, wantList string
	}{
		{"a__fail", "mcpServers.a.blockedTools"},
		{"b__greet", "blockedTools"},
		{"a__image", "blockedTools"},
		{"b__image", "blockedTools"},
	}
	for _, tt := range tests {
		_, err := p.Lookup(ctx, tt.tool)
		var na *catalog.NotAllowedError
		if !errors.As(err, &na) || !errors.Is(err, mcpwire.ErrNotAllowed) || na.List != tt.wantList {
			t.Errorf("%s: err = %v, want refused by %s", tt.tool, err, tt.wantList)
		}
	}
	for _, tool := range []string{"a__add", "b__add", "a__greet"} {
		if _, err := p.Lookup(ctx, tool); err != nil {
			t.Errorf("%s: %v", tool, err)
		}
	}
}

// A server whose tools the lists all refuse has still listed them: its catalog is empty,
// not missing, so that whoever waits for its tools (toolbus's WaitForTools) stops
// waiting.
func TestCatalogOfAServerWhollyRefused(t *testing.T) {
	var mu sync.Mutex
	got := map[string][]mcpwire.Tool{}
	p := newPool(t, map[string]mcpwire.ServerConfig{"a": placeholder}, &mcpwire.Options{
		Dial: inMemory(testServer()), AllowedTools: []string{"nothing__echo"},
		OnCatalog: func(server string, tools []mcpwire.Tool) {
			mu.Lock()
			defer mu.Unlock()
			got[server] = tools
		},
	})
	if tools := p.Tools(ctxT(t)); len(tools) != 0 {
		t.Fatalf("tools = %v, want none", tools)
	}
	eventually(t, "the server's catalog", func() bool {
		mu.Lock()
		defer mu.Unlock()
		tools, ok := got["a"]
		return ok && tools != nil && len(tools) == 0
	})
}
