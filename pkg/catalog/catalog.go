package catalog

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/toolbus/toolbus/pkg/messages"
)

// Catalog is the tools of a set of servers under the names a model calls them by, and the
// one lookup of what a model means by a name ([Catalog.Resolve]). It is immutable: build
// a new one when a server's tools change.
type Catalog struct {
	tools    []Tool                      // visible, sorted by Name (then by server)
	byName   map[string][]int            // Name → indexes in tools
	remote   map[string]map[string]int   // server → Remote → index in tools
	hidden   map[string]map[string]error // server → Remote → why Permitted forbids the tool
	servers  []string                    // sorted, without ""
	unlisted map[string]bool
	routes   map[string]string
	allowed  func(server, tool string) error
	aliases  map[string]string // vendor alias → Name
}

// Options configure a [Catalog]; nil means none of them.
type Options struct {
	// Unlisted are servers whose tools are not known yet (they have not answered): a
	// qualified name of one of their tools resolves to a tool made of the name alone,
	// [Tool.Destructive], so that calling it reports the server rather than the tool as
	// unknown.
	Unlisted []string
	// Routes send a name to one server, whatever others offer: that server's tool of
	// that name (or of a qualified spelling of it) is shown under the name, and the name
	// resolves to it first, also before the server lists its tools. A name routed to ""
	// (toolbus's configuration: to the local tools) or to a server the catalog does not
	// have is none of its tools.
	Routes map[string]string
	// Permitted, when set, decides whether the tool called tool on server may be called:
	// nil, or why not (toolbus's is [Permit] over the configuration's lists). A tool it
	// forbids is left out of the catalog, and every spelling of it, also of a server that
	// has not listed its tools, resolves to [ErrNotAllowed] with that reason.
	Permitted func(server, tool string) error
	// Distinct gives every tool a name of its own: of tools that would be shown by one
	// name, the first (by server, then list) keeps it and the others' end in a hash of
	// their server and remote name. Without it, such a name is [ErrAmbiguous].
	Distinct bool
	// VendorAliases resolves the names [VendorNames] gave the catalog's tools: set it
	// when the catalog holds every tool a model is shown, whose names the aliases were
	// made of.
	VendorAliases bool
}

// New returns the catalog of the tools of servers, which maps each server's name to its
// tools (a tool's Server is set to it). Tools under "" belong to no server: they are
// known by their names alone. A server without tools still counts for the qualified
// spellings.
func New(servers map[string][]Tool, o *Options) *Catalog {
	if o == nil {
		o = &Options{}
	}
	c := &Catalog{
		byName:   map[string][]int{},
		remote:   map[string]map[string]int{},
		hidden:   map[string]map[string]error{},
		unlisted: map[string]bool{},
		routes:   o.Routes,
		allowed:  o.Permitted,
	}
	for _, s := range o.Unlisted {
		c.unlisted[s] = true
	}
	routedName := map[[2]string]string{} // {server, tool} → route name
	for name, server := range o.Routes {
		if server != "" {
			routedName[[2]string{server, name}] = name
		}
	}
	for _, server := range slices.Sorted(maps.Keys(servers)) {
		if server != "" {
			c.servers = append(c.servers, server)
		}
		for _, t := range servers[server] {
			t.Server = server
			if t.Remote == "" {
				t.Remote = t.Name
			}
			if err := c.permit(server, t.Remote); err != nil {
				if c.hidden[server] == nil {
					c.hidden[server] = map[string]error{}
				}
				c.hidden[server][t.Remote] = err
				continue
			}
			if r, ok := routedName[[2]string{server, t.Remote}]; ok {
				t.Name = r
			}
			c.tools = append(c.tools, t)
		}
	}
	sort.SliceStable(c.tools, func(i, j int) bool { return c.tools[i].Name < c.tools[j].Name })
	if o.Distinct {
		taken := map[string]bool{}
		for i := range c.tools {
			t := &c.tools[i]
			if taken[t.Name] {
				t.Name = withHash(t.Name, t.Server+"\x00"+t.Remote)
			}
			taken[t.Name] = true
		}
		sort.SliceStable(c.tools, func(i, j int) bool { return c.tools[i].Name < c.tools[j].Name })
	}
	for i, t := range c.tools {
		c.byName[t.Name] = append(c.byName[t.Name], i)
		if c.remote[t.Server] == nil {
			c.remote[t.Server] = map[string]int{}
		}
		c.remote[t.Server][t.Remote] = i
	}
	if o.VendorAliases {
		c.aliases = vendorAliases(slices.Collect(maps.Keys(c.byName)))
	}
	return c
}

// permit is nil when the tool called tool on server may be called, else an error that
// is [ErrNotAllowed] and says why.
func (c *Catalog) permit(server, tool string) error {
	if c.allowed == nil {
		return nil
	}
	err := c.allowed(server, tool)
	if err == nil || errors.Is(err, ErrNotAllowed) {
		return err
	}
	return fmt.Errorf("%w: %q of server %q: %w", ErrNotAllowed, messages.EchoName(tool), server, err)
}

// Tools returns the tools a model may call, sorted by name.
func (c *Catalog) Tools() []Tool { return slices.Clone(c.tools) }

// Servers returns the servers, sorted.
func (c *Catalog) Servers() []string { return slices.Clone(c.servers) }

// Resolve finds the tool a model means by name. In order: a route ([Options].Routes);
// the name a tool is shown by; its vendor alias ([Options].VendorAliases); a qualified
// spelling, "<server>__<tool>", "mcp__<server>__<tool>" or "<server>::<tool>"
// ([SplitAlias]); a bare tool name that exactly one server has. A qualified name of an
// unlisted server's tool resolves (see [Options].Unlisted). With [ErrNotAllowed] the tool
// returned names the server that refuses the call, with [ErrAmbiguous] (an
// [*AmbiguousError]) the first tool meant.
func (c *Catalog) Resolve(name string) (Tool, error) {
	if server, ok := c.routes[name]; ok {
		if server == "" {
			return Tool{}, fmt.Errorf("%w: %q is routed to the local tools", ErrUnknownTool, messages.EchoName(name))
		}
		if !slices.Contains(c.servers, server) {
			return Tool{}, fmt.Errorf("%w: %q is routed to %q, which is disabled", ErrUnknownTool, messages.EchoName(name), server)
		}
		remote := name
		if s, t, ok := SplitAlias(name, c.servers); ok && s == server {
			remote = t
		}
		return c.onServer(name, server, remote, true)
	}
	if idx := c.byName[name]; len(idx) > 0 {
		return c.named(name, idx)
	}
	if original, ok := c.aliases[name]; ok {
		return c.named(original, c.byName[original])
	}
	if server, remote, ok := SplitAlias(name, c.servers); ok {
		return c.onServer(name, server, remote, c.unlisted[server])
	}
	var found []Tool
	for _, t := range c.tools {
		if t.Remote == name {
			found = append(found, t)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		for _, server := range c.servers {
			if err := c.hidden[server][name]; err != nil {
				return Tool{Name: name, Server: server, Remote: name}, err
			}
		}
		return Tool{}, fmt.Errorf("%w: no server has a tool called %q", ErrUnknownTool, messages.EchoName(name))
	}
	return found[0], &AmbiguousError{Name: name, Tools: found}
}

// named is the tool shown by name, idx its indexes in tools: one, or the tools of several
// servers.
func (c *Catalog) named(name string, idx []int) (Tool, error) {
	if len(idx) == 1 {
		return c.tools[idx[0]], nil
	}
	found := make([]Tool, len(idx))
	for i, j := range idx {
		found[i] = c.tools[j]
	}
	return found[0], &AmbiguousError{Name: name, Tools: found}
}

// onServer finds remote on server; unlisted accepts a tool the catalog does not know.
func (c *Catalog) onServer(name, server, remote string, unlisted bool) (Tool, error) {
	if err := c.permit(server, remote); err != nil {
		return Tool{Name: name, Server: server, Remote: remote}, err
	}
	if i, ok := c.remote[server][remote]; ok {
		return c.tools[i], nil
	}
	if unlisted {
		return Tool{Name: name, Server: server, Remote: remote, Destructive: true}, nil
	}
	return Tool{}, fmt.Errorf("%w: server %q has no tool called %q", ErrUnknownTool, server, messages.EchoName(remote))
}
