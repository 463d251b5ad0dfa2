// Package config loads toolbus's configuration: one JSON file holding "mcpServers"
// exactly as MCP clients write it (VS Code's "servers" and "inputs", lollms's
// server_url and auth_config too: see [Parse]), plus toolbus's own sections. Strings may
// use ${VAR} and ${VAR:-default} (or ${env:VAR}), expanded from the environment, and
// VS Code's ${input:ID} ([InputVar]). Flags and TOOLBUS_* variables are applied on top
// by the commands.
package config

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"os"
	"path/filepath"
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
	// MCPServers are the MCP servers by name; VS Code's "servers" (mcp.json) is read
	// into it too ([Config.JSONAliases]).
	MCPServers map[string]mcpwire.ServerConfig `json:"mcpServers,omitempty"`
	// Inputs are VS Code's input variables (mcp.json): the values ${input:ID} stands
	// for, which VS Code prompts for. toolbus prompts nobody: each is taken from the
	// environment variable [InputVar] names, and loading fails, naming the input, its
	// description and the variable, when that is not set.
	Inputs []Input `json:"inputs,omitempty"`
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
	// FrontDoor configures toolbus as an MCP server over HTTP (`toolbus serve
	// --mcp-addr`, `toolbus mcp --http`): the default tenant's tokens, origins, bounds.
	FrontDoor FrontDoor `json:"frontDoor,omitzero"`
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
	// Warnings are what the file asks that toolbus does otherwise than the client it
	// was written for (a key of another client that changes what that client does, a
	// timeout in milliseconds), and the ${VAR}s that were not set: each is logged at
	// start ([Config.LogWarnings]).
	Warnings []Warning `json:"-"`
	// expanded are the values ${VAR} references were replaced by: secrets, for [Config.Redactor].
	expanded []expansion
	// section says which key each server was listed under, when not "mcpServers"
	// (VS Code's "servers"), for error messages.
	section map[string]string
}

// Input is one of VS Code's input variables: "promptString" (a password when Password
// is set) or "pickString" (one of Options).
type Input struct {
	Type        string `json:"type,omitempty"`
	ID          string `json:"id"`
	Description string `json:"description,omitempty"`
	Password    bool   `json:"password,omitempty"`
	// Default is taken when the variable is not set, unless Password is set.
	Default string          `json:"default,omitempty"`
	Options json.RawMessage `json:"options,omitempty"`
}

// InputVar is the environment variable that gives the value of VS Code's ${input:ID}:
// TOOLBUS_INPUT_ and the ID upper-cased, each character other than a letter or a digit
// as '_' (${input:github-token} is TOOLBUS_INPUT_GITHUB_TOKEN).
func InputVar(id string) string {
	b := []byte(strings.ToUpper(id))
	for i, c := range b {
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			b[i] = '_'
		}
	}
	return "TOOLBUS_INPUT_" + string(b)
}

// JSONAliases names the other top-level keys the configuration is read from: VS Code's
// "servers" for mcpServers.
func (*Config) JSONAliases() map[string]string { return map[string]string{"servers": "mcpServers"} }

// Warning is one of [Config.Warnings].
type Warning struct {
	// Key is the path of the key ("mcpServers.files.autoApprove"); Server the server it
	// belongs to, if any.
	Key, Server string
	Message     string
}

func (w Warning) String() string { return w.Key + ": " + w.Message }

// LogWarnings logs each of the configuration's warnings at WARN, naming the server, the
// key and the file.
func (c *Config) LogWarnings(log *slog.Logger) {
	for _, w := range c.Warnings {
		args := []any{"key", w.Key, "file", c.Source}
		if w.Server != "" {
			args = append([]any{"server", w.Server}, args...)
		}
		log.Warn("config: "+w.Message, args...)
	}
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
		secrets := []string{e.value}
		if u, ok := c.urlAt(e.path); ok {
			secrets = urlPartSecrets(e.value, u)
		}
		if server, ok := c.serverOf(e.path); ok {
			scoped[server] = append(scoped[server], secrets...)
		} else {
			shared = append(shared, secrets...)
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

// urlAt returns the URL a key holds, when the key at path holds one: a server's url
// (or another client's spelling of it) or nats.url.
func (c *Config) urlAt(path []string) (string, bool) {
	switch {
	case len(path) == 2 && path[0] == "nats" && path[1] == "url":
		return c.NATS.URL, true
	case len(path) == 3 && path[0] == "mcpServers":
		switch path[2] {
		case "url", "server_url", "serverUrl", "httpUrl":
			s, ok := c.MCPServers[path[1]]
			return s.URL, ok
		}
	}
	return "", false
}

// urlPartSecrets are the secrets of value, which a ${VAR} in the URL urls
// (comma-separated) expanded to. A whole URL is shown but for its own secrets
// (redact.URLSecrets: its password, token-like query values and path segments), so
// that an error names the server it could not reach; a part of one is a secret unless
// it is the scheme, host or port.
func urlPartSecrets(value, urls string) []string {
	whole := []string{}
	for _, part := range strings.Split(value, ",") {
		part = strings.TrimSpace(part)
		if u, err := url.Parse(part); err != nil || u.Scheme == "" || u.Host == "" {
			whole = nil
			break
		}
		whole = append(whole, redact.URLSecrets(part)...)
	}
	if whole != nil {
		return whole
	}
	for _, part := range strings.Split(urls, ",") {
		if u, err := url.Parse(strings.TrimSpace(part)); err == nil && value != "" && (strings.Contains(u.Host, value) || u.Scheme == value) {
			return nil
		}
	}
	return []string{value}
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
	// MCPTokens are the SHA-256 (hex) of the bearer tokens of the tenant's MCP clients
	// at the front door (frontdoor.HashToken; `toolbus mcp --new-token` makes one).
	MCPTokens []string `json:"mcpTokens,omitempty"`
}

// FrontDoor configures the MCP front door's HTTP (pkg/frontdoor).
type FrontDoor struct {
	// Tokens are the SHA-256 (hex) of the bearer tokens of the default tenant's MCP
	// clients. With no token here nor in any tenant, no token is asked for (loopback).
	Tokens []string `json:"tokens,omitempty"`
	// Origins are further origins whose pages may call ("https://app.example").
	Origins []string `json:"origins,omitempty"`
	// MaxBodyBytes bounds a request's body; 0: 4 MiB.
	MaxBodyBytes int64 `json:"maxBodyBytes,omitempty"`
}

// MCPTokens maps the SHA-256 of each front-door token of the configuration to its
// tenant ("" the default one); empty when none is configured.
func (c *Config) MCPTokens() map[string]string {
	m := map[string]string{}
	for _, h := range c.FrontDoor.Tokens {
		m[strings.ToLower(h)] = ""
	}
	for _, name := range sortedKeys(c.Tenants) {
		for _, h := range c.Tenants[name].MCPTokens {
			m[strings.ToLower(h)] = name
		}
	}
	return m
}

// validTokenHash says why h is not the SHA-256 of a token in hex.
func validTokenHash(h string) error {
	if len(h) != 64 {
		return fmt.Errorf("a token's SHA-256 in hex is 64 characters, not %d (`toolbus mcp --new-token` makes a token and its hash)", len(h))
	}
	for _, r := range h {
		if !strings.ContainsRune("0123456789abcdefABCDEF", r) {
			return fmt.Errorf("a token's SHA-256 in hex holds only hex digits (`toolbus mcp --new-token` makes a token and its hash)")
		}
	}
	return nil
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
//
// A file of VS Code's (mcp.json) reads the same: its "servers" are servers as
// "mcpServers" are, ${env:VAR} is ${VAR}, ${input:ID} is the environment variable
// [InputVar] names (an error when it is not set: nobody is prompted), and
// ${workspaceFolder} and ${userHome} are what VS Code makes them (the folder holding
// .vscode/, or else the file's folder; the home directory). A server's envFile is read
// here, relative to the file's folder.
func Parse(data []byte, source string, lookup func(string) (string, bool)) (*Config, error) {
	var raw any
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, syntaxError(source, data, err)
	}
	top, ok := raw.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: the configuration must be a JSON object", source)
	}
	mistakes, ignored := unknownKeys("", raw, reflect.TypeFor[Config](), false)
	if len(mistakes) > 0 {
		return nil, fmt.Errorf("%s: %s", source, strings.Join(mistakes, "; "))
	}
	// VS Code's servers join mcpServers; a name in both is an error.
	section := map[string]string{}
	if vs, ok := top["servers"].(map[string]any); ok {
		servers, _ := top["mcpServers"].(map[string]any)
		if servers == nil {
			servers = map[string]any{}
		}
		for _, name := range sortedKeys(vs) {
			if _, dup := servers[name]; dup {
				return nil, fmt.Errorf("%s: servers.%s: also in mcpServers: give each server once", source, name)
			}
			servers[name], section[name] = vs[name], "servers"
		}
		top["mcpServers"] = servers
		delete(top, "servers")
	}
	var inputs []Input
	if in, ok := top["inputs"]; ok {
		b, _ := json.Marshal(in)
		if err := json.Unmarshal(b, &inputs); err != nil {
			return nil, fmt.Errorf("%s: inputs: %w", source, err)
		}
	}
	x := &expander{lookup: lookup, source: source, inputs: inputs, section: section}
	warnings := otherClients(top, section)
	raw = x.value(raw, nil)
	if len(x.missing) > 0 {
		return nil, fmt.Errorf("%s: %s", source, strings.Join(x.missing, "; "))
	}
	data, _ = json.Marshal(raw)
	c := Config{expanded: x.expanded, Ignored: ignored, Warnings: append(warnings, x.unset...), section: section}
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	c.Source = source
	for _, name := range sortedKeys(c.MCPServers) {
		s := c.MCPServers[name]
		if err := s.Validate(); err != nil {
			return nil, fmt.Errorf("%s: %s.%s.%w", source, c.sectionOf(name), name, err)
		}
		if s.EnvFile != "" {
			if err := readEnvFile(&s, filepath.Dir(source)); err != nil {
				return nil, fmt.Errorf("%s: %s.%s.envFile: %w", source, c.sectionOf(name), name, err)
			}
			c.MCPServers[name] = s
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
	seen := map[string]string{}
	checkHashes := func(key string, hashes []string) error {
		for i, h := range hashes {
			if err := validTokenHash(h); err != nil {
				return fmt.Errorf("%s: %s[%d]: %w", source, key, i, err)
			}
			if other, dup := seen[strings.ToLower(h)]; dup {
				return fmt.Errorf("%s: %s[%d]: the same token as %s's: a token names one tenant", source, key, i, other)
			}
			seen[strings.ToLower(h)] = key
		}
		return nil
	}
	if err := checkHashes("frontDoor.tokens", c.FrontDoor.Tokens); err != nil {
		return nil, err
	}
	for _, name := range sortedKeys(c.Tenants) {
		if err := checkHashes("tenants."+name+".mcpTokens", c.Tenants[name].MCPTokens); err != nil {
			return nil, err
		}
	}
	if c.FrontDoor.MaxBodyBytes < 0 {
		return nil, fmt.Errorf("%s: frontDoor.maxBodyBytes may not be negative", source)
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

// sectionOf is the key a server was listed under: "mcpServers", or VS Code's "servers".
func (c *Config) sectionOf(server string) string {
	if s := c.section[server]; s != "" {
		return s
	}
	return "mcpServers"
}

// ref matches what is expanded in a string: ${VAR} and ${VAR:-default}, also written
// ${env:VAR} as VS Code writes it (1: the name, 2: the default); ${input:ID} (3: the
// ID); and VS Code's ${config:…}, ${command:…} and ${workspaceFolder:…} (4), which
// toolbus cannot expand.
var ref = regexp.MustCompile(`\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}|\$\{input:([^}]*)\}|\$\{((?:config|command|workspaceFolder):[^}]*)\}`)

// expander expands the references of a decoded file ([ref]), keeping what they
// expanded to (secrets, for the redactor), the inputs that have no value and the
// variables that were not set.
type expander struct {
	lookup   func(string) (string, bool)
	source   string
	inputs   []Input
	section  map[string]string
	expanded []expansion
	missing  []string
	unset    []Warning
}

// value expands every string of v; path is where v is.
func (x *expander) value(v any, path []string) any {
	switch v := v.(type) {
	case string:
		return ref.ReplaceAllStringFunc(v, func(s string) string { return x.ref(s, path) })
	case []any:
		for i := range v {
			v[i] = x.value(v[i], append(path, strconv.Itoa(i)))
		}
	case map[string]any:
		for _, k := range sortedKeys(v) {
			v[k] = x.value(v[k], append(path, k))
		}
	}
	return v
}

// key is path as the file spells it: a server of VS Code's under "servers".
func (x *expander) key(path []string) string {
	p := slices.Clone(path)
	if len(p) > 1 && p[0] == "mcpServers" && x.section[p[1]] != "" {
		p[0] = x.section[p[1]]
	}
	return strings.Join(p, ".")
}

func (x *expander) ref(s string, path []string) string {
	m := ref.FindStringSubmatch(s)
	switch {
	case m[4] != "":
		x.missing = append(x.missing, fmt.Sprintf("%s: VS Code's ${%s} has no value outside VS Code: write the value", x.key(path), m[4]))
		return ""
	case strings.HasPrefix(s, "${input:"):
		return x.input(m[3], path)
	}
	name, dflt, hasDefault := m[1], m[2], strings.Contains(s, ":-")
	switch name {
	case "workspaceFolder":
		dir, _ := filepath.Abs(filepath.Dir(x.source))
		if filepath.Base(dir) == ".vscode" {
			dir = filepath.Dir(dir)
		}
		return dir
	case "userHome":
		if home, err := os.UserHomeDir(); err == nil {
			return home
		}
	}
	val, ok := x.lookup(name)
	if ok {
		x.expanded = append(x.expanded, expansion{path: slices.Clone(path), value: val})
	}
	if ok && (val != "" || !hasDefault) {
		return val
	}
	if !hasDefault {
		w := Warning{Key: x.key(path), Message: fmt.Sprintf("${%s} is not set: the value is empty", name)}
		if len(path) > 1 && path[0] == "mcpServers" {
			w.Server = path[1]
		}
		x.unset = append(x.unset, w)
	}
	return dflt
}

// input is the value of ${input:id}: the environment variable InputVar(id), else the
// input's default unless it is a password; else an error for Parse to return.
func (x *expander) input(id string, path []string) string {
	env := InputVar(id)
	var in *Input
	for i := range x.inputs {
		if x.inputs[i].ID == id {
			in = &x.inputs[i]
		}
	}
	if val, ok := x.lookup(env); ok && val != "" {
		x.expanded = append(x.expanded, expansion{path: slices.Clone(path), value: val})
		return val
	}
	if in != nil && in.Default != "" && !in.Password {
		return in.Default
	}
	what := "no input of that id in inputs"
	if in != nil {
		what = fmt.Sprintf("%q, which VS Code prompts for", in.Description)
		if in.Description == "" {
			what = "an input VS Code prompts for"
		}
		if in.Password {
			what += " (a password)"
		}
	}
	x.missing = append(x.missing, fmt.Sprintf("%s: ${input:%s} (%s) has no value: set %s", x.key(path), id, what, env))
	return ""
}

// otherClients are the warnings of keys of servers that other clients act on and
// toolbus does not, read before expansion: what the user wrote.
func otherClients(top map[string]any, section map[string]string) []Warning {
	servers, _ := top["mcpServers"].(map[string]any)
	var out []Warning
	for _, name := range sortedKeys(servers) {
		entry, _ := servers[name].(map[string]any)
		sec := section[name]
		if sec == "" {
			sec = "mcpServers"
		}
		warn := func(key, msg string) {
			out = append(out, Warning{Key: sec + "." + name + "." + key, Server: name, Message: msg})
		}
		for _, key := range sortedKeys(entry) {
			v := entry[key]
			switch key {
			case "autoApprove", "alwaysAllow":
				if l, ok := v.([]any); ok && len(l) > 0 {
					warn(key, "Cline and Roo Code run only these tools without asking; toolbus asks nobody before a call, so every tool of the server runs unasked (blockedTools refuses tools; a policy rule with effect approve asks a person)")
				}
			case "trust":
				if v == true {
					warn(key, "Gemini CLI skips its confirmations for this server; toolbus asks nobody before any call (a policy rule with effect approve asks a person)")
				}
			case "sandbox", "sandboxEnabled":
				if v != false && v != nil {
					warn(key, "VS Code runs this server in a sandbox (file system and network restricted); toolbus does not: limits bound its resources only")
				}
			case "headersHelper":
				warn(key, "Claude Code runs this command for the request headers; toolbus does not run it, so they are not sent: give them in headers (${VAR} for a secret)")
			case "timeout":
				if _, lollms := entry["server_url"]; lollms {
					warn(key, "lollms waits this long for the connection's handshake; toolbus gives it to the connection and to each call (a duration, or seconds)")
				}
				if n, ok := v.(float64); ok && n >= 1000 {
					warn(key, fmt.Sprintf("%v is read as seconds (%v), as Claude Desktop and Cline write it; Gemini CLI writes milliseconds: write \"%vms\" if that was meant", n, time.Duration(n*float64(time.Second)), n))
				}
			}
		}
	}
	return out
}

// readEnvFile adds the KEY=VALUE lines of s.EnvFile (relative to dir) to s.Env, the
// entries s.Env has winning: lines may start with "export ", values may be quoted, and
// blank lines and lines starting with '#' are skipped.
func readEnvFile(s *mcpwire.ServerConfig, dir string) error {
	path := s.EnvFile
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	env := maps.Clone(s.Env)
	if env == nil {
		env = map[string]string{}
	}
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" {
			return fmt.Errorf("%s:%d: not KEY=VALUE", path, i+1)
		}
		switch {
		case len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"':
			if u, err := strconv.Unquote(v); err == nil {
				v = u
			} else {
				v = v[1 : len(v)-1]
			}
		case len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'':
			v = v[1 : len(v)-1]
		default:
			if i := strings.Index(v, " #"); i >= 0 {
				v = strings.TrimSpace(v[:i])
			}
		}
		if _, set := env[k]; !set {
			env[k] = v
		}
	}
	s.Env = env
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
