package mcpwire

import (
	"encoding/json"
	"fmt"
	"github.com/toolbus/toolbus/pkg/mcpwire/oauth"
	"github.com/toolbus/toolbus/pkg/reaper"
	"maps"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolbus/toolbus/pkg/catalog"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolcall"
)

// Transport is how toolbus reaches a server.
type Transport string

const (
	TransportStdio   Transport = "stdio"
	TransportSSE     Transport = "sse"
	TransportHTTP    Transport = "http"
	TransportJSONRPC Transport = "jsonrpc"
)

// ServerConfig is one entry of "mcpServers", as MCP clients write it, plus toolbus's own
// per-server settings.
type ServerConfig struct {
	// Type is "stdio" (the default when Command is set), "sse", "http" ("streamable-http"
	// is accepted) or "jsonrpc". A URL without a type is streamable HTTP falling back to
	// SSE, as Claude Code and Cursor read it ([ServerConfig.FallsBackToSSE]).
	Type    string            `json:"type,omitempty"`
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// InheritEnv names variables of toolbus's own environment a stdio server also gets,
	// beyond the few every server gets (see [DefaultEnv]).
	InheritEnv []string `json:"inheritEnv,omitempty"`
	Cwd        string   `json:"cwd,omitempty"`
	// Limits bound a stdio server's process and what it starts (memory, CPU time,
	// file size, processes, open files), and may run it as another user (runAs): zero
	// fields take reaper.DefaultServerLimits, a negative one sets none.
	Limits  *reaper.Limits    `json:"limits,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`

	// Timeout of one call. Default 60s.
	Timeout      messages.Duration `json:"timeout,omitzero"`
	AllowedTools []string          `json:"allowedTools,omitempty"`
	BlockedTools []string          `json:"blockedTools,omitempty"`
	Prefix       string            `json:"prefix,omitempty"`
	// Enabled false turns the server off without removing it. Default true.
	Enabled *bool `json:"enabled,omitempty"`
	// Disabled true turns the server off, as Cline and Roo Code write it: the same as
	// enabled false.
	Disabled bool `json:"disabled,omitempty"`
	// Health false leaves the server out of healthd's probes: its calls alone say
	// whether it works (the executors' breakers). Default true.
	Health *bool `json:"health,omitempty"`
	// ProbeTimeout bounds one health probe of the server. Default: healthd's (5s);
	// a probe that has to start a stdio server of its own (no executor holds a
	// session with it) gets at least the server's timeout.
	ProbeTimeout messages.Duration `json:"probeTimeout,omitzero"`
	// Retry shapes the backoff between reconnects and between attempts of a call.
	Retry *RetryPolicy `json:"retry,omitempty"`
	// RefreshInterval is how often the server's tools are listed again, besides on
	// connect and on notifications/tools/list_changed. Default 5m.
	RefreshInterval messages.Duration `json:"refreshInterval,omitzero"`
	// MaxMessageBytes bounds one message a stdio server sends, and the answer to a
	// tools/call of an http server; default [DefaultMaxMessageBytes] (64 MiB), -1 for
	// no bound.
	MaxMessageBytes int `json:"maxMessageBytes,omitempty"`
	// Parallel overrides the executor's parallel setting for this server's tools: "safe",
	// "ordered" or "all".
	Parallel string `json:"parallel,omitempty"`
	// Host, Port and Endpoint spell URL as in-house MCP handlers configure a JSON-RPC
	// service ("http://host:port/endpoint"); a server given so is "jsonrpc" unless Type
	// says otherwise. They are read when the entry is decoded.
	Host     string `json:"host,omitempty"`
	Port     int    `json:"port,omitempty"`
	Endpoint string `json:"endpoint,omitempty"`
	// Tools declares the server's tools, for servers that cannot list them: with it,
	// toolbus never asks the server for tools/list, lists these, and checks a call's
	// arguments against their inputSchema before it sends anything.
	Tools []DeclaredTool `json:"tools,omitempty"`
	// Roots are the folders (paths, relative to Cwd, or file:// URIs) toolbus offers the
	// server as its roots: the filesystem server, for one, serves those. Without them
	// toolbus does not advertise the roots capability at all.
	Roots []string `json:"roots,omitempty"`
	// Elicitation is how toolbus answers a server that asks the user for input
	// mid-call: "decline" (the default: toolbus has no user to ask, so it does not
	// offer elicitation, and a request that comes anyway is refused), or "defaults":
	// offer it, and accept with the requested schema's defaults when every required
	// field has one, declining otherwise (a URL elicitation is declined either way); or
	// "ask": offer it, and put the question to whoever made the call ([Options.Ask]:
	// toolbus asks the conversation's orchestrator on toolbus.elicit.<conversation>),
	// within the call's time, declining when nobody answers.
	Elicitation string `json:"elicitation,omitempty"`
	// Sampling is how toolbus answers a server that asks for a model's completion
	// mid-call (sampling/createMessage): "deny" (the default: toolbus does not offer
	// sampling, and a request that comes anyway is refused), or "ask": offer it, and put
	// the request to whoever made the call ([Options.Sample]: toolbus asks the
	// conversation's orchestrator on toolbus.sample.<conversation>) within the call's
	// time, refusing it when nobody answers.
	Sampling string `json:"sampling,omitempty"`
	// OAuth configures how toolbus is authorized by an http server that requires it
	// (its answer 401 names its authorization server). Without the entry, an http
	// server that requires authorization gets the authorization-code flow of a user's
	// login (`toolbus auth login`) with a dynamically registered client; the entry names
	// a pre-registered client, the scopes, the callback port, a client ID metadata
	// document, or the client credentials grant (machine to machine).
	OAuth *oauth.Config `json:"oauth,omitempty"`
	// Sessions says who shares the server's MCP session: "conversation" (each
	// conversation has its own session, for a stdio server its own process, opened on its
	// first call and reached by all its calls whichever executor replica pulls them),
	// "shared" (one session for every conversation), or "" (auto): "conversation" for a
	// stdio or sse server and for an http server that gives its session an id —
	// toolbus cannot tell that such a server keeps no state in the session — and
	// "shared" for an http server without session ids and for a jsonrpc service.
	Sessions string `json:"sessions,omitempty"`
	// SessionIdle closes a conversation's session after this long without a call.
	// Default [DefaultSessionIdle].
	SessionIdle messages.Duration `json:"sessionIdle,omitzero"`
	// Resources false leaves out the tools toolbus makes to list and read the
	// server's resources ("<server>__resources_list", "<server>__resources_read"),
	// and Prompts false those to list and get its prompts ("<server>__prompts_list",
	// "<server>__prompts_get"). Default true: offered when the server declares the
	// capability.
	Resources *bool `json:"resources,omitempty"`
	Prompts   *bool `json:"prompts,omitempty"`
	// Completions true adds a tool that completes an argument of the server's prompts
	// or resource templates ("<server>__completion_complete"), when the server declares
	// the capability and its prompts or resources are offered: toolbus's MCP front door
	// passes a client's completion/complete on through it. Default false: a model
	// seldom needs it, and every tool listed costs a model's context.
	Completions *bool `json:"completions,omitempty"`
	// Subscriptions true adds the tools that subscribe a conversation to a resource of
	// the server and end it ("<server>__resources_subscribe", "__resources_unsubscribe"),
	// when the server declares resource subscriptions and its resources are offered:
	// the resource's updates reach the conversation's orchestrator (toolbus's MCP front
	// door relays them to the subscribed client). Default false, as Completions.
	Subscriptions *bool `json:"subscriptions,omitempty"`
	// MaxSessions bounds the conversations' sessions open at once per executor
	// replica; the least recently used idle one is closed to make room. Default
	// [DefaultMaxSessions].
	MaxSessions int `json:"maxSessions,omitempty"`
	// Concurrency bounds the server's calls running at once in one executor process,
	// whatever their sessions: a call past it waits for its turn (its time budget
	// counting), then is sent. 1 makes the calls take turns, for a server that is not
	// safe to call twice at once — the memory server reads its file, changes it and
	// writes it back on every call, so two calls that overlap lose one's write. Default
	// 0: no bound.
	Concurrency int `json:"concurrency,omitempty"`
	// EnvFile names a file of KEY=VALUE lines added to Env (Env wins), as VS Code's
	// mcp.json writes it; the configuration reads it when it loads (pkg/config), a
	// relative path from the configuration file's folder.
	EnvFile string `json:"envFile,omitempty"`
	// AuthConfig is lollms's credential of a remote server ("auth_config" beside
	// "server_url"), sent as lollms sends it: see [AuthConfig].
	AuthConfig *AuthConfig `json:"auth_config,omitempty"`

	// invalid is what decoding found wrong with the entry (two URLs that differ, an
	// auth_config toolbus cannot send), for Validate to say, naming the key.
	invalid error
}

// AuthConfig is the "auth_config" of a lollms remote MCP server (lollms_client's
// remote_mcp binding), sent in the headers lollms sends it in: "bearer" as
// "Authorization: Bearer <token>", "api_key" as "<header_name>: <key>" (header_name
// X-API-Key unless given). An empty one ({}, lollms's default) sends nothing; any other
// type, or a type without its credential, is an error rather than a server reached
// without it.
type AuthConfig struct {
	Type       string `json:"type,omitempty"`
	Token      string `json:"token,omitempty"`
	Key        string `json:"key,omitempty"`
	HeaderName string `json:"header_name,omitempty"`
}

// Header is the header the credential is sent in and its value; "" for an empty
// auth_config.
func (a *AuthConfig) Header() (name, value string, err error) {
	switch {
	case a == nil || *a == AuthConfig{}:
		return "", "", nil
	case a.Type == "bearer":
		if a.Token == "" {
			return "", "", fmt.Errorf("token: a bearer auth_config needs a token (empty: is its ${VAR} set?)")
		}
		return "Authorization", "Bearer " + a.Token, nil
	case a.Type == "api_key":
		if a.Key == "" {
			return "", "", fmt.Errorf("key: an api_key auth_config needs a key (empty: is its ${VAR} set?)")
		}
		name := a.HeaderName
		if name == "" {
			name = "X-API-Key"
		}
		return name, a.Key, nil
	case a.Type == "":
		return "", "", fmt.Errorf("type: an auth_config with a credential needs a type (\"bearer\" or \"api_key\", as lollms sends them)")
	}
	return "", "", fmt.Errorf("type: %q is not an auth_config type toolbus can send (lollms sends \"bearer\" and \"api_key\"); give the credential as headers instead", a.Type)
}

// JSONAliases names the other keys an entry's fields are read from, as other MCP
// clients spell them: lollms's "server_url", Windsurf's "serverUrl" and Gemini CLI's
// "httpUrl" for url; "transport" (mcp-use, LangChain's adapters) and Cline's
// "transportType" for type; Gemini CLI's "includeTools" and "excludeTools" and Roo
// Code's "disabledTools" for the tool lists.
func (*ServerConfig) JSONAliases() map[string]string {
	return map[string]string{
		"server_url": "url", "serverUrl": "url", "httpUrl": "url",
		"transport": "type", "transportType": "type",
		"includeTools": "allowedTools", "excludeTools": "blockedTools", "disabledTools": "blockedTools",
	}
}

// UnmarshalJSON reads an entry as MCP clients write it, and also with "command" as a
// list, program first, as some clients and design notes write it: ["node", "server.mjs"]
// is command "node" with "server.mjs" before the args.
//
// The keys of other clients ([ServerConfig.JSONAliases]) are read into their fields: a
// second spelling that differs from the first is an error (Validate). lollms's
// server_url and Gemini CLI's httpUrl are streamable HTTP, as those clients reach them.
// An auth_config is added to the headers.
func (c *ServerConfig) UnmarshalJSON(b []byte) error {
	type plain ServerConfig
	var v struct {
		plain
		Command       json.RawMessage `json:"command,omitempty"`
		ServerURL     string          `json:"server_url,omitempty"`
		ServerURL2    string          `json:"serverUrl,omitempty"`
		HTTPURL       string          `json:"httpUrl,omitempty"`
		Transport     string          `json:"transport,omitempty"`
		TransportType string          `json:"transportType,omitempty"`
		IncludeTools  []string        `json:"includeTools,omitempty"`
		ExcludeTools  []string        `json:"excludeTools,omitempty"`
		DisabledTools []string        `json:"disabledTools,omitempty"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*c = ServerConfig(v.plain)
	streamable := false
	for _, alt := range []struct{ key, url string }{{"server_url", v.ServerURL}, {"serverUrl", v.ServerURL2}, {"httpUrl", v.HTTPURL}} {
		switch {
		case alt.url == "":
		case c.URL == "":
			c.URL, streamable = alt.url, alt.key != "serverUrl"
		case c.URL != alt.url && c.invalid == nil:
			c.invalid = fmt.Errorf("%s: %q is not the url given (%q): give one", alt.key, alt.url, c.URL)
		}
	}
	for _, alt := range []struct{ key, typ string }{{"transport", v.Transport}, {"transportType", v.TransportType}} {
		switch {
		case alt.typ == "":
		case c.Type == "":
			c.Type = alt.typ
		case (ServerConfig{Type: c.Type}).Transport() != (ServerConfig{Type: alt.typ}).Transport() && c.invalid == nil:
			c.invalid = fmt.Errorf("%s: %q is not the type given (%q): give one", alt.key, alt.typ, c.Type)
		}
	}
	if streamable && c.Type == "" && len(v.Command) == 0 {
		c.Type = string(TransportHTTP)
	}
	c.AllowedTools = append(c.AllowedTools, v.IncludeTools...)
	c.BlockedTools = append(append(c.BlockedTools, v.ExcludeTools...), v.DisabledTools...)
	if name, value, err := c.AuthConfig.Header(); err != nil {
		if c.invalid == nil {
			c.invalid = fmt.Errorf("auth_config.%w", err)
		}
	} else if name != "" {
		for k, old := range c.Headers {
			if strings.EqualFold(k, name) && old != value && c.invalid == nil {
				c.invalid = fmt.Errorf("auth_config: headers already hold %s, which auth_config would send: give one", k)
			}
		}
		headers := make(map[string]string, len(c.Headers)+1)
		for k, v := range c.Headers {
			if !strings.EqualFold(k, name) {
				headers[k] = v
			}
		}
		headers[name] = value
		c.Headers = headers
	}
	if c.URL == "" && c.Host != "" {
		host := c.Host
		if c.Port != 0 {
			host = net.JoinHostPort(c.Host, strconv.Itoa(c.Port))
		}
		c.URL = (&url.URL{Scheme: "http", Host: host, Path: "/" + strings.TrimPrefix(c.Endpoint, "/")}).String()
		if c.Type == "" && len(v.Command) == 0 {
			c.Type = string(TransportJSONRPC)
		}
	}
	if len(v.Command) == 0 || string(v.Command) == "null" {
		return nil
	}
	if v.Command[0] == '[' {
		var line []string
		if err := json.Unmarshal(v.Command, &line); err != nil {
			return fmt.Errorf("command: %w", err)
		}
		if len(line) == 0 {
			return fmt.Errorf("command: an empty list")
		}
		c.Command, c.Args = line[0], append(line[1:len(line):len(line)], c.Args...)
		return nil
	}
	return json.Unmarshal(v.Command, &c.Command)
}

// DeclaredTool is a tool a server's configuration declares (see ServerConfig.Tools).
type DeclaredTool struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// InputSchema is a JSON Schema object; "input_schema" and "parameters" are accepted
	// too. Default: any object.
	InputSchema json.RawMessage      `json:"inputSchema,omitempty"`
	Annotations *mcp.ToolAnnotations `json:"annotations,omitempty"`
}

// JSONAliases names the other keys a declared tool's fields are read from: the schema
// under the names design notes and SDKs give it.
func (*DeclaredTool) JSONAliases() map[string]string {
	return map[string]string{"input_schema": "inputSchema", "parameters": "inputSchema"}
}

// UnmarshalJSON reads a declared tool, its schema under any of its names
// ([DeclaredTool.JSONAliases]).
func (d *DeclaredTool) UnmarshalJSON(b []byte) error {
	type plain DeclaredTool
	var v struct {
		plain
		Snake      json.RawMessage `json:"input_schema,omitempty"`
		Parameters json.RawMessage `json:"parameters,omitempty"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*d = DeclaredTool(v.plain)
	for _, alt := range []json.RawMessage{v.Snake, v.Parameters} {
		if len(d.InputSchema) == 0 && len(alt) > 0 {
			d.InputSchema = alt
		}
	}
	return nil
}

// tool is the declared tool as the server would have listed it.
func (d DeclaredTool) tool() *mcp.Tool {
	schema := d.InputSchema
	if len(schema) == 0 {
		schema = json.RawMessage(`{"type": "object"}`)
	}
	return &mcp.Tool{Name: d.Name, Description: d.Description, InputSchema: schema, Annotations: d.Annotations}
}

// RetryPolicy is a server's exponential backoff with jitter.
type RetryPolicy struct {
	// MaxAttempts of one call, the first included. Default 3.
	MaxAttempts int `json:"maxAttempts,omitempty"`
	// InitialInterval is the first wait. Default 200ms.
	InitialInterval messages.Duration `json:"initialInterval,omitzero"`
	// MaxInterval caps the wait. Default 30s.
	MaxInterval messages.Duration `json:"maxInterval,omitzero"`
}

// Defaults of the per-server settings.
const (
	DefaultTimeout         = 60 * time.Second
	DefaultRefreshInterval = 5 * time.Minute
	DefaultMaxAttempts     = 3
)

// CallTimeout bounds one call, and one connection attempt.
func (c ServerConfig) CallTimeout() time.Duration {
	if c.Timeout > 0 {
		return time.Duration(c.Timeout)
	}
	return DefaultTimeout
}

// OffersResources reports whether the server's resources are offered as tools (its
// "resources" is not false).
func (c ServerConfig) OffersResources() bool { return c.Resources == nil || *c.Resources }

// OffersPrompts reports whether the server's prompts are offered as tools (its
// "prompts" is not false).
func (c ServerConfig) OffersPrompts() bool { return c.Prompts == nil || *c.Prompts }

// OffersCompletions reports whether the server's completions are offered as a tool (its
// "completions" is true).
func (c ServerConfig) OffersCompletions() bool { return c.Completions != nil && *c.Completions }

// OffersSubscriptions reports whether the server's resource subscriptions are offered
// as tools (its "subscriptions" is true).
func (c ServerConfig) OffersSubscriptions() bool { return c.Subscriptions != nil && *c.Subscriptions }

// Probed reports whether healthd probes the server (its "health" is not false).
func (c ServerConfig) Probed() bool { return c.Health == nil || *c.Health }

// Refresh is the interval of the periodic tools/list.
func (c ServerConfig) Refresh() time.Duration {
	if c.RefreshInterval > 0 {
		return time.Duration(c.RefreshInterval)
	}
	return DefaultRefreshInterval
}

// MaxAttempts is how many times a retryable call is tried, the first included.
func (c ServerConfig) MaxAttempts() int {
	if c.Retry != nil && c.Retry.MaxAttempts > 0 {
		return c.Retry.MaxAttempts
	}
	return DefaultMaxAttempts
}

// Backoff returns a fresh exponential backoff with jitter that never gives up by
// itself; bound it with backoff.WithMaxRetries or a context.
func (c ServerConfig) Backoff() *backoff.ExponentialBackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 200 * time.Millisecond
	b.MaxInterval = 30 * time.Second
	b.MaxElapsedTime = 0
	if c.Retry != nil && c.Retry.InitialInterval > 0 {
		b.InitialInterval = time.Duration(c.Retry.InitialInterval)
	}
	if c.Retry != nil && c.Retry.MaxInterval > 0 {
		b.MaxInterval = time.Duration(c.Retry.MaxInterval)
	}
	b.Reset()
	return b
}

// Transport returns the server's transport.
func (c ServerConfig) Transport() Transport {
	switch c.Type {
	case "", "stdio":
		if c.Type == "" && c.Command == "" && c.URL != "" {
			return TransportHTTP
		}
		return TransportStdio
	case "streamable-http", "streamableHttp", "streamable_http", "http":
		return TransportHTTP
	default:
		return Transport(c.Type)
	}
}

// IsEnabled reports whether the server is switched on: neither "enabled": false nor
// "disabled": true.
func (c ServerConfig) IsEnabled() bool { return (c.Enabled == nil || *c.Enabled) && !c.Disabled }

// FallsBackToSSE reports whether the server is reached over streamable HTTP first and
// over HTTP+SSE when it does not speak that: an entry with a url and no type, as Claude
// Code and Cursor write one for either transport.
func (c ServerConfig) FallsBackToSSE() bool { return c.Type == "" && c.Command == "" && c.URL != "" }

// Validate says what is wrong with the entry, naming the key.
func (c ServerConfig) Validate() error {
	if c.invalid != nil {
		return c.invalid
	}
	switch t := c.Transport(); t {
	case TransportStdio:
		if c.Command == "" {
			return fmt.Errorf("command: a stdio server needs a command")
		}
	case TransportSSE, TransportHTTP, TransportJSONRPC:
		if c.URL == "" {
			return fmt.Errorf("url: a %s server needs a url", t)
		}
		if c.Limits != nil {
			return fmt.Errorf("limits: only a stdio server runs as a process of toolbus's, which limits bound")
		}
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("url: %q is not an http(s) URL", c.URL)
		}
	default:
		return fmt.Errorf("type: unknown transport %q (want stdio, sse, http or jsonrpc)", c.Type)
	}
	if c.Timeout < 0 {
		return fmt.Errorf("timeout: must not be negative")
	}
	if c.RefreshInterval < 0 {
		return fmt.Errorf("refreshInterval: must not be negative")
	}
	if err := (catalog.Lists{Allowed: c.AllowedTools, Blocked: c.BlockedTools}).Validate(); err != nil {
		return err
	}
	if !catalog.ValidPrefix(c.Prefix) {
		return fmt.Errorf("prefix: %q may only hold letters, digits, '_', '.' and '-'", c.Prefix)
	}
	if c.EnvFile != "" && c.Transport() != TransportStdio {
		return fmt.Errorf("envFile: only a stdio server takes envFile")
	}
	if c.AuthConfig != nil && c.Transport() == TransportStdio {
		return fmt.Errorf("auth_config: only a remote server (server_url) takes auth_config")
	}
	if c.OAuth != nil {
		if c.Transport() != TransportHTTP {
			return fmt.Errorf("oauth: only an http server takes oauth")
		}
		if err := c.OAuth.Validate(); err != nil {
			return err
		}
	}
	switch c.Sessions {
	case "", SessionsConversation, SessionsShared:
	default:
		return fmt.Errorf("sessions: %q is not a scope (want %q or %q)", c.Sessions, SessionsConversation, SessionsShared)
	}
	if c.SessionIdle < 0 || c.MaxSessions < 0 || c.Concurrency < 0 {
		return fmt.Errorf("sessionIdle, maxSessions, concurrency: must not be negative")
	}
	switch c.Sampling {
	case "", SampleDeny, SampleAsk:
	default:
		return fmt.Errorf("sampling: %q is not a policy (want %q or %q)", c.Sampling, SampleDeny, SampleAsk)
	}
	switch c.Elicitation {
	case "", ElicitDecline, ElicitDefaults, ElicitAsk:
	default:
		return fmt.Errorf("elicitation: %q is not a policy (want %q, %q or %q)", c.Elicitation, ElicitDecline, ElicitDefaults, ElicitAsk)
	}
	if c.Retry != nil && (c.Retry.MaxAttempts < 0 || c.Retry.InitialInterval < 0 || c.Retry.MaxInterval < 0) {
		return fmt.Errorf("retry: values must not be negative")
	}
	seen := map[string]bool{}
	for i, d := range c.Tools {
		switch {
		case d.Name == "":
			return fmt.Errorf("tools[%d]: a declared tool needs a name", i)
		case seen[d.Name]:
			return fmt.Errorf("tools[%d]: %q is declared twice", i, d.Name)
		}
		seen[d.Name] = true
		if len(d.InputSchema) > 0 {
			if _, err := toolcall.ResolveSchema(d.InputSchema); err != nil {
				return fmt.Errorf("tools[%d] (%s): inputSchema: %v", i, d.Name, err)
			}
		}
	}
	return nil
}

// declaredSchemas resolves the input schemas of the declared tools, by name (Validate
// has checked them).
func (c ServerConfig) declaredSchemas() map[string]*jsonschema.Resolved {
	if len(c.Tools) == 0 {
		return nil
	}
	out := make(map[string]*jsonschema.Resolved, len(c.Tools))
	for _, d := range c.Tools {
		s, _ := toolcall.ResolveSchema(d.tool().InputSchema.(json.RawMessage))
		out[d.Name] = s
	}
	return out
}

// HTTPClient returns base (nil: a default client) adding the server's configured
// headers to every request, for the http, sse and jsonrpc transports: its headers and
// its auth_config's (which decoding has added to them already; an entry made in Go gets
// them here).
func (c ServerConfig) HTTPClient(base *http.Client) *http.Client {
	headers := c.Headers
	if name, value, err := c.AuthConfig.Header(); err == nil && name != "" && headers[name] != value {
		headers = maps.Clone(headers)
		if headers == nil {
			headers = map[string]string{}
		}
		headers[name] = value
	}
	return withHeaders(base, headers)
}

// maxMessage is MaxMessageBytes as a bound: 0 for none.
func (c ServerConfig) maxMessage() int {
	switch {
	case c.MaxMessageBytes < 0:
		return 0
	case c.MaxMessageBytes == 0:
		return DefaultMaxMessageBytes
	}
	return c.MaxMessageBytes
}
