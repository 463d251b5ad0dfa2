package localtools

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"sync"

	"github.com/toolbus/toolbus/pkg/messages"
)

// Func runs a tool. Its error should be a *messages.ToolError; any other error is
// reported as a tool_error.
type Func func(ctx context.Context, args json.RawMessage) (json.RawMessage, error)

// Tool is one local tool.
type Tool struct {
	Info messages.ToolInfo
	Run  Func
}

// Registry holds local tools by name: the tools added to it and those of its tools
// folders. A tool added with [Registry.Add] wins over a folder tool of the same name.
// It is safe for concurrent use.
type Registry struct {
	mu      sync.RWMutex
	tools   map[string]Tool
	folders []*Folder
}

// New returns an empty registry.
func New() *Registry { return &Registry{tools: map[string]Tool{}} }

// Add registers t, replacing a tool of the same name.
func (r *Registry) Add(t Tool) error {
	if t.Info.Name == "" || t.Run == nil {
		return errors.New("localtools: a tool needs a name and a function")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tools[t.Info.Name] = t
	return nil
}

// AddFolder makes the tools of f part of the registry; a second folder of the same path
// is ignored. The folder is rescanned when due as the registry is consulted, so tools
// added to it appear without a restart. Of two folders holding a tool of the same
// name, the one added first wins.
func (r *Registry) AddFolder(f *Folder) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, g := range r.folders {
		if g.Dir() == f.Dir() {
			return
		}
	}
	r.folders = append(r.folders, f)
}

// Lookup returns the tool called name.
func (r *Registry) Lookup(name string) (Tool, bool) {
	r.mu.RLock()
	t, ok := r.tools[name]
	folders := r.folders
	r.mu.RUnlock()
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

// Tools lists the registered tools by name.
func (r *Registry) Tools() []messages.ToolInfo {
	r.mu.RLock()
	seen := make(map[string]bool, len(r.tools))
	out := make([]messages.ToolInfo, 0, len(r.tools))
	for _, t := range r.tools {
		seen[t.Info.Name] = true
		out = append(out, t.Info)
	}
	folders := r.folders
	r.mu.RUnlock()
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
