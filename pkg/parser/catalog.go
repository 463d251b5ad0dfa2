package parser

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/catalog"
	"github.com/toolbus/toolbus/pkg/toolcall"
)

// Catalog is the parser's view of the tools every backend offers, which the executors
// write into the catalog bucket (one key per server, plus "local" and "engineering"):
// their names, so that formats without a call marker (bare or fenced JSON) are
// recognised, their input schemas, to coerce and validate arguments, and what a model
// means by a name ([catalog.Catalog.Resolve]), to tell which calls may run together. It
// follows the catalog bucket.
type Catalog struct {
	mu      sync.Mutex
	servers map[string][]catalog.Tool
	snap    atomic.Pointer[snapshot]
}

type snapshot struct {
	tools   *catalog.Catalog
	known   []string
	schemas map[string]json.RawMessage
	checks  map[string]*jsonschema.Resolved
	// shared are the names several backends offer (the local and the engineering clock):
	// the executor's route decides which runs, and the parser cannot tell which, so such
	// a tool has no server and is read-only only if every backend's is.
	shared map[string]catalog.Tool
	// views are this catalog as each tenant's models are offered it ([snapshot.offered]),
	// made once per tenant.
	views sync.Map
}

// offered is the snapshot without the tools offers says are not offered to tenant:
// neither known nor checked. Made once per snapshot and tenant.
func (s *snapshot) offered(tenant string, offers func(catalog.Tool, string) bool) *snapshot {
	if v, ok := s.views.Load(tenant); ok {
		return v.(*snapshot)
	}
	if s.tools == nil {
		return s
	}
	hidden := map[string]bool{}
	for _, t := range s.tools.Tools() {
		if !offers(t, tenant) {
			hidden[t.Name] = true
		}
	}
	view := s
	if len(hidden) > 0 {
		view = &snapshot{tools: s.tools, shared: s.shared, schemas: map[string]json.RawMessage{}, checks: map[string]*jsonschema.Resolved{}}
		for _, name := range s.known {
			if !hidden[name] {
				view.known = append(view.known, name)
			}
		}
		for name, schema := range s.schemas {
			if t, err := s.tools.Resolve(name); err == nil && hidden[t.Name] {
				continue
			}
			view.schemas[name] = schema
		}
		for name, check := range s.checks {
			if !hidden[name] {
				view.checks[name] = check
			}
		}
	}
	v, _ := s.views.LoadOrStore(tenant, view)
	return v.(*snapshot)
}

// tool finds the tool a model calls name, as the executors resolve it.
func (s *snapshot) tool(name string) (catalog.Tool, bool) {
	if s.tools == nil {
		return catalog.Tool{}, false
	}
	t, err := s.tools.Resolve(name)
	var amb *catalog.AmbiguousError
	switch {
	case err == nil:
		return t, true
	case errors.As(err, &amb):
		t, ok := s.shared[amb.Name]
		return t, ok
	}
	return catalog.Tool{}, false
}

// NewCatalog returns an empty catalog.
func NewCatalog() *Catalog {
	c := &Catalog{servers: map[string][]catalog.Tool{}}
	c.snap.Store(&snapshot{})
	return c
}

// Set replaces the tools listed under a key of the bucket; nil removes the key.
func (c *Catalog) Set(key string, tools []catalog.Tool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if tools == nil {
		delete(c.servers, key)
	} else {
		c.servers[key] = tools
	}
	// By their own servers: a key is the server's name spelled for NATS.
	byServer := map[string][]catalog.Tool{}
	for _, tools := range c.servers {
		for _, t := range tools {
			byServer[t.Server] = append(byServer[t.Server], t)
		}
	}
	s := &snapshot{tools: catalog.New(byServer, &catalog.Options{VendorAliases: true}),
		schemas: map[string]json.RawMessage{}, checks: map[string]*jsonschema.Resolved{}, shared: map[string]catalog.Tool{}}
	all := s.tools.Tools()
	owners := map[string]int{}
	for _, t := range all {
		owners[t.Name]++
	}
	for _, t := range all {
		switch owners[t.Name] {
		case 1:
			s.known = append(s.known, t.Name)
			// A name several backends offer (a local tool and a routed remote one) is
			// checked by the backend the executor routes it to, not here.
			if len(t.InputSchema) != 0 {
				s.schemas[t.Name] = t.InputSchema
				if r, err := toolcall.ResolveSchema(t.InputSchema); err == nil {
					s.checks[t.Name] = r
				}
			}
		default:
			prev, seen := s.shared[t.Name]
			if !seen {
				s.known = append(s.known, t.Name)
				prev.ReadOnly = true
			}
			s.shared[t.Name] = catalog.Tool{Name: t.Name, ReadOnly: prev.ReadOnly && t.ReadOnly}
		}
	}
	// A server's tool called by a qualified spelling has its values typed by its schema
	// too; its arguments are checked by the server, as before.
	for _, t := range all {
		if t.Server == "" || len(t.InputSchema) == 0 {
			continue
		}
		for _, q := range catalog.Qualified(t.Server, t.Remote) {
			if _, taken := s.schemas[q]; !taken && owners[q] == 0 {
				s.schemas[q] = t.InputSchema
			}
		}
	}
	c.snap.Store(s)
}

func (c *Catalog) current() *snapshot { return c.snap.Load() }

// Tools returns the tools as models are offered them, each name once: a name several
// backends offer (the local and the engineering clock) is listed as the first of them,
// since the executor's route decides which runs.
func (c *Catalog) Tools() []catalog.Tool {
	s := c.current()
	if s.tools == nil {
		return nil
	}
	var out []catalog.Tool
	seen := map[string]bool{}
	for _, t := range s.tools.Tools() {
		if !seen[t.Name] {
			seen[t.Name] = true
			out = append(out, t)
		}
	}
	return out
}

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

// Put sets the tools listed under a key of the bucket from its entry: the JSON of a list
// of [catalog.Tool], as the executors write it.
func (c *Catalog) Put(key string, entry []byte) error {
	var tools []catalog.Tool
	if err := json.Unmarshal(entry, &tools); err != nil {
		return err
	}
	if tools == nil {
		tools = []catalog.Tool{}
	}
	c.Set(key, tools)
	return nil
}
