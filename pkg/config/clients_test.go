package config

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolbus/toolbus/pkg/mcpwire"
)

// Files of other MCP clients (issue 52): each is honoured, or refused aloud — never a
// credential dropped or a server left out without a word.

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// A lollms entry: server_url is the server's URL (streamable HTTP), auth_config its
// credential, sent as a header and masked like any header; an auth_config toolbus
// cannot send is an error naming the server, the key and the type.
func TestLollmsEntry(t *testing.T) {
	c, err := Parse([]byte(`{"mcpServers":{"kb":{"server_url":"http://kb.local:8787/mcp","auth_config":{"type":"bearer","token":"${KB_TOKEN}"},"timeout":5}}}`),
		"lollms.json", env(map[string]string{"KB_TOKEN": "kb-tok-31337"}))
	if err != nil {
		t.Fatal(err)
	}
	s := c.MCPServers["kb"]
	if len(c.Warnings) != 1 || c.Warnings[0].Key != "mcpServers.kb.timeout" || !strings.Contains(c.Warnings[0].Message, "handshake") {
		t.Errorf("warnings %v, want one of lollms's timeout", c.Warnings)
	}
	if s.URL != "http://kb.local:8787/mcp" || s.Transport() != mcpwire.TransportHTTP || s.Headers["Authorization"] != "Bearer kb-tok-31337" || s.CallTimeout() != 5*time.Second {
		t.Errorf("kb: url %q, transport %s, headers %v, timeout %v", s.URL, s.Transport(), s.Headers, s.CallTimeout())
	}
	if got := c.Redactor().For("kb").String("401 with Bearer kb-tok-31337"); strings.Contains(got, "kb-tok-31337") {
		t.Errorf("redacted: %q", got)
	}
	for entry, want := range map[string]string{
		`{"server_url":"http://h/mcp","auth_config":{"type":"oauth","token":"t"}}`:         `lollms.json: mcpServers.kb.auth_config.type: "oauth" is not an auth_config type toolbus can send`,
		`{"server_url":"http://h/mcp","auth_config":{"type":"bearer","token":"${UNSET}"}}`: `lollms.json: mcpServers.kb.auth_config.token: a bearer auth_config needs a token`,
	} {
		_, err := Parse([]byte(`{"mcpServers":{"kb":`+entry+`}}`), "lollms.json", env(nil))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", entry, err, want)
		}
	}
}

// VS Code's mcp.json: "servers" are servers, ${env:VAR} is ${VAR}, ${input:ID} comes
// from TOOLBUS_INPUT_<ID>, and an input without a value fails the load naming the input,
// its description and the variable to set.
func TestVSCodeFile(t *testing.T) {
	file := []byte(`{
	  "inputs": [
	    {"type": "promptString", "id": "github-token", "description": "GitHub Personal Access Token", "password": true},
	    {"type": "pickString", "id": "mode", "description": "Mode", "options": ["ro", "rw"], "default": "ro"}
	  ],
	  "servers": {
	    "github": {"type": "http", "url": "https://api.githubcopilot.com/mcp/", "headers": {"Authorization": "Bearer ${input:github-token}"}},
	    "fetch":  {"type": "stdio", "command": "uvx", "args": ["mcp-server-fetch", "--mode", "${input:mode}"], "env": {"HOME_DIR": "${env:HOME_DIR}"}},
	    "events": {"type": "sse", "url": "http://localhost:3001/sse"}
	  }
	}`)
	c, err := Parse(file, "mcp.json", env(map[string]string{"TOOLBUS_INPUT_GITHUB_TOKEN": "ghp_vscode1234", "HOME_DIR": "/home/u"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.ServerNames(), ","); got != "events,fetch,github" {
		t.Fatalf("servers %q", got)
	}
	gh, fetch := c.MCPServers["github"], c.MCPServers["fetch"]
	if gh.Headers["Authorization"] != "Bearer ghp_vscode1234" || gh.Transport() != mcpwire.TransportHTTP || c.MCPServers["events"].Transport() != mcpwire.TransportSSE {
		t.Errorf("github %+v, events %+v", gh, c.MCPServers["events"])
	}
	if strings.Join(fetch.Args, " ") != "mcp-server-fetch --mode ro" || fetch.Env["HOME_DIR"] != "/home/u" {
		t.Errorf("fetch: args %q, env %v", fetch.Args, fetch.Env)
	}
	if got := c.Redactor().String("token ghp_vscode1234"); got != "token REDACTED" {
		t.Errorf("the input's value is not masked: %q", got)
	}

	_, err = Parse(file, "mcp.json", env(map[string]string{"TOOLBUS_INPUT_GITHUB_TOKEN": ""}))
	want := `mcp.json: servers.github.headers.Authorization: ${input:github-token} ("GitHub Personal Access Token", which VS Code prompts for (a password)) has no value: set TOOLBUS_INPUT_GITHUB_TOKEN`
	if err == nil || err.Error() != want {
		t.Errorf("without the input:\n got %v\nwant %s", err, want)
	}
	_, err = Parse([]byte(`{"servers":{"a":{"command":"x","args":["${input:nope}"]}}}`), "mcp.json", env(nil))
	if err == nil || !strings.Contains(err.Error(), "servers.a.args.0: ${input:nope} (no input of that id in inputs) has no value: set TOOLBUS_INPUT_NOPE") {
		t.Errorf("an undeclared input: %v", err)
	}
	_, err = Parse([]byte(`{"servers":{"a":{"command":"x","args":["${command:pickFile}"]}}}`), "mcp.json", env(nil))
	if err == nil || !strings.Contains(err.Error(), "servers.a.args.0: VS Code's ${command:pickFile} has no value outside VS Code") {
		t.Errorf("a VS Code command variable: %v", err)
	}
	_, err = Parse([]byte(`{"servers":{"a":{"command":"x"}},"mcpServers":{"a":{"command":"y"}}}`), "mcp.json", env(nil))
	if err == nil || !strings.Contains(err.Error(), "servers.a: also in mcpServers") {
		t.Errorf("a server in both: %v", err)
	}
	_, err = Parse([]byte(`{"servers":{"a":{"type":"stdio"}}}`), "mcp.json", env(nil))
	if err == nil || !strings.Contains(err.Error(), "mcp.json: servers.a.command: a stdio server needs a command") {
		t.Errorf("an error in a VS Code server: %v", err)
	}
	_, err = Parse([]byte(`{"servers":{"a":{"command":"x","timout":"5s"}}}`), "mcp.json", env(nil))
	if err == nil || !strings.Contains(err.Error(), `unknown key "servers.a.timout" (did you mean "timeout"?)`) {
		t.Errorf("a typo in a VS Code server: %v", err)
	}
}

// ${workspaceFolder} is the folder holding .vscode/, and an envFile's lines join the
// server's env (its own entries win), as VS Code reads them.
func TestVSCodeWorkspaceAndEnvFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, ".vscode"), 0o755); err != nil {
		t.Fatal(err)
	}
	envFile := "# secrets\nexport API_KEY=\"k-123 456\"\nMODE=dev # a comment\nKEEP=from-file\n\nQUOTED='a b'\n"
	if err := os.WriteFile(filepath.Join(dir, ".env"), []byte(envFile), 0o600); err != nil {
		t.Fatal(err)
	}
	source := filepath.Join(dir, ".vscode", "mcp.json")
	c, err := Parse([]byte(`{"servers":{"fs":{"type":"stdio","command":"npx","args":["server-filesystem","${workspaceFolder}"],
		"envFile":"${workspaceFolder}/.env","env":{"KEEP":"from-entry"}}}}`), source, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	fs := c.MCPServers["fs"]
	if fs.Args[1] != dir {
		t.Errorf("${workspaceFolder} = %q, want %q", fs.Args[1], dir)
	}
	for k, want := range map[string]string{"API_KEY": "k-123 456", "MODE": "dev", "KEEP": "from-entry", "QUOTED": "a b"} {
		if fs.Env[k] != want {
			t.Errorf("env %s = %q, want %q", k, fs.Env[k], want)
		}
	}
	if got := c.Redactor().String("key k-123 456"); strings.Contains(got, "k-123 456") {
		t.Errorf("the env file's secret is not masked: %q", got)
	}
	_, err = Parse([]byte(`{"servers":{"fs":{"command":"npx","envFile":"missing.env"}}}`), source, env(nil))
	if err == nil || !strings.Contains(err.Error(), "servers.fs.envFile: open ") {
		t.Errorf("a missing env file: %v", err)
	}
}

// Keys other clients act on and toolbus does not are warnings naming the server and the
// key, logged at WARN; so is a ${VAR} that is not set.
func TestOtherClientsWarnings(t *testing.T) {
	c, err := Parse([]byte(`{"mcpServers":{
		"cline":  {"command":"x","autoApprove":["write"],"alwaysAllow":[],"disabled":false},
		"gemini": {"httpUrl":"https://g.example/mcp","timeout":600000,"trust":true},
		"claude": {"url":"https://c.example/mcp","headersHelper":"/bin/get-headers","headers":{"Authorization":"Bearer ${NOT_SET}"}},
		"vscode": {"command":"y","sandboxEnabled":true}}}`), "c.json", env(nil))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range c.Warnings {
		got = append(got, w.Server+" "+w.Key)
	}
	want := "claude mcpServers.claude.headersHelper,cline mcpServers.cline.autoApprove,gemini mcpServers.gemini.timeout,gemini mcpServers.gemini.trust," +
		"vscode mcpServers.vscode.sandboxEnabled,claude mcpServers.claude.headers.Authorization"
	if strings.Join(got, ",") != want {
		t.Errorf("warnings:\n %s\nwant\n %s", strings.Join(got, ","), want)
	}
	var buf bytes.Buffer
	c.LogWarnings(slog.New(slog.NewTextHandler(&buf, nil)))
	out := buf.String()
	for _, line := range []string{
		`level=WARN msg="config: Cline and Roo Code run only these tools without asking; toolbus asks nobody before a call`,
		`server=gemini key=mcpServers.gemini.timeout file=c.json`,
		`is read as seconds (166h40m0s)`,
		`${NOT_SET} is not set: the value is empty`,
	} {
		if !strings.Contains(out, line) {
			t.Errorf("the log has no %q:\n%s", line, out)
		}
	}
}

// A URL that came from ${VAR} is shown but for its secrets: an error names the host and
// path it could not reach (issue 52: Post "REDACTED"); a key in its query or path, or a
// password, is still masked, and so is a ${VAR} in a URL's path.
func TestURLFromVariableIsShown(t *testing.T) {
	c, err := Parse([]byte(`{"mcpServers":{
		"tickets": {"type":"http","url":"${TICKETS_URL}"},
		"zap":     {"type":"http","url":"https://${ZAP_HOST}/api/mcp/s/${ZAP_KEY}/mcp"}},
		"nats": {"url": "${NATS_URL}"}}`), "c.json", env(map[string]string{
		"TICKETS_URL": "https://svc:pw-4f9a2c@tickets.example:8443/api/mcp?token=tk-98765xyz&v=2",
		"ZAP_HOST":    "mcp.zapier.example", "ZAP_KEY": "zk-00112233",
		"NATS_URL": "nats://executor:n4ts-pw-9@nats.internal:4222",
	}))
	if err != nil {
		t.Fatal(err)
	}
	r := c.Redactor()
	for in, want := range map[string]string{
		`Post "https://tickets.example:8443/api/mcp?token=tk-98765xyz&v=2": dial tcp: connection refused`: `Post "https://tickets.example:8443/api/mcp?token=REDACTED&v=2": dial tcp: connection refused`,
		`tickets.example said pw-4f9a2c`:                                   `tickets.example said REDACTED`,
		`Post "https://mcp.zapier.example/api/mcp/s/zk-00112233/mcp": EOF`: `Post "https://mcp.zapier.example/api/mcp/s/REDACTED/mcp": EOF`,
		`nats: no servers available at nats.internal:4222 (n4ts-pw-9)`:     `nats: no servers available at nats.internal:4222 (REDACTED)`,
	} {
		if got := r.String(in); got != want {
			t.Errorf("String(%s)\n = %s\nwant %s", in, got, want)
		}
	}
}
