package parser

import (
	"cmp"
	"context"
	"encoding/json"
	"github.com/toolbus/toolbus/pkg/messages"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/mcpwire"
	"github.com/toolbus/toolbus/pkg/toolcall"
)

// catalogTool is the part of a catalog entry the parser needs; the executors write the
// entries (one key per server, plus "local" and "engineering").
type catalogTool struct {
	Name        string          `json:"name"`
	Server      string          `json:"server,omitempty"`
	Remote      string          `json:"remote,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
	ReadOnly    bool            `json:"readOnly,omitempty"`
	// ReadOnlyWhen: some calls of the tool are read-only (messages.ToolInfo).
	ReadOnlyWhen *messages.ArgIn `json:"readOnlyWhen,omitempty"`
}

// Catalog is the parser's view of the tools every backend offers: their names, so that
// formats without a call marker (bare or fenced JSON) are recognised, and their input
// schemas, to coerce and validate arguments. It follows the catalog bucket.
type Catalog struct {
	mu      sync.Mutex
	servers map[string][]catalogTool
	snap    atomic.Pointer[snapshot]
}

type snapshot struct {
	known   []string
	schemas map[string]json.RawMessage
	checks  map[string]*jsonschema.Resolved
	// tools are the tools by the name a model calls them, and by server and remote name
	// for the qualified spellings; a name several backends offer is there without a
	// server (its route decides, and the parser cannot tell which), read-only only if
	// every backend's tool is.
	tools    map[string]catalogTool
	byServer map[string]map[string]catalogTool
	servers  []string
}

// tool finds the tool a model calls name: by its name, or by a qualified spelling
// ("server__tool", "mcp__server__tool", "server::tool").
func (s *snapshot) tool(name string) (catalogTool, bool) {
	if t, ok := s.tools[name]; ok {
		return t, true
	}
	if server, remote, ok := mcpwire.SplitAlias(name, s.servers); ok {
		t, ok := s.byServer[server][remote]
		return t, ok
	}
	return catalogTool{}, false
}

// NewCatalog returns an empty catalog.
func NewCatalog() *Catalog {
	c := &Catalog{servers: map[string][]catalogTool{}}
	c.snap.Store(&snapshot{})
	return c
}

// Set replaces the tools of one server; nil removes the server.
func (c *Catalog) Set(server string, tools []catalogTool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if tools == nil {
		delete(c.servers, server)
	} else {
		c.servers[server] = tools
	}
	s := &snapshot{schemas: map[string]json.RawMessage{}, checks: map[string]*jsonschema.Resolved{},
		tools: map[string]catalogTool{}, byServer: map[string]map[string]catalogTool{}}
	owners := map[string]int{}
	for _, tools := range c.servers {
		for _, t := range tools {
			if owners[t.Name]++; owners[t.Name] == 1 {
				s.known = append(s.known, t.Name)
				s.tools[t.Name] = t
			} else {
				// A name several backends offer (the local and the engineering clock):
				// its route decides which runs, so it is read-only only if every
				// backend's tool is, and no server's own mode applies.
				prev := s.tools[t.Name]
				s.tools[t.Name] = catalogTool{Name: t.Name, ReadOnly: prev.ReadOnly && t.ReadOnly}
			}
			if t.Server != "" {
				if s.byServer[t.Server] == nil {
					s.byServer[t.Server] = map[string]catalogTool{}
					s.servers = append(s.servers, t.Server)
				}
				s.byServer[t.Server][cmp.Or(t.Remote, t.Name)] = t
			}
			if len(t.InputSchema) != 0 {
				s.schemas[t.Name] = t.InputSchema
			}
		}
	}
	// The names vendors' APIs were given for tools whose own names they reject
	// (mcpwire.VendorNames) are the same tools.
	for original, alias := range mcpwire.VendorNames(s.known) {
		if t, ok := s.tools[original]; ok && alias != original {
			s.tools[alias] = t
		}
	}
	for name, schema := range s.schemas {
		// A name several backends offer (a local tool and a routed remote one) is checked
		// by the backend the executor routes it to, not here.
		if owners[name] > 1 {
			delete(s.schemas, name)
			continue
		}
		if r, err := toolcall.ResolveSchema(schema); err == nil {
			s.checks[name] = r
		}
	}
	// A server's tool called by a qualified spelling (server__tool, mcp__server__tool,
	// server::tool) has its values typed by its schema too; its arguments are checked by
	// the server, as before.
	for server, tools := range s.byServer {
		for remote, t := range tools {
			if len(t.InputSchema) == 0 {
				continue
			}
			sep := mcpwire.Separator
			for _, q := range [...]string{server + sep + remote, "mcp" + sep + server + sep + remote, server + "::" + remote} {
				if _, taken := s.schemas[q]; !taken && owners[q] == 0 {
					s.schemas[q] = t.InputSchema
				}
			}
		}
	}
	sort.Strings(s.known)
	c.snap.Store(s)
}

func (c *Catalog) current() *snapshot { return c.snap.Load() }

// Has reports whether the catalog holds the tools of the server listed under key.
func (c *Catalog) Has(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.servers[key]
	return ok
}

// Follow keeps the catalog in step with the bucket until ctx is done.
func (c *Catalog) Follow(ctx context.Context, kv jetstream.KeyValue, log *slog.Logger) error {
	w, err := kv.WatchAll(ctx)
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-w.Updates():
			if !ok {
				return nil
			}
			if e == nil { // the initial values are all in
				continue
			}
			if e.Operation() != jetstream.KeyValuePut {
				c.Set(e.Key(), nil)
				continue
			}
			if err := c.Put(e.Key(), e.Value()); err != nil {
				log.Warn("catalog: undecodable entry", "key", e.Key(), "err", err)
			}
		}
	}
}

// Put sets the tools of one server from a catalog bucket entry: the JSON of a list of
// mcpwire.Tool, as the executors write it.
func (c *Catalog) Put(server string, entry []byte) error {
	var tools []catalogTool
	if err := json.Unmarshal(entry, &tools); err != nil {
		return err
	}
	if tools == nil {
		tools = []catalogTool{}
	}
	c.Set(server, tools)
	return nil
}
