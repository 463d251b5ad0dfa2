package mcpwire

import (
	"encoding/json"
	"fmt"
	"net/url"
	"time"
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
	// is accepted) or "jsonrpc".
	Type    string            `json:"type,omitempty"`
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Cwd     string            `json:"cwd,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`

	// Timeout of one call. Default 60s.
	Timeout      Duration `json:"timeout,omitzero"`
	AllowedTools []string `json:"allowedTools,omitempty"`
	BlockedTools []string `json:"blockedTools,omitempty"`
	Prefix       string   `json:"prefix,omitempty"`
	// Enabled false turns the server off without removing it. Default true.
	Enabled *bool `json:"enabled,omitempty"`
}

// Transport returns the server's transport.
func (c ServerConfig) Transport() Transport {
	switch c.Type {
	case "", "stdio":
		if c.Type == "" && c.Command == "" && c.URL != "" {
			return TransportHTTP
		}
		return TransportStdio
	case "streamable-http", "streamableHttp", "http":
		return TransportHTTP
	default:
		return Transport(c.Type)
	}
}

// IsEnabled reports whether the server is switched on.
func (c ServerConfig) IsEnabled() bool { return c.Enabled == nil || *c.Enabled }

// Validate says what is wrong with the entry, naming the key.
func (c ServerConfig) Validate() error {
	switch t := c.Transport(); t {
	case TransportStdio:
		if c.Command == "" {
			return fmt.Errorf("command: a stdio server needs a command")
		}
	case TransportSSE, TransportHTTP, TransportJSONRPC:
		if c.URL == "" {
			return fmt.Errorf("url: a %s server needs a url", t)
		}
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("url: %q is not an http(s) URL", c.URL)
		}
	default:
		return fmt.Errorf("type: unknown transport %q (want stdio, sse, http or jsonrpc)", c.Type)
	}
	return nil
}

// Duration is a time.Duration written in JSON as "30s" or as seconds.
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch v := v.(type) {
	case float64:
		*d = Duration(v * float64(time.Second))
	case string:
		p, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("duration %q: %w", v, err)
		}
		*d = Duration(p)
	default:
		return fmt.Errorf("duration: want a string like \"30s\" or a number of seconds")
	}
	return nil
}
