// Package config loads toolbus's configuration: one JSON file holding "mcpServers"
// exactly as MCP clients write it, plus toolbus's own sections. Strings may use ${VAR}
// and ${VAR:-default}, expanded from the environment. Flags and TOOLBUS_* variables are
// applied on top by the commands.
package config

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/catalog"
	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/mcpwire"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/order"
	"github.com/toolbus/toolbus/pkg/policy"
	"github.com/toolbus/toolbus/pkg/redact"
	"github.com/toolbus/toolbus/pkg/toolcall"
)

// Config is the whole configuration. The zero value is valid: engineering and the clock
// on, no remote servers.
type Config struct {
	MCPServers map[string]mcpwire.ServerConfig `json:"mcpServers,omitempty"`
	// Routes map a tool name to a server; null routes to the local tools.
	Routes map[string]*string `json:"routes,omitempty"`
	// AllowedTools, when not empty, allows only these tools, of every backend: the Go
	// tools of the program, the tools folder, the built-ins (clock, file_writer, ...),
	// the engineering suite and the MCP servers. A pattern is a name ("clock"), or a
	// server's tool "server__tool", "mcp__server__tool" or "server::tool", with globs
	// ("get_*"); a tool of no server (a built-in, a tools-folder tool) is matched by its
	// name. BlockedTools refuses the tools it matches, whatever AllowedTools says. A
	// refused call is answered not_allowed, naming the list (catalog.Permit).
	AllowedTools []string          `json:"allowedTools,omitempty"`
	BlockedTools []string          `json:"blockedTools,omitempty"`
	Engineering  Engineering       `json:"engineering,omitzero"`
	Local        localtools.Config `json:"local,omitzero"`
	Parser       Parser            `json:"parser,omitzero"`
	Executor     Executor          `json:"executor,omitzero"`
	Health       Health            `json:"health,omitzero"`
	NATS         NATS              `json:"nats,omitzero"`
	// Tenants served besides the default one, by name (messages.ValidateTenant): each
	// tenant's orchestrator publishes and reads the conversations "<tenant>.<id>", its
	// outputs in a stream and its stored results in a bucket of their own
	// (docs/tenants.md). None: one tenant, conversations of one token.
	Tenants map[string]Tenant `json:"tenants,omitempty"`
	// Policy holds the rules on calls, checked by the executor before a call is claimed
	// (pkg/policy, docs/policy.md).
	Policy Policy `json:"policy,omitzero"`
	// Limits bound how many calls run per interval, per tenant, conversation, server or
	// tool, counted in the toolbus_limits bucket (pkg/policy, docs/policy.md).
	Limits []policy.Limit `json:"limits,omitempty"`

	// Source is the file the configuration came from, for error messages.
	Source string `json:"-"`
	// Ignored are the paths of keys toolbus does not know and left alone: settings of
	// other MCP clients that share the file. A near miss of a known key is an error
	// instead.
	Ignored []string `json:"-"`
	// expanded are the values ${VAR} references were replaced by: secrets, for [Config.Redactor].
	expanded []expansion
}

// Redactor hides the configuration's secrets (see package redact). Each server's own:
// the values its ${VAR}s expanded to, the userinfo and query values of its URL, its
// header values, the values of its env entries named like a secret
// (redact.SecretName), its OAuth client secret and key. Shared by all: the other values
// that came from ${VAR} and the NATS URL's password. Every process builds its logs,
// health statuses, error messages and span attributes through it; a server's messages
// are masked with its own secrets and the shared ones only (Redactor.For).
func (c *Config) Redactor() *redact.Redactor {
	if c == nil {
		return redact.New()
	}
	var shared []string
	scoped := map[string][]string{}
	for _, e := range c.expanded {
		if server, ok := c.serverOf(e.path); ok {
			scoped[server] = append(scoped[server], e.value)
		} else {
			shared = append(shared, e.value)
		}
	}
	for name, s := range c.MCPServers {
		secrets := redact.URLSecrets(s.URL)
		for _, v := range s.Headers {
			secrets = append(secrets, v)
			if _, token, ok := strings.Cut(v, " "); ok { // "Bearer <token>"
				secrets = append(secrets, token)
			}
		}
		for k, v := range s.Env {
			if redact.SecretName(k) {
				secrets = append(secrets, v)
			}
		}
		if s.OAuth != nil {
			secrets = append(secrets, s.OAuth.ClientSecret, s.OAuth.PrivateKey)
			for _, line := range strings.Split(s.OAuth.PrivateKey, "\n") { // a key printed line by line
				if line = strings.TrimSpace(line); !strings.HasPrefix(line, "-----") {
					secrets = append(secrets, line)
				}
			}
		}
		scoped[name] = append(scoped[name], secrets...)
	}
	for _, u := range strings.Split(c.NATS.URL, ",") {
		shared = append(shared, redact.URLSecrets(strings.TrimSpace(u))...)
	}
	return redact.NewScoped(shared, scoped)
}

// serverOf returns the server a configuration path ("mcpServers.<name>.…") belongs to.
func (c *Config) serverOf(path []string) (string, bool) {
	if len(path) < 2 || path[0] != "mcpServers" {
		return "", false
	}
	_, ok := c.MCPServers[path[1]]
	return path[1], ok
}

// expansion is one value a ${VAR} reference expanded to, and where in the file.
type expansion struct {
	path  []string
	value string
}

// Engineering configures the built-in engineering suite.
type Engineering struct {
	Enabled *bool `json:"enabled,omitempty"`
	// Expose is "hierarchical" (default) or "flat".
	Expose string `json:"expose,omitempty"`
}

// Parser configures the parser stage.
type Parser struct {
	// Format pins the tool-call syntax ("auto", the default, detects it); a response's
	// Toolbus-Format header overrides it.
	Format string `json:"format,omitempty"`
	// OutputFormat adds the native next turn of a hosted API to every output ("openai",
	// "openai_responses", "anthropic", "gemini", "bedrock", "ollama"; none by default):
	// what the orchestrator appends to its next request, answering each call by its id.
	// A tenant's outputFormat overrides it for its conversations, a response's
	// Toolbus-Output-Format header for that response.
	OutputFormat string `json:"output_format,omitempty"`
	// Reasoning says where the model's reasoning is, whose calls never run: "auto" (the
	// default: <think>…</think>, and the text before a </think> no <think> precedes),
	// "tagged" (only <think>…</think>) or "open" (the prompt opens <think>: the
	// response is reasoning up to its first </think>). A streamed call before any
	// think tag runs early only under "tagged" or "open". A response's
	// Toolbus-Reasoning header overrides it.
	Reasoning string `json:"reasoning,omitempty"`
	// MaxResponseBytes, MaxCalls and MaxDepth bound a response; 0 means toolcall's
	// defaults (1 MiB, 64 calls, depth 100).
	MaxResponseBytes int `json:"max_response_bytes,omitempty"`
	MaxCalls         int `json:"max_calls,omitempty"`
	MaxDepth         int `json:"max_depth,omitempty"`
	// StreamIdleTimeout: a streamed response none of whose chunks came for this long is
	// answered as it stands, with a timeout error saying it never finished (default
	// 60s). StreamMaxChunks bounds the chunks of a streamed response (default 10000):
	// a chunk numbered past it ends the response with a parse_error.
	StreamIdleTimeout messages.Duration `json:"stream_idle_timeout,omitzero"`
	StreamMaxChunks   int               `json:"stream_max_chunks,omitempty"`
}

// Executor configures the executor stage.
type Executor struct {
	Concurrency int `json:"concurrency,omitempty"`
	// Timeout is a call's time budget, from its first attempt to its answer, across
	// attempts and deliveries (default 60s); an mcpServers entry's timeout and
	// ToolTimeouts override it for their calls.
	Timeout messages.Duration `json:"timeout,omitzero"`
	// ToolTimeouts are the budgets of single tools, by the name a model calls them by.
	ToolTimeouts map[string]messages.Duration `json:"tool_timeouts,omitempty"`
	// QuietTools are logged at debug level instead of info: tools polled often.
	QuietTools []string `json:"quiet_tools,omitempty"`
	// Parallel says which calls of one response run together: "safe" (default: runs of
	// read-only calls run together, every other call alone, in the order written),
	// "ordered" (one at a time) or "all" (all at once). An mcpServers entry's parallel
	// overrides it for that server's tools.
	Parallel string `json:"parallel,omitempty"`
	// OnError says what happens to the calls after one that failed: "continue" (default)
	// runs them, "skip" answers them with code skipped.
	OnError string `json:"on_error,omitempty"`
	// MaxInlineResultBytes bounds a result that travels in the messages (default 64 KiB,
	// at most a quarter of the connection's payload limit): a larger one is kept whole in
	// the toolbus_results object store and travels as a preview naming it.
	MaxInlineResultBytes int `json:"max_inline_result_bytes,omitempty"`
	// Prefetch is how many calls a replica keeps buffered ahead of its free workers
	// while calls are fast (default 128; see bus.RunOptions): it saves a server round
	// trip per pull. When no worker frees up within 50ms the replica stops buffering,
	// keeps what it holds in progress, and pulls only for free workers until they are
	// all free again. -1 never buffers.
	Prefetch int `json:"prefetch,omitempty"`
}

// Health configures healthd.
type Health struct {
	Interval messages.Duration `json:"interval,omitzero"`
}

// NATS configures the connection and the shape of the streams. Every service provisions
// the streams at start, so all services of one deployment must share these values.
type NATS struct {
	// URL of the NATS servers; flags and TOOLBUS_NATS_URL win.
	URL string `json:"url,omitempty"`
	// StreamReplicas: 1 for a single server, 3 on a cluster.
	StreamReplicas  int               `json:"stream_replicas,omitempty"`
	AckWait         messages.Duration `json:"ack_wait,omitzero"`
	MaxDeliver      int               `json:"max_deliver,omitempty"`
	MaxAckPending   int               `json:"max_ack_pending,omitempty"`
	OutputMaxAge    messages.Duration `json:"output_max_age,omitzero"`
	DuplicateWindow messages.Duration `json:"duplicate_window,omitzero"`
}

// Policy is the "policy" section.
type Policy struct {
	// Rules decide whether a call may run: the first whose tools and condition match
	// it decides; none matching allows (policy.Compile).
	Rules []policy.Rule `json:"rules,omitempty"`
}

// Tenant is one tenant's settings.
type Tenant struct {
	// MaxBytes bounds each of the tenant's output stream and stored-results bucket
	// (bus.Tenant); 0: no limit but the server's.
	MaxBytes int64 `json:"maxBytes,omitempty"`
	// MaxConsumers bounds the consumers its orchestrator may have on its output stream
	// (bus.Tenant); default 1000.
	MaxConsumers int `json:"maxConsumers,omitempty"`
	// OutputFormat is parser.output_format for the tenant's conversations.
	OutputFormat string `json:"outputFormat,omitempty"`
}

// Topology is the stream shape the configuration asks for.
func (c *Config) Topology() bus.Topology {
	n := c.NATS
	t := bus.Topology{
		Replicas: n.StreamReplicas, AckWait: time.Duration(n.AckWait), MaxDeliver: n.MaxDeliver,
		MaxAckPending: n.MaxAckPending, OutputMaxAge: time.Duration(n.OutputMaxAge),
		DuplicateWindow: time.Duration(n.DuplicateWindow),
	}
	for _, name := range sortedKeys(c.Tenants) {
		t.Tenants = append(t.Tenants, bus.Tenant{Name: name, MaxBytes: c.Tenants[name].MaxBytes, MaxConsumers: c.Tenants[name].MaxConsumers})
	}
	return t
}

// Order is the ordering policy of a response's calls; the error names the key at fault.
func (c *Config) Order() (order.Policy, error) {
	var p order.Policy
	var err error
	if p.Parallel, err = order.ParseMode(c.Executor.Parallel); err != nil {
		return p, fmt.Errorf("executor.%w", err)
	}
	if p.OnError, err = order.ParseOnError(c.Executor.OnError); err != nil {
		return p, fmt.Errorf("executor.%w", err)
	}
	for _, name := range sortedKeys(c.MCPServers) {
		if s := c.MCPServers[name].Parallel; s != "" {
			m, err := order.ParseMode(s)
			if err != nil {
				return p, fmt.Errorf("mcpServers.%s.%w", name, err)
			}
			if p.Servers == nil {
				p.Servers = map[string]order.Mode{}
			}
			p.Servers[name] = m
		}
	}
	return p, nil
}

// On reports whether an optional switch is on; nil means on.
func On(b *bool) bool { return b == nil || *b }

// HealthInterval is the probe interval, default 15s.
func (c *Config) HealthInterval() time.Duration {
	if c.Health.Interval > 0 {
		return time.Duration(c.Health.Interval)
	}
	return 15 * time.Second
}

// ServerNames returns the enabled servers, sorted.
func (c *Config) ServerNames() []string {
	var names []string
	for n, s := range c.MCPServers {
		if s.IsEnabled() {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// Load reads the configuration at path; an empty path gives the defaults.
func Load(path string) (*Config, error) {
	if path == "" {
		return &Config{}, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(data, path, os.LookupEnv)
}

// Parse decodes a configuration, expanding ${VAR} with lookup, and validates it. Errors
// name the source, the key and the reason.
func Parse(data []byte, source string, lookup func(string) (string, bool)) (*Config, error) {
	var raw any
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, syntaxError(source, data, err)
	}
	if _, ok := raw.(map[string]any); !ok {
		return nil, fmt.Errorf("%s: the configuration must be a JSON object", source)
	}
	mistakes, ignored := unknownKeys("", raw, reflect.TypeFor[Config](), false)
	if len(mistakes) > 0 {
		return nil, fmt.Errorf("%s: %s", source, strings.Join(mistakes, "; "))
	}
	var expanded []expansion
	raw = expand(raw, nil, func(path []string, name string) (string, bool) {
		v, ok := lookup(name)
		if ok {
			expanded = append(expanded, expansion{path: slices.Clone(path), value: v})
		}
		return v, ok
	})
	data, _ = json.Marshal(raw)
	c := Config{expanded: expanded, Ignored: ignored}
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	c.Source = source
	for _, name := range sortedKeys(c.MCPServers) {
		if err := c.MCPServers[name].Validate(); err != nil {
			return nil, fmt.Errorf("%s: mcpServers.%s.%w", source, name, err)
		}
	}
	for _, name := range sortedKeys(c.Tenants) {
		if err := messages.ValidateTenant(name); err != nil {
			return nil, fmt.Errorf("%s: tenants: %w", source, err)
		}
		if c.Tenants[name].MaxBytes < 0 || c.Tenants[name].MaxConsumers < 0 {
			return nil, fmt.Errorf("%s: tenants.%s: maxBytes and maxConsumers may not be negative", source, name)
		}
	}
	if err := (catalog.Lists{Allowed: c.AllowedTools, Blocked: c.BlockedTools}).Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	for tool, server := range c.Routes {
		if server == nil {
			continue
		}
		if _, ok := c.MCPServers[*server]; !ok {
			return nil, fmt.Errorf("%s: routes.%s: no server called %q in mcpServers", source, tool, *server)
		}
	}
	if _, err := policy.Compile(c.Policy.Rules); err != nil {
		return nil, fmt.Errorf("%s: policy.%w", source, err)
	}
	if err := policy.ValidateLimits(c.Limits); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	if _, err := c.Order(); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	if _, err := toolcall.ParseFormat(c.Parser.Format); err != nil {
		return nil, fmt.Errorf("%s: parser.format: %w", source, err)
	}
	if _, err := toolcall.ParseOutputFormat(c.Parser.OutputFormat); err != nil {
		return nil, fmt.Errorf("%s: parser.output_format: %w", source, err)
	}
	for _, name := range sortedKeys(c.Tenants) {
		if _, err := toolcall.ParseOutputFormat(c.Tenants[name].OutputFormat); err != nil {
			return nil, fmt.Errorf("%s: tenants.%s.outputFormat: %w", source, name, err)
		}
	}
	if _, err := toolcall.ParseReasoning(c.Parser.Reasoning); err != nil {
		return nil, fmt.Errorf("%s: parser.reasoning: %w", source, err)
	}
	if c.Parser.StreamIdleTimeout < 0 || c.Parser.StreamMaxChunks < 0 {
		return nil, fmt.Errorf("%s: parser.stream_idle_timeout and parser.stream_max_chunks cannot be negative", source)
	}
	if err := c.Local.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	switch c.Engineering.Expose {
	case "", "hierarchical", "flat":
	default:
		return nil, fmt.Errorf("%s: engineering.expose: %q is not \"hierarchical\" or \"flat\"", source, c.Engineering.Expose)
	}
	return &c, nil
}

var varRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}`)

// expand replaces ${VAR} and ${VAR:-default} in every string of v; path is where v is.
func expand(v any, path []string, lookup func(path []string, name string) (string, bool)) any {
	switch v := v.(type) {
	case string:
		return varRef.ReplaceAllStringFunc(v, func(ref string) string {
			m := varRef.FindStringSubmatch(ref)
			if val, ok := lookup(path, m[1]); ok && (val != "" || m[2] == "") {
				return val
			}
			return m[2]
		})
	case []any:
		for i := range v {
			v[i] = expand(v[i], append(path, strconv.Itoa(i)), lookup)
		}
	case map[string]any:
		for k := range v {
			v[k] = expand(v[k], append(path, k), lookup)
		}
	}
	return v
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
