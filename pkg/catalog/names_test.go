package catalog

import (
	"crypto/sha256"
	"encoding/hex"
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
	servers := []string{"a", "a__b", "tickets", "mcp", "My Server", "x::y"}
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
		{name: "nothing after the colons", in: "tickets::", wantOK: false},
		{name: "bare", in: "create", wantOK: false},
		{name: "nothing after the server", in: "tickets__", wantOK: false},
		{name: "a server called mcp does not take the prefix", in: "mcp__tickets__create", wantServer: "tickets", wantTo: "create", wantOK: true},
		{name: "a tool of the server called mcp", in: "mcp__echo", wantServer: "mcp", wantTo: "echo", wantOK: true},
		{name: "Claude Code's spelling of a server name", in: "mcp__My_Server__echo", wantServer: "My Server", wantTo: "echo", wantOK: true},
		{name: "the exposed spelling", in: "My_Server__echo", wantServer: "My Server", wantTo: "echo", wantOK: true},
		{name: "colons in the tool's name", in: "tickets__a::b", wantServer: "tickets", wantTo: "a::b", wantOK: true},
		{name: "a server whose name has colons", in: "x::y::echo", wantServer: "x::y", wantTo: "echo", wantOK: true},
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

func TestValidPrefixAndPattern(t *testing.T) {
	for _, tt := range []struct {
		name    string
		prefix  string
		pattern string
		want    bool
	}{
		{name: "names' characters", prefix: "t-1.x_", pattern: "get_*", want: true},
		{name: "empty", want: true},
		{name: "a space, an open bracket", prefix: "t ", pattern: "get_[", want: false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := ValidPrefix(tt.prefix); got != tt.want {
				t.Errorf("ValidPrefix(%q) = %v", tt.prefix, got)
			}
			if got := ValidPattern(tt.pattern); got != tt.want {
				t.Errorf("ValidPattern(%q) = %v", tt.pattern, got)
			}
		})
	}
}

func TestVendorNames(t *testing.T) {
	long := strings.Repeat("y", 70)
	names := []string{"geometry.solve_circle_area", "add", "a.b", "a_b", "", "d.e", long}
	tests := []struct {
		name, in, want string
	}{
		{name: "a valid name is its own", in: "add", want: "add"},
		{name: "other characters become '_'", in: "geometry.solve_circle_area", want: "geometry_solve_circle_area"},
		{name: "an alias another name takes ends in a hash", in: "a.b", want: "a_b_" + hash8("a.b")},
		{name: "the name that takes it stays", in: "a_b", want: "a_b"},
		{name: "empty", in: "", want: "_" + hash8("")},
		{name: "too long", in: long, want: strings.Repeat("y", 55) + "_" + hash8(long)},
	}
	got := VendorNames(names)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got[tt.in] != tt.want {
				t.Errorf("VendorNames[%q] = %q, want %q", tt.in, got[tt.in], tt.want)
			}
			name, ok := Unalias(tt.want, names)
			if tt.want == tt.in {
				if ok {
					t.Errorf("Unalias(%q) = %q: a name of its own is no alias", tt.want, name)
				}
			} else if !ok || name != tt.in {
				t.Errorf("Unalias(%q) = %q, %v; want %q", tt.want, name, ok, tt.in)
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
