package localtools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/toolbus/toolbus/pkg/catalog"
	"github.com/toolbus/toolbus/pkg/messages"
)

// Func runs a tool. Its error should be a *messages.ToolError; any other error is
// reported as a tool_error.
type Func func(ctx context.Context, args json.RawMessage) (json.RawMessage, error)

// Tool is one local tool.
type Tool struct {
	Info messages.ToolInfo
	Run  Func
	// Server, when set, is the server the tool is offered under, as an MCP server's
	// tools are: a model calls it "<server>__<name>" ([Tool.Name]), also
	// "mcp__<server>__<name>", "<server>::<name>", or by its bare name when no other
	// tool has it, and allow- and block-lists name it so ("mcp__calc__add"). Empty: a
	// tool of no server, called by its name.
	Server string
	// Timeout, when set, is the tool's own time limit (a tools-folder tool's manifest
	// or folder timeout): it stops the tool, and the executor takes it as the call's
	// time budget.
	Timeout time.Duration
}

// Name is what a model calls the tool, and the catalog shows: Info.Name, or for a tool
// of a server the name its server's tools have ([catalog.ExposedName]: "calc__add").
func (t Tool) Name() string {
	if t.Server == "" {
		return t.Info.Name
	}
	return catalog.ExposedName(t.Server, "", t.Info.Name)
}

// Registry holds local tools by name: the tools added to it and those of its tools
// folders. A tool added with [Registry.Add] wins over a folder tool of the same name.
// It is safe for concurrent use.
type Registry struct {
	set *toolSet
	// server is the server of the tools added through this registry ([Registry.Server]).
	server string
}

// toolSet is what a registry and its servers' views share.
type toolSet struct {
	mu      sync.RWMutex
	tools   map[string]Tool // by Tool.Name
	folders []*Folder
	// servers is the catalog of the tools of a server, for their qualified spellings and
	// bare names; built when first needed after a change.
	servers *catalog.Catalog
}

// New returns an empty registry.
func New() *Registry { return &Registry{set: &toolSet{tools: map[string]Tool{}}} }

// Server returns the registry seen as the in-process server called name: a tool added
// through it is that server's ([Tool.Server]), as the tools of an MCP server are, and
// everything else is r's. A program's in-process server "calc" with a tool "add", which
// a configuration allows as "mcp__calc__add":
//
//	calc := reg.Server("calc")
//	localtools.AddFunc(calc, messages.ToolInfo{Name: "add"}, add) // calc__add, mcp__calc__add, calc::add
func (r *Registry) Server(name string) *Registry { return &Registry{set: r.set, server: name} }

// Add registers t, replacing a tool of the same name. Added through [Registry.Server],
// t is that server's unless it names a server of its own.
func (r *Registry) Add(t Tool) error {
	if t.Info.Name == "" || t.Run == nil {
		return errors.New("localtools: a tool needs a name and a function")
	}
	if t.Server == "" {
		t.Server = r.server
	}
	s := r.set
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tools[t.Name()] = t
	if t.Server != "" {
		s.servers = nil
	}
	return nil
}

// AddFolder makes the tools of f part of the registry; a second folder of the same path
// is ignored. The folder is rescanned when due as the registry is consulted, so tools
// added to it appear without a restart. Of two folders holding a tool of the same
// name, the one added first wins.
func (r *Registry) AddFolder(f *Folder) {
	s := r.set
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.folders {
		if g.Dir() == f.Dir() {
			return
		}
	}
	s.folders = append(s.folders, f)
}

// Lookup returns the tool a model calls name ([Tool.Name]), exactly.
func (r *Registry) Lookup(name string) (Tool, bool) {
	s := r.set
	s.mu.RLock()
	t, ok := s.tools[name]
	folders := s.folders
	s.mu.RUnlock()
	if ok {
		return t, true
	}
	for _, f := range folders {
		if t, ok := f.Lookup(name); ok {
			return t, true
		}
	}
	return Tool{}, false
}

// Resolve finds the tool a model means by name: [Registry.Lookup], else a tool of a
// server by a qualified spelling ("mcp__calc__add", "calc::add") or by its bare name
// when one server alone has it, as [catalog.Catalog.Resolve] reads names. The error is
// [catalog.ErrUnknownTool] or [catalog.ErrAmbiguous].
func (r *Registry) Resolve(name string) (Tool, error) {
	if t, ok := r.Lookup(name); ok {
		return t, nil
	}
	c := r.serverCatalog()
	if c == nil {
		return Tool{}, fmt.Errorf("%w: %q", catalog.ErrUnknownTool, messages.EchoName(name))
	}
	ct, err := c.Resolve(name)
	if err != nil {
		return Tool{}, err
	}
	if t, ok := r.Lookup(ct.Name); ok {
		return t, nil
	}
	return Tool{}, fmt.Errorf("%w: %q", catalog.ErrUnknownTool, messages.EchoName(name))
}

// serverCatalog is the catalog of the tools of servers; nil when there are none.
func (r *Registry) serverCatalog() *catalog.Catalog {
	s := r.set
	s.mu.RLock()
	c := s.servers
	s.mu.RUnlock()
	if c != nil {
		return c
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.servers != nil {
		return s.servers
	}
	byServer := map[string][]catalog.Tool{}
	for name, t := range s.tools {
		if t.Server != "" {
			byServer[t.Server] = append(byServer[t.Server], catalog.Tool{Name: name, Remote: t.Info.Name})
		}
	}
	if len(byServer) == 0 {
		return nil
	}
	s.servers = catalog.New(byServer, nil)
	return s.servers
}

// Servers returns the servers of the registry's tools, sorted.
func (r *Registry) Servers() []string {
	s := r.set
	s.mu.RLock()
	defer s.mu.RUnlock()
	seen := map[string]bool{}
	var out []string
	for _, t := range s.tools {
		if t.Server != "" && !seen[t.Server] {
			seen[t.Server] = true
			out = append(out, t.Server)
		}
	}
	sort.Strings(out)
	return out
}

// Tools lists the registered tools, each under the name a model calls it
// ([Tool.Name]), sorted by it.
func (r *Registry) Tools() []messages.ToolInfo {
	s := r.set
	s.mu.RLock()
	seen := make(map[string]bool, len(s.tools))
	out := make([]messages.ToolInfo, 0, len(s.tools))
	for name, t := range s.tools {
		seen[name] = true
		info := t.Info
		info.Name = name
		out = append(out, info)
	}
	folders := s.folders
	s.mu.RUnlock()
	for _, f := range folders {
		for _, t := range f.Tools() {
			if !seen[t.Info.Name] {
				seen[t.Info.Name] = true
				out = append(out, t.Info)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
