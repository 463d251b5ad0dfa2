package mcpwire

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

func TestExposedName(t *testing.T) {
	long := strings.Repeat("x", 80)
	tests := []struct {
		name, server, prefix, tool string
		want                       string
	}{
		{name: "plain", server: "tickets", tool: "create", want: "tickets__create"},
		{name: "prefix replaces the server", server: "tickets", prefix: "t_", tool: "create", want: "t_create"},
		{name: "invalid characters", server: "my server", tool: "files/read:all", want: "my_server__files_read_all"},
		{name: "dots and dashes stay", server: "a.b", tool: "get-sum", want: "a.b__get-sum"},
		{name: "too long", server: "s", tool: long, want: "s__" + strings.Repeat("x", 52) + "_" + hash8("s__"+long)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ExposedName(tt.server, tt.prefix, tt.tool)
			if got != tt.want {
				t.Errorf("ExposedName = %q, want %q", got, tt.want)
			}
			if len(got) > MaxNameLen {
				t.Errorf("%d characters, more than %d", len(got), MaxNameLen)
			}
		})
	}
	if ExposedName("s", "", long+"a") == ExposedName("s", "", long+"b") {
		t.Error("two long names that differ only at the end were shortened alike")
	}
}

func hash8(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:8]
}

func TestSplitAlias(t *testing.T) {
	servers := []string{"a", "a__b", "tickets", "mcp", "My Server"}
	tests := []struct {
		name, in           string
		wantServer, wantTo string
		wantOK             bool
	}{
		{name: "qualified", in: "tickets__create", wantServer: "tickets", wantTo: "create", wantOK: true},
		{name: "mcp alias", in: "mcp__tickets__create", wantServer: "tickets", wantTo: "create", wantOK: true},
		{name: "colon alias", in: "tickets::create", wantServer: "tickets", wantTo: "create", wantOK: true},
		{name: "longest server wins", in: "a__b__c", wantServer: "a__b", wantTo: "c", wantOK: true},
		{name: "tool with separator", in: "a__x__y", wantServer: "a", wantTo: "x__y", wantOK: true},
		{name: "unknown server", in: "zz__create", wantOK: false},
		{name: "unknown server with colons", in: "zz::create", wantOK: false},
		{name: "bare", in: "create", wantOK: false},
		{name: "nothing after the server", in: "tickets__", wantOK: false},
		{name: "a server called mcp does not take the prefix", in: "mcp__tickets__create", wantServer: "tickets", wantTo: "create", wantOK: true},
		{name: "a tool of the server called mcp", in: "mcp__echo", wantServer: "mcp", wantTo: "echo", wantOK: true},
		{name: "Claude Code's spelling of a server name", in: "mcp__My_Server__echo", wantServer: "My Server", wantTo: "echo", wantOK: true},
		{name: "the exposed spelling", in: "My_Server__echo", wantServer: "My Server", wantTo: "echo", wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, tool, ok := SplitAlias(tt.in, servers)
			if ok != tt.wantOK || s != tt.wantServer || tool != tt.wantTo {
				t.Errorf("SplitAlias(%q) = %q, %q, %v; want %q, %q, %v", tt.in, s, tool, ok, tt.wantServer, tt.wantTo, tt.wantOK)
			}
		})
	}
}

func TestMatchTool(t *testing.T) {
	tests := []struct {
		name     string
		patterns []string
		want     bool
	}{
		{name: "bare", patterns: []string{"create"}, want: true},
		{name: "glob", patterns: []string{"cr*"}, want: true},
		{name: "qualified", patterns: []string{"tickets__create"}, want: true},
		{name: "mcp qualified glob", patterns: []string{"mcp__tickets__*"}, want: true},
		{name: "colons", patterns: []string{"tickets::create"}, want: true},
		{name: "other server", patterns: []string{"other__create"}, want: false},
		{name: "none", patterns: nil, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MatchTool(tt.patterns, "tickets", "create"); got != tt.want {
				t.Errorf("MatchTool(%v) = %v, want %v", tt.patterns, got, tt.want)
			}
		})
	}
}

func FuzzExposedName(f *testing.F) {
	f.Add("server", "", "tool")
	f.Add("a b", "p.", strings.Repeat("é", 40))
	f.Fuzz(func(t *testing.T, server, prefix, tool string) {
		got := ExposedName(server, prefix, tool)
		if len(got) > MaxNameLen {
			t.Fatalf("%q: %d characters", got, len(got))
		}
		for _, r := range got {
			if !validNameRune(r) {
				t.Fatalf("%q holds %q", got, r)
			}
		}
	})
}

// The allow-lists decide from the configuration alone: a server that has not listed its
// tools yet (the first response after start or a reload) refuses a tool they forbid under
// every spelling, and still resolves the ones they allow.
func TestAllowListsBeforeListing(t *testing.T) {
	in := map[string]catalogInput{
		"everything": {cfg: ServerConfig{Command: "x", AllowedTools: []string{"echo"}}},
		"blocky":     {cfg: ServerConfig{Command: "x", BlockedTools: []string{"rm*"}}},
		"open":       {cfg: ServerConfig{Command: "x"}},
	}
	routed := "everything"
	c := newCatalog(in, map[string]*string{"sum": &routed}, []string{"everything__*", "blocky__*"})
	for _, name := range []string{"everything__get-sum", "mcp__everything__get-sum", "everything::get-sum", "sum",
		"blocky__rm_rf", "mcp__blocky__rmdir", "blocky::rm", "open__anything", "open::anything", "mcp__open__x"} {
		if _, err := c.Resolve(name); !errors.Is(err, ErrNotAllowed) {
			t.Errorf("Resolve(%q) = %v, want not allowed", name, err)
		}
	}
	for _, name := range []string{"everything__echo", "mcp__everything__echo", "everything::echo", "blocky__ls"} {
		if _, err := c.Resolve(name); err != nil {
			t.Errorf("Resolve(%q) = %v, want the tool", name, err)
		}
	}
}
