package config

import (
	"github.com/toolbus/toolbus/pkg/redact"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/toolbus/toolbus/pkg/mcpwire"
)

func TestParse(t *testing.T) {
	env := map[string]string{"TOKEN": "s3cret", "EMPTY": ""}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	tests := []struct {
		name    string
		json    string
		wantErr string
		check   func(t *testing.T, c *Config)
	}{
		{name: "empty object", json: `{}`, check: func(t *testing.T, c *Config) {
			if !On(c.Engineering.Enabled) || !On(c.Local.Clock) || c.HealthInterval() != 15*time.Second {
				t.Errorf("defaults: %+v", c)
			}
		}},
		{name: "claude desktop file with other keys", json: `{"globalShortcut":"Ctrl+Space","mcpServers":{"fs":{"command":"npx","args":["-y","@modelcontextprotocol/server-filesystem","/tmp"]}}}`,
			check: func(t *testing.T, c *Config) {
				if c.MCPServers["fs"].Transport() != mcpwire.TransportStdio || len(c.MCPServers["fs"].Args) != 3 {
					t.Errorf("fs: %+v", c.MCPServers["fs"])
				}
			}},
		{name: "env expansion", json: `{"mcpServers":{"t":{"type":"http","url":"https://${HOST:-tickets.example}/mcp","headers":{"Authorization":"Bearer ${TOKEN}","X":"${EMPTY:-dflt}","Y":"${MISSING}"}}}}`,
			check: func(t *testing.T, c *Config) {
				s := c.MCPServers["t"]
				if s.URL != "https://tickets.example/mcp" || s.Headers["Authorization"] != "Bearer s3cret" || s.Headers["X"] != "dflt" || s.Headers["Y"] != "" {
					t.Errorf("expanded: %+v", s)
				}
			}},
		{name: "value with quotes expands safely", json: `{"mcpServers":{"q":{"command":"${TOKEN}\"x"}}}`,
			check: func(t *testing.T, c *Config) {
				if c.MCPServers["q"].Command != `s3cret"x` {
					t.Errorf("command %q", c.MCPServers["q"].Command)
				}
			}},
		{name: "durations", json: `{"executor":{"timeout":"90s"},"health":{"interval":5},"mcpServers":{"a":{"command":"x","timeout":"2m"}}}`,
			check: func(t *testing.T, c *Config) {
				if time.Duration(c.Executor.Timeout) != 90*time.Second || c.HealthInterval() != 5*time.Second || time.Duration(c.MCPServers["a"].Timeout) != 2*time.Minute {
					t.Errorf("durations: %+v", c)
				}
			}},
		{name: "disabled server is not listed", json: `{"mcpServers":{"a":{"command":"x","enabled":false},"b":{"command":"y"},"c":{"command":"z","disabled":true}}}`,
			check: func(t *testing.T, c *Config) {
				if got := strings.Join(c.ServerNames(), ","); got != "b" {
					t.Errorf("servers %q", got)
				}
			}},
		{name: "a command line as a list", json: `{"mcpServers":{"a":{"command":["node","server.mjs"],"args":["--port","1"]}}}`,
			check: func(t *testing.T, c *Config) {
				if s := c.MCPServers["a"]; s.Command != "node" || strings.Join(s.Args, " ") != "server.mjs --port 1" {
					t.Errorf("a: %+v", s)
				}
			}},
		{name: "an empty command list", json: `{"mcpServers":{"a":{"command":[]}}}`, wantErr: "command: an empty list"},
		{name: "not json", json: `{"mcpServers":`, wantErr: "test.json:1:14: not valid JSON"},
		{name: "not json, line and column", json: "{\n  \"executor\": {\n    \"timeout\": \"5s\",\n  }\n}", wantErr: "test.json:4:3: not valid JSON"},
		{name: "a typo at the top level", json: `{"mcpServer":{"a":{"command":"x"}}}`, wantErr: `unknown key "mcpServer" (did you mean "mcpServers"?)`},
		{name: "a typo in a server", json: `{"mcpServers":{"a":{"command":"x","timout":"5s"}}}`, wantErr: `unknown key "mcpServers.a.timout" (did you mean "timeout"?)`},
		{name: "case and underscores in a server", json: `{"mcpServers":{"a":{"command":"x","allowed_tools":["y"]}}}`, wantErr: `unknown key "mcpServers.a.allowed_tools" (did you mean "allowedTools"?)`},
		{name: "a typo in toolbus's sections", json: `{"executor":{"concurrancy":4}}`, wantErr: `unknown key "executor.concurrancy" (did you mean "concurrency"?)`},
		{name: "an unknown key in toolbus's sections", json: `{"local":{"tools":{"folder":"t","shell":"bash"}}}`, wantErr: `unknown key "local.tools.shell"`},
		{name: "other clients' keys are ignored", json: `{"globalShortcut":"x","mcpServers":{"a":{"command":"x","autoApprove":["y"],"alwaysAllow":["y"]}}}`,
			check: func(t *testing.T, c *Config) {
				if strings.Join(c.Ignored, ",") != "globalShortcut,mcpServers.a.alwaysAllow,mcpServers.a.autoApprove" {
					t.Errorf("ignored %q", c.Ignored)
				}
			}},
		{name: "not an object", json: `[1]`, wantErr: "must be a JSON object"},
		{name: "unknown transport", json: `{"mcpServers":{"x":{"type":"websocket","url":"ws://a"}}}`, wantErr: `mcpServers.x.type: unknown transport "websocket"`},
		{name: "stdio without command", json: `{"mcpServers":{"x":{"type":"stdio"}}}`, wantErr: "mcpServers.x.command: a stdio server needs a command"},
		{name: "bad url", json: `{"mcpServers":{"x":{"type":"sse","url":"localhost:3000"}}}`, wantErr: `mcpServers.x.url: "localhost:3000" is not an http(s) URL`},
		{name: "route to missing server", json: `{"routes":{"create_ticket":"tickets"}}`, wantErr: `routes.create_ticket: no server called "tickets"`},
		{name: "bad duration", json: `{"executor":{"timeout":"soon"}}`, wantErr: `duration "soon"`},
		{name: "bad expose", json: `{"engineering":{"expose":"all"}}`, wantErr: "engineering.expose"},
		{name: "top-level allow- and block-lists", json: `{"allowedTools":["mcp__calc__add","clock"],"blockedTools":["file_*"]}`,
			check: func(t *testing.T, c *Config) {
				if strings.Join(c.AllowedTools, ",") != "mcp__calc__add,clock" || strings.Join(c.BlockedTools, ",") != "file_*" {
					t.Errorf("lists: %q, %q", c.AllowedTools, c.BlockedTools)
				}
			}},
		{name: "a bad top-level pattern", json: `{"blockedTools":["[x"]}`, wantErr: `blockedTools: "[x" is not a valid pattern`},
		{name: "a near miss of blockedTools", json: `{"blocked_tools":["x"]}`, wantErr: `(did you mean "blockedTools"?)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.json), "test.json", lookup)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want it to contain %q", err, tt.wantErr)
				}
				if !strings.HasPrefix(err.Error(), "test.json") {
					t.Errorf("error %q does not name the file", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}

// TestOAuthSecretRedacted: a server's OAuth client secret is one of the secrets the
// configuration's redactor hides, also when it is written in the file itself.
func TestOAuthSecretRedacted(t *testing.T) {
	c, err := Parse([]byte(`{"mcpServers":{"api":{"type":"http","url":"https://api.example/mcp",
		"oauth":{"clientId":"toolbus","clientSecret":"plain-s3cret-in-file"}}}}`), "test.json", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Redactor().String("token request failed for plain-s3cret-in-file"); strings.Contains(got, "plain-s3cret-in-file") {
		t.Errorf("redacted: %q still holds the client secret", got)
	}
}

// A private key given as ${VAR} is masked whole and line by line.
func TestPrivateKeyRedacted(t *testing.T) {
	key := "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgaPL7l9tPfrO1x3\nhRANCAAT2mRvHk4xbwSuAZsFb5p0Nt3hC1tBqT7rYp0Z8oK0uhm2Y4a\n-----END PRIVATE KEY-----\n"
	c, err := Parse([]byte(`{"mcpServers":{"api":{"type":"http","url":"https://api.example/mcp",
		"oauth":{"grant":"client_credentials","clientId":"toolbus","privateKey":"${KEY}"}}}}`), "test.json", func(k string) (string, bool) { return key, k == "KEY" })
	if err != nil {
		t.Fatal(err)
	}
	r := c.Redactor()
	for _, line := range strings.Split(strings.TrimSpace(key), "\n")[1:3] {
		if got := r.String("signing failed near " + line); strings.Contains(got, line) {
			t.Errorf("redacted: %q still holds a line of the key", got)
		}
	}
	if got := r.String(key); strings.Contains(got, "MIGHAgEAMBMG") {
		t.Errorf("redacted: %q still holds the key", got)
	}
}

// The configuration's secrets are its real ones: an env entry that is not named like a
// secret (LOG_LEVEL=info) masks nothing, while a ${VAR} value and a secret-named entry
// are masked; each server's only in its own messages (and in text of unknown source).
func TestSecretsAreSecrets(t *testing.T) {
	env := map[string]string{"API_KEY": "k-7f3a9c2e11", "NATS_PW": "n4ts-pw-31337"}
	c, err := Parse([]byte(`{"mcpServers":{
		"files":{"command":"files-server","env":{"LOG_LEVEL":"info","MODE":"production","GITHUB_TOKEN":"ghp_literal123456","KEY_FROM_VAR":"${API_KEY}"}},
		"other":{"command":"other-server"}},
		"nats":{"url":"nats://svc:${NATS_PW}@h:4222"}}`), "test.json", func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	r := c.Redactor()
	msg := "open /etc/information (production): k-7f3a9c2e11 ghp_literal123456 n4ts-pw-31337"
	for _, tc := range []struct {
		name string
		m    redact.Masker
		want string
	}{
		{"unknown source", r, "open /etc/information (production): REDACTED REDACTED REDACTED"},
		{"the server's own", r.For("files"), "open /etc/information (production): REDACTED REDACTED REDACTED"},
		{"another server's", r.For("other"), "open /etc/information (production): k-7f3a9c2e11 ghp_literal123456 REDACTED"},
	} {
		if got := tc.m.String(msg); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestPolicyErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		json    string
		wantErr string
	}{
		{name: "rule compiles", json: `{"policy":{"rules":[{"name":"no-etc","tools":["file_writer"],"when":"args.file_path.startsWith('/etc')","effect":"deny"}]}}`},
		{name: "syntax with position", json: `{"policy":{"rules":[{"name":"bad","when":"args.x ==","effect":"deny"}]}}`,
			wantErr: `c.json: policy.rules[0] ("bad"): when: <input>:1:10: Syntax error`},
		{name: "type check", json: `{"policy":{"rules":[{"name":"t","when":"tenant > 3","effect":"deny"}]}}`,
			wantErr: `policy.rules[0] ("t"): when: <input>:1:8: found no matching overload for '_>_'`},
		{name: "approve", json: `{"policy":{"rules":[{"name":"ask","tools":["file_writer"],"effect":"approve","timeout":"10m"}]}}`},
		{name: "approve timeout", json: `{"policy":{"rules":[{"name":"ask","effect":"approve","timeout":"48h"}]}}`, wantErr: `policy.rules[0] ("ask"): timeout`},
		{name: "unknown key", json: `{"policy":{"rules":[{"name":"x","effect":"deny","whem":"true"}]}}`, wantErr: `whem`},
		{name: "limit", json: `{"limits":[{"name":"five","per":"tenant","calls":5,"interval":"1m"}]}`},
		{name: "limit per", json: `{"limits":[{"name":"five","per":"user","calls":5,"interval":"1m"}]}`, wantErr: `limits[0] ("five"): per "user"`},
		{name: "limit interval", json: `{"limits":[{"name":"five","per":"tool","calls":5,"interval":"48h"}]}`, wantErr: `interval must be more than 0 and at most 24h0m0s`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.json), "c.json", func(string) (string, bool) { return "", false })
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got %v, want one with %q", err, tc.wantErr)
			}
		})
	}
}

// A header written in the file as a literal (X-Api-Key: k3y, not ${VAR}) is a secret of
// its server: masked in what an error or a log line of it says, and "Bearer <token>"'s
// token alone too.
func TestLiteralHeaderRedacted(t *testing.T) {
	c, err := Parse([]byte(`{"mcpServers":{"api":{"type":"http","url":"https://api.example/mcp",
		"headers":{"X-Api-Key":"k3y-literal-9","Authorization":"Bearer tok-literal-7"}}}}`), "test.json", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	r := c.Redactor()
	for _, line := range []string{
		`call failed: 401 for key k3y-literal-9`,
		`level=WARN msg="server refused" server=api header="X-Api-Key: k3y-literal-9"`,
		`the token tok-literal-7 was refused`,
	} {
		if got := r.String(line); strings.Contains(got, "k3y-literal-9") || strings.Contains(got, "tok-literal-7") {
			t.Errorf("redacted %q still holds a header's value", got)
		}
	}
	if got := r.For("api").String("key k3y-literal-9"); strings.Contains(got, "k3y-literal-9") {
		t.Errorf("redacted for its server: %q", got)
	}
}

// The front door's tokens are kept as their SHA-256 in hex, each naming one tenant.
func TestFrontDoorTokens(t *testing.T) {
	h1, h2 := strings.Repeat("a1", 32), strings.Repeat("B2", 32)
	tests := []struct {
		name    string
		js      string
		want    map[string]string
		wantErr string
	}{
		{name: "none", js: `{}`, want: map[string]string{}},
		{name: "the default tenant's and acme's", js: `{"frontDoor": {"tokens": ["` + h1 + `"]}, "tenants": {"acme": {"mcpTokens": ["` + h2 + `"]}}}`,
			want: map[string]string{h1: "", strings.ToLower(h2): "acme"}},
		{name: "a token, not its hash", js: `{"frontDoor": {"tokens": ["my-secret-token"]}}`, wantErr: "64 characters"},
		{name: "not hex", js: `{"frontDoor": {"tokens": ["` + strings.Repeat("zz", 32) + `"]}}`, wantErr: "hex digits"},
		{name: "one token, two tenants", js: `{"frontDoor": {"tokens": ["` + h1 + `"]}, "tenants": {"acme": {"mcpTokens": ["` + strings.ToUpper(h1) + `"]}}}`, wantErr: "a token names one tenant"},
		{name: "a negative bound", js: `{"frontDoor": {"maxBodyBytes": -1}}`, wantErr: "maxBodyBytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.js), "test.json", func(string) (string, bool) { return "", false })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "my-secret-token") {
					t.Errorf("the error echoes the token: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.MCPTokens(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("MCPTokens %v, want %v", got, tt.want)
			}
		})
	}
}
