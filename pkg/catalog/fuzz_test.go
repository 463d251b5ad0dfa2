package catalog

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// FuzzSplitAlias holds SplitAlias to the spellings of Qualified: what it reads is one of
// them, and each of them reads back as the server and tool it was made of.
func FuzzSplitAlias(f *testing.F) {
	f.Add("tickets__create", "tickets", "create")
	f.Add("mcp__My_Server__echo", "My Server", "echo")
	f.Add("a::b::c", "a::b", "x__y")
	f.Add("mcp__mcp__x", "mcp", "mcp__x")
	f.Fuzz(func(t *testing.T, name, server, tool string) {
		servers := []string{server, "other"}
		if s, tl, ok := SplitAlias(name, servers); ok {
			spellings := append(Qualified(s, tl), Qualified(sanitize(s), tl)[:2]...)
			if !slices.Contains(servers, s) || tl == "" || !slices.Contains(spellings, name) {
				t.Fatalf("SplitAlias(%q, %q) = %q, %q", name, servers, s, tl)
			}
		}
		// A spelling a tool's name could make of another reads as two; "mcp__" both
		// starts Claude Code's spelling and may start a server's name.
		if server == "" || tool == "" || strings.Contains(server+tool, ":") || strings.HasPrefix(server+Separator, mcpPrefix) {
			return
		}
		for _, q := range Qualified(server, tool) {
			if s, tl, ok := SplitAlias(q, []string{server}); !ok || s != server || tl != tool {
				t.Fatalf("SplitAlias(%q) = %q, %q, %v; want %q, %q", q, s, tl, ok, server, tool)
			}
		}
	})
}

// FuzzResolve builds a catalog of two servers' tools and resolves a name: every tool is
// found by its name and by its vendor alias, and any name resolves to one of the
// catalog's tools or to an error that says why not.
func FuzzResolve(f *testing.F) {
	f.Add("tickets", "create", "jira", "create", "create")
	f.Add("a", "b__x", "a__b", "x", "a__b__x")
	f.Add("geo", "solve.area", "", "clock", "geo__solve_area")
	f.Add("s", "t", "s", "t", "s::t")
	f.Fuzz(func(t *testing.T, server1, tool1, server2, tool2, name string) {
		servers := map[string][]Tool{}
		for _, st := range [][2]string{{server1, tool1}, {server2, tool2}} {
			servers[st[0]] = append(servers[st[0]], Tool{Name: ExposedName(st[0], "", st[1]), Remote: st[1]})
		}
		c := New(servers, &Options{Distinct: true, VendorAliases: true})
		all := c.Tools()
		var names []string
		for _, tool := range all {
			names = append(names, tool.Name)
		}
		alias := VendorNames(names)
		for _, tool := range all {
			for _, n := range []string{tool.Name, alias[tool.Name]} {
				if got, err := c.Resolve(n); err != nil || got.Name != tool.Name || got.Server != tool.Server || got.Remote != tool.Remote {
					t.Fatalf("Resolve(%q) = %+v, %v; want %+v", n, got, err, tool)
				}
			}
		}
		got, err := c.Resolve(name)
		var amb *AmbiguousError
		switch {
		case err == nil:
			if !slices.ContainsFunc(all, func(tool Tool) bool { return tool.Name == got.Name && tool.Server == got.Server }) {
				t.Fatalf("Resolve(%q) = %+v, not a tool of the catalog", name, got)
			}
		case errors.As(err, &amb):
			if len(amb.Tools) < 2 {
				t.Fatalf("Resolve(%q): %v", name, err)
			}
		case !errors.Is(err, ErrUnknownTool):
			t.Fatalf("Resolve(%q): %v", name, err)
		}
	})
}
