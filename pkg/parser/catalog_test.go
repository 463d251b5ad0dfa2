package parser

import (
	"encoding/json"
	"testing"

	"github.com/toolbus/toolbus/pkg/catalog"
	"github.com/toolbus/toolbus/pkg/messages"
)

func TestCatalogSet(t *testing.T) {
	c := NewCatalog()
	obj := json.RawMessage(`{"type":"object","properties":{"id":{"type":"integer"}}}`)
	c.Set("local", []catalog.Tool{{Name: "create_ticket", InputSchema: obj}, {Name: "clock"}})
	c.Set("tickets", []catalog.Tool{{Name: "create_ticket", InputSchema: json.RawMessage(`{"type":"object"}`)}, {Name: "tickets__get", InputSchema: obj}})
	s := c.current()
	if len(s.known) != 3 || s.known[0] != "clock" || s.known[1] != "create_ticket" || s.known[2] != "tickets__get" {
		t.Errorf("known %v", s.known)
	}
	if _, ok := s.checks["create_ticket"]; ok {
		t.Error("a name two backends offer must not be checked against either's schema")
	}
	if _, ok := s.checks["tickets__get"]; !ok {
		t.Error("a unique tool's schema is checked")
	}
	c.Set("tickets", nil)
	if _, ok := c.current().checks["create_ticket"]; !ok {
		t.Error("after the server is gone, the local tool's schema applies again")
	}
	// A name two backends offer runs alongside other read-only calls when both say it
	// is read-only, and alone when one does not.
	c.Set("local", []catalog.Tool{{Name: "clock", Server: "local", ReadOnly: true}, {Name: "save", Server: "local"}})
	c.Set("engineering", []catalog.Tool{{Name: "clock", Server: "engineering", ReadOnly: true}, {Name: "save", Server: "engineering", ReadOnly: true}})
	st := &Stage{Catalog: c}
	snap := c.current()
	if !st.together(snap, &messages.ToolCall{Tool: "clock"}) {
		t.Error("clock, read-only in both backends, runs alone")
	}
	if st.together(snap, &messages.ToolCall{Tool: "save"}) {
		t.Error("save, read-only in one backend only, runs alongside others")
	}
}

// TestCatalogQualifiedTyping checks that a server's tool called by a qualified spelling
// has its XML-style values typed by its schema, as when called by its name.
func TestCatalogQualifiedTyping(t *testing.T) {
	c := NewCatalog()
	c.Set("everything", []catalog.Tool{{Name: "add", Server: "everything", Remote: "add",
		InputSchema: json.RawMessage(`{"type": "object", "properties": {"a": {"type": "integer"}}}`)}})
	s := &Stage{Catalog: c}
	for _, name := range []string{"add", "everything__add", "mcp__everything__add", "everything::add"} {
		_, w := s.Preview("<tool_call><function="+name+"><parameter=a>07</parameter></function></tool_call>", "")
		if len(w.Calls) != 1 || string(w.Calls[0].Arguments) != `{"a":7}` {
			t.Errorf("%s: %+v", name, w.Calls)
		}
	}
}

// TestCatalogBareName: a bare name that one server alone has is that server's tool to
// the parser, as to the executor that runs it; one that several have is not known.
func TestCatalogBareName(t *testing.T) {
	c := NewCatalog()
	c.Set("fs", []catalog.Tool{{Name: "fs__read", Server: "fs", Remote: "read", ReadOnly: true}})
	c.Set("db", []catalog.Tool{{Name: "db__read", Server: "db", Remote: "read", ReadOnly: true},
		{Name: "db__stat", Server: "db", Remote: "stat", ReadOnly: true}})
	st := &Stage{Catalog: c}
	for _, tt := range []struct {
		name, tool string
		want       bool
	}{
		{name: "one server's read-only tool runs with others", tool: "stat", want: true},
		{name: "a name of two servers' tools runs alone", tool: "read", want: false},
		{name: "by its qualified name it runs with others", tool: "fs::read", want: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := st.together(c.current(), &messages.ToolCall{Tool: tt.tool}); got != tt.want {
				t.Errorf("together(%q) = %v, want %v", tt.tool, got, tt.want)
			}
		})
	}
}
