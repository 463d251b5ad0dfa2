package frontdoor

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolbus/toolbus/pkg/catalog"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/parser"
	"github.com/toolbus/toolbus/pkg/version"
)

// Options configure [New]; nil means the defaults.
type Options struct {
	// Offers reports whether a tool is offered to a tenant's clients (the policy does not
	// deny it outright there); nil offers every tool. pkg/toolbus's ToolOffers makes it
	// from a configuration, as the parser's.
	Offers func(t catalog.Tool, tenant string) bool
	// CallTimeout bounds how long a tools/call waits for its output (a call held for
	// approval waits in it); default 10 minutes. The pipeline's own budgets still apply.
	CallTimeout time.Duration
	// Logger defaults to discarding.
	Logger *slog.Logger
}

// Door is toolbus's MCP front door on one NATS connection. Its methods are safe for
// concurrent use.
type Door struct {
	client *client.Client
	js     jetstream.JetStream
	o      Options

	catalog *parser.Catalog

	mu      sync.Mutex
	servers map[string]*tenantServer // tenant ("" the default) → its MCP server
	flights map[string]*flight       // scoped response id → the call under way here
	ready   chan struct{}            // closed once the catalog's first values are in
	once    sync.Once

	issued  sync.Map                   // session ids the go-sdk's HTTP handler issued here
	adopted map[string]*adoptedSession // session ids another replica issued, served here
	relays  map[string]*relay          // conversation → its questions relayed to its client
	watches map[string]*watch          // conversation → its resources' updates relayed
}

// tenantServer is the MCP server of one tenant's clients, and the tools it lists.
type tenantServer struct {
	srv   *mcp.Server
	tools map[string]catalog.Tool // name → the tool as listed
}

// New returns a front door on nc. It lists no tool until [Door.Run] follows the catalog.
func New(nc *nats.Conn, o *Options) (*Door, error) {
	c, err := client.New(nc)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("frontdoor: %w", err)
	}
	var opts Options
	if o != nil {
		opts = *o
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = 10 * time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Door{client: c, js: js, o: opts, catalog: parser.NewCatalog(),
		servers: map[string]*tenantServer{}, flights: map[string]*flight{}, ready: make(chan struct{}),
		adopted: map[string]*adoptedSession{}, relays: map[string]*relay{}, watches: map[string]*watch{}}, nil
}

// Run follows the catalog bucket until ctx is done, keeping every tenant's tool list in
// step with it (each change notifies the connected clients: tools/list_changed).
func (d *Door) Run(ctx context.Context) error {
	kv, err := d.js.KeyValue(ctx, messages.BucketCatalog)
	if err != nil {
		return fmt.Errorf("frontdoor: the catalog bucket %s: %w", messages.BucketCatalog, err)
	}
	w, err := kv.WatchAll(ctx)
	if err != nil {
		return fmt.Errorf("frontdoor: watch the catalog: %w", err)
	}
	defer w.Stop()
	initial := true
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-w.Updates():
			if !ok {
				return nil
			}
			switch {
			case e == nil:
				initial = false
			case e.Operation() != jetstream.KeyValuePut:
				d.catalog.Set(e.Key(), nil)
			default:
				if err := d.catalog.Put(e.Key(), e.Value()); err != nil {
					d.o.Logger.Warn("frontdoor: undecodable catalog entry", "key", e.Key(), "err", err)
				}
			}
			if !initial {
				d.sync()
				d.once.Do(func() { close(d.ready) })
			}
		}
	}
}

// Ready is closed once [Door.Run] has read the catalog's values at start.
func (d *Door) Ready() <-chan struct{} { return d.ready }

// Server returns the MCP server of tenant's clients ("" the default tenant's), made at
// the first call: its tools are the catalog's offered to tenant.
func (d *Door) Server(tenant string) *mcp.Server {
	d.mu.Lock()
	defer d.mu.Unlock()
	ts := d.servers[tenant]
	if ts == nil {
		srv := mcp.NewServer(&mcp.Implementation{Name: "toolbus", Version: version.Short()},
			&mcp.ServerOptions{Logger: d.o.Logger, GetSessionID: d.newSessionID, Capabilities: &mcp.ServerCapabilities{
				Tools: &mcp.ToolCapabilities{ListChanged: true}, Logging: &mcp.LoggingCapabilities{}, Prompts: &mcp.PromptCapabilities{},
				Resources: &mcp.ResourceCapabilities{Subscribe: true}, Completions: &mcp.CompletionCapabilities{}},
				SubscribeHandler: d.subscribe(tenant), UnsubscribeHandler: d.unsubscribe(tenant)})
		srv.AddReceivingMiddleware(d.features(tenant))
		ts = &tenantServer{srv: srv, tools: map[string]catalog.Tool{}}
		d.servers[tenant] = ts
		d.syncTenant(tenant, ts, d.catalog.Tools())
	}
	return ts.srv
}

// newSessionID is a new session's id, noted as issued here.
func (d *Door) newSessionID() string {
	id := rand.Text()
	d.issued.Store(id, true)
	return id
}

// sync brings every tenant's tool list in step with the catalog.
func (d *Door) sync() {
	tools := d.catalog.Tools()
	d.mu.Lock()
	defer d.mu.Unlock()
	for tenant, ts := range d.servers {
		d.syncTenant(tenant, ts, tools)
	}
}

// syncTenant adds the tools offered to tenant that ts does not list, or lists otherwise,
// and removes those no longer offered; the go-sdk tells its sessions of each change.
func (d *Door) syncTenant(tenant string, ts *tenantServer, tools []catalog.Tool) {
	offered := map[string]catalog.Tool{}
	for _, t := range tools {
		if d.o.Offers == nil || d.o.Offers(t, tenant) {
			offered[t.Name] = t
		}
	}
	var gone []string
	for name := range ts.tools {
		if _, ok := offered[name]; !ok {
			gone = append(gone, name)
			delete(ts.tools, name)
		}
	}
	if len(gone) > 0 {
		slices.Sort(gone)
		ts.srv.RemoveTools(gone...)
	}
	for name, t := range offered {
		if old, ok := ts.tools[name]; ok && sameTool(old, t) {
			continue
		}
		ts.tools[name] = t
		ts.srv.AddTool(mcpTool(t), d.handler(tenant))
	}
}

func sameTool(a, b catalog.Tool) bool {
	return a.Title == b.Title && a.Description == b.Description && bytes.Equal(a.InputSchema, b.InputSchema) &&
		bytes.Equal(a.OutputSchema, b.OutputSchema) && a.ReadOnly == b.ReadOnly && a.Idempotent == b.Idempotent && a.Destructive == b.Destructive
}

// mcpTool is a catalog tool as tools/list shows it: its name as models call it, its
// description and schemas, its annotations. A schema that is not an object's (a backend
// without one) is shown as any object.
func mcpTool(t catalog.Tool) *mcp.Tool {
	tool := &mcp.Tool{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: objectSchema(t.InputSchema)}
	if len(t.OutputSchema) > 0 && !bytes.Equal(objectSchema(t.OutputSchema), anyObject) {
		tool.OutputSchema = json.RawMessage(t.OutputSchema)
	}
	if t.ReadOnly || t.Idempotent || t.Destructive {
		destructive := t.Destructive
		tool.Annotations = &mcp.ToolAnnotations{ReadOnlyHint: t.ReadOnly, IdempotentHint: t.Idempotent, DestructiveHint: &destructive}
	}
	return tool
}

var anyObject = json.RawMessage(`{"type":"object"}`)

// objectSchema is schema when it is an object's ({"type": "object", …}), else any
// object's.
func objectSchema(schema json.RawMessage) json.RawMessage {
	var s struct {
		Type any `json:"type"`
	}
	if len(schema) == 0 || json.Unmarshal(schema, &s) != nil || s.Type != "object" {
		return anyObject
	}
	return schema
}
