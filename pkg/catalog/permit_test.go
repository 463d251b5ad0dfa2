package catalog

import (
	"errors"
	"testing"
)

func TestPermit(t *testing.T) {
	top := Lists{Allowed: []string{"mcp__calc__add", "clock", "tickets::*"}, Blocked: []string{"tickets__delete*"}}
	tests := []struct {
		name       string
		tool       Ref
		lists      []Lists
		wantList   string // "" when permitted
		wantReason string
	}{
		{name: "no lists", tool: Ref{Tool: "file_writer"}},
		{name: "a Go tool of a server, by its qualified pattern", tool: Ref{Server: "calc", Tool: "add"}, lists: []Lists{top}},
		{name: "a tool of no server, by its name", tool: Ref{Tool: "clock"}, lists: []Lists{top}},
		{name: "a tool of no server not allowed", tool: Ref{Tool: "file_writer"}, lists: []Lists{top},
			wantList: "allowedTools", wantReason: "allowedTools does not list it"},
		{name: "another server's tool of the same name", tool: Ref{Server: "other", Tool: "add"}, lists: []Lists{top}, wantList: "allowedTools"},
		{name: "the qualified pattern is not a bare name", tool: Ref{Tool: "add"}, lists: []Lists{top}, wantList: "allowedTools"},
		{name: "allowed by glob", tool: Ref{Server: "tickets", Tool: "create"}, lists: []Lists{top}},
		{name: "blocked wins over allowed", tool: Ref{Server: "tickets", Tool: "delete_all"}, lists: []Lists{top},
			wantList: "blockedTools", wantReason: `blockedTools lists it ("tickets__delete*")`},
		{name: "a server's own list first", tool: Ref{Server: "tickets", Tool: "create"},
			lists: []Lists{{Scope: "mcpServers.tickets", Blocked: []string{"create"}}, top}, wantList: "mcpServers.tickets.blockedTools"},
		{name: "a server's own allow-list", tool: Ref{Server: "tickets", Tool: "get"},
			lists: []Lists{{Scope: "mcpServers.tickets", Allowed: []string{"create"}}, top}, wantList: "mcpServers.tickets.allowedTools"},
		{name: "a qualified glob does not take a tool of no server", tool: Ref{Tool: "clock"}, lists: []Lists{{Blocked: []string{"*__*"}}}},
		{name: "a bare glob does", tool: Ref{Tool: "clock"}, lists: []Lists{{Blocked: []string{"c*"}}}, wantList: "blockedTools"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Permit(tt.tool, tt.lists...)
			if tt.wantList == "" {
				if err != nil {
					t.Fatalf("Permit = %v, want nil", err)
				}
				return
			}
			var na *NotAllowedError
			if !errors.As(err, &na) || !errors.Is(err, ErrNotAllowed) || na.List != tt.wantList {
				t.Fatalf("Permit = %v, want refused by %s", err, tt.wantList)
			}
			if tt.wantReason != "" && na.Reason() != tt.wantReason {
				t.Errorf("Reason = %q, want %q", na.Reason(), tt.wantReason)
			}
		})
	}
}

// A catalog whose Permitted says why refuses with that reason, under every spelling.
func TestCatalogRefusesWithTheReason(t *testing.T) {
	c := New(map[string][]Tool{"calc": {{Name: "calc__add", Remote: "add"}, {Name: "calc__sub", Remote: "sub"}}}, &Options{
		Permitted: func(server, tool string) error {
			return Permit(Ref{Server: server, Tool: tool}, Lists{Allowed: []string{"mcp__calc__add"}})
		}})
	for _, name := range []string{"calc__sub", "mcp__calc__sub", "calc::sub", "sub"} {
		_, err := c.Resolve(name)
		var na *NotAllowedError
		if !errors.As(err, &na) || na.List != "allowedTools" {
			t.Errorf("Resolve(%q) = %v, want refused by allowedTools", name, err)
		}
	}
	for _, name := range []string{"calc__add", "mcp__calc__add", "calc::add", "add"} {
		if _, err := c.Resolve(name); err != nil {
			t.Errorf("Resolve(%q) = %v", name, err)
		}
	}
}
