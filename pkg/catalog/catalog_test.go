package catalog

import (
	"errors"
	"slices"
	"testing"
)

// tools makes the tools of server as a pool shows them: under their exposed names.
func tools(server string, names ...string) []Tool {
	out := make([]Tool, len(names))
	for i, n := range names {
		out[i] = Tool{Name: ExposedName(server, "", n), Remote: n}
	}
	return out
}

func TestResolve(t *testing.T) {
	c := New(map[string][]Tool{
		"tickets":   tools("tickets", "create", "get", "greet"),
		"jira":      tools("jira", "create", "greet", "delete"),
		"My Server": tools("My Server", "echo"),
		"geo":       tools("geo", "solve.area"),
		"down":      nil,
		"empty":     {},
		"":          {{Name: "clock"}},
	}, &Options{
		Unlisted: []string{"down"},
		Routes:   map[string]string{"greet": "tickets", "local_only": "", "gone": "disabled"},
		Permitted: func(server, tool string) error {
			if tool == "delete" || server == "down" && tool == "rm" {
				return errors.New("forbidden")
			}
			return nil
		},
		VendorAliases: true,
	})
	tests := []struct {
		name           string
		in             string
		wantName       string
		wantServer     string
		wantRemote     string
		wantErr        error
		wantCandidates int
	}{
		{name: "exposed name", in: "tickets__create", wantName: "tickets__create", wantServer: "tickets", wantRemote: "create"},
		{name: "Claude Code's spelling", in: "mcp__tickets__create", wantName: "tickets__create", wantServer: "tickets", wantRemote: "create"},
		{name: "colons", in: "tickets::create", wantName: "tickets__create", wantServer: "tickets", wantRemote: "create"},
		{name: "a server's name as names spell it", in: "mcp__My_Server__echo", wantName: "My_Server__echo", wantServer: "My Server", wantRemote: "echo"},
		{name: "unique bare name", in: "get", wantName: "tickets__get", wantServer: "tickets", wantRemote: "get"},
		{name: "bare name of two servers", in: "create", wantServer: "jira", wantErr: ErrAmbiguous, wantCandidates: 2},
		{name: "a route wins over two servers", in: "greet", wantName: "greet", wantServer: "tickets", wantRemote: "greet"},
		{name: "the other server's by its qualified name", in: "jira__greet", wantName: "jira__greet", wantServer: "jira", wantRemote: "greet"},
		{name: "routed to no server", in: "local_only", wantErr: ErrUnknownTool},
		{name: "routed to a server the catalog lacks", in: "gone", wantErr: ErrUnknownTool},
		{name: "vendor alias", in: "geo__solve_area", wantName: "geo__solve.area", wantServer: "geo", wantRemote: "solve.area"},
		{name: "a tool of no server", in: "clock", wantName: "clock", wantRemote: "clock"},
		{name: "forbidden, bare", in: "delete", wantServer: "jira", wantRemote: "delete", wantName: "delete", wantErr: ErrNotAllowed},
		{name: "forbidden, qualified", in: "jira::delete", wantServer: "jira", wantRemote: "delete", wantName: "jira::delete", wantErr: ErrNotAllowed},
		{name: "a server that has not listed its tools", in: "down__anything", wantName: "down__anything", wantServer: "down", wantRemote: "anything"},
		{name: "forbidden before listing", in: "down::rm", wantName: "down::rm", wantServer: "down", wantRemote: "rm", wantErr: ErrNotAllowed},
		{name: "a listed server without the tool", in: "empty__x", wantErr: ErrUnknownTool},
		{name: "unknown", in: "nope", wantErr: ErrUnknownTool},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := c.Resolve(tt.in)
			if !errors.Is(err, tt.wantErr) || (err != nil) != (tt.wantErr != nil) {
				t.Fatalf("Resolve(%q) = %+v, %v; want %v", tt.in, got, err, tt.wantErr)
			}
			if got.Server != tt.wantServer || (tt.wantCandidates == 0 && (got.Name != tt.wantName || got.Remote != tt.wantRemote)) {
				t.Errorf("Resolve(%q) = %q of %q (remote %q); want %q of %q (remote %q)", tt.in, got.Name, got.Server, got.Remote, tt.wantName, tt.wantServer, tt.wantRemote)
			}
			var amb *AmbiguousError
			if errors.As(err, &amb) != (tt.wantCandidates > 0) || (amb != nil && len(amb.Tools) != tt.wantCandidates) {
				t.Errorf("Resolve(%q): %v, want %d candidates", tt.in, err, tt.wantCandidates)
			}
		})
	}
	if got, _ := c.Resolve("down__anything"); !got.Destructive {
		t.Error("a tool nobody described is taken to be destructive")
	}
	if _, err := c.Resolve("create"); err.Error() != `ambiguous tool name: 2 servers have a tool called "create"; call one of jira__create, tickets__create` {
		t.Errorf("the ambiguous name's error: %v", err)
	}
	if got, want := c.Servers(), []string{"My Server", "down", "empty", "geo", "jira", "tickets"}; !slices.Equal(got, want) {
		t.Errorf("Servers() = %v, want %v", got, want)
	}
	var names []string
	for _, tool := range c.Tools() {
		names = append(names, tool.Name)
	}
	if want := []string{"My_Server__echo", "clock", "geo__solve.area", "greet", "jira__create", "jira__greet", "tickets__create", "tickets__get"}; !slices.Equal(names, want) {
		t.Errorf("Tools() = %v, want %v (sorted, without the forbidden)", names, want)
	}
}

// TestSharedNames: a name that tools of several servers are shown by is ambiguous, unless
// the catalog gives each its own.
func TestSharedNames(t *testing.T) {
	servers := map[string][]Tool{"local": {{Name: "clock", ReadOnly: true}}, "engineering": {{Name: "clock"}}}
	_, err := New(servers, nil).Resolve("clock")
	var amb *AmbiguousError
	if !errors.As(err, &amb) || len(amb.Tools) != 2 || amb.Tools[0].Server != "engineering" || amb.Tools[1].Server != "local" {
		t.Fatalf("Resolve = %v, want both clocks", err)
	}
	if err.Error() != `ambiguous tool name: 2 servers offer a tool called "clock": engineering, local` {
		t.Errorf("error %q", err)
	}

	c := New(servers, &Options{Distinct: true})
	if got, err := c.Resolve("clock"); err != nil || got.Server != "engineering" {
		t.Errorf("Resolve = %+v, %v; want the first server's", got, err)
	}
	other := withHash("clock", "local\x00clock")
	if got, err := c.Resolve(other); err != nil || got.Server != "local" || got.Remote != "clock" {
		t.Errorf("Resolve(%q) = %+v, %v; want the other server's", other, got, err)
	}
	if got, err := c.Resolve("local::clock"); err != nil || got.Name != other {
		t.Errorf("Resolve(local::clock) = %+v, %v", got, err)
	}
}
