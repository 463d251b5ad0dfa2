package redact

import (
	"bytes"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	r := New("tok-123456", "x", "", "longer-tok-123456-plus")
	tests := []struct{ in, want string }{
		{"plain text", "plain text"},
		{"Bearer tok-123456 failed", "Bearer REDACTED failed"},
		{"longer-tok-123456-plus", "REDACTED"},
		{"x stays: too short to be a secret", "x stays: too short to be a secret"},
		{`Get "http://h:1/mcp?api_key=abc&v=2": dial tcp: refused`, `Get "http://h:1/mcp?api_key=REDACTED&v=2": dial tcp: refused`},
		{"nats://svc:pa55word@nats:4222, then", "nats://svc:REDACTED@nats:4222, then"},
		{"https://user@host/path (no password)", "https://user@host/path (no password)"},
		{"bad http://h:99999999/x%zz url", "bad REDACTED url"},
	}
	for _, tt := range tests {
		if got := r.String(tt.in); got != tt.want {
			t.Errorf("String(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := (*Redactor)(nil).String("http://a:b@c/"); got != "http://a:REDACTED@c/" {
		t.Errorf("nil redactor: %q", got)
	}
	var c Current
	if got := c.String("tok-123456 http://a:b@c/"); got != "tok-123456 http://a:REDACTED@c/" {
		t.Errorf("unset Current: %q", got)
	}
	c.Set(r)
	if got := c.String("tok-123456"); got != Mask {
		t.Errorf("Current: %q", got)
	}
}

// A URL's secrets are its password, the query values that may be secrets and the
// path segments that read as keys; not its host, its port, nor the rest of its path.
func TestURLSecrets(t *testing.T) {
	got := URLSecrets("https://u:pw-1234@h/x/zQ81kLm02pXv7Ab9/mcp?key=k-5678&a=b&v=2&page=10")
	slices.Sort(got)
	if strings.Join(got, ",") != "k-5678,pw-1234,zQ81kLm02pXv7Ab9" {
		t.Errorf("URLSecrets = %v", got)
	}
}

// A URL in a message keeps what says where the request went — scheme, host, port and
// path — and loses its password and the query values that may be secrets (issue 52: a
// URL was shown as Post "REDACTED").
func TestURLKeepsHostAndPath(t *testing.T) {
	for in, want := range map[string]string{
		`Post "https://svc:pw-9f8e7d@tickets.example:8443/api/mcp?access_token=tok-123456&page=2": dial tcp: refused`: `Post "https://svc:REDACTED@tickets.example:8443/api/mcp?access_token=REDACTED&page=2": dial tcp: refused`,
		`Get "https://api.example/v1/items?sig=abc&format=json" failed`:                                               `Get "https://api.example/v1/items?format=json&sig=REDACTED" failed`,
		`Get "https://api.example/v1/items?q=a%20b%20c%20d" failed`:                                                   `Get "https://api.example/v1/items?q=REDACTED" failed`,
		`Post "https://tickets.example/mcp": EOF`:                                                                     `Post "https://tickets.example/mcp": EOF`,
	} {
		if got := New("unrelated-s3cret").String(in); got != want {
			t.Errorf("String(%s)\n = %s\nwant %s", in, got, want)
		}
	}
}

// The handler masks messages, string, error, stringer and grouped attributes, and those
// given with With.
func TestHandler(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(Handler(slog.NewJSONHandler(&buf, nil), New("s3cret-canary")))
	log.With("ctx", "with s3cret-canary").Info("connect s3cret-canary", "url", "http://h/?k=s3cret-canary",
		"err", errors.New("failed: s3cret-canary"), slog.Group("g", "inner", "s3cret-canary"), "n", 7)
	out := buf.String()
	if strings.Contains(out, "s3cret-canary") || strings.Count(out, Mask) < 5 || !strings.Contains(out, `"n":7`) {
		t.Errorf("log line: %s", out)
	}
}

// A value is a secret only if it could not be part of ordinary text, and a source's
// secrets are masked in its own messages, not in another's.
func TestSecretsAndSources(t *testing.T) {
	for v, want := range map[string]bool{"info": false, "debug": false, "production": false, "PRODUCTION": false, "on": false,
		"hunter2": true, "sk-live-4f9a": true, "Password": true, "abcdefghijklmnopqrstuvwxyz": true, "s3cret": true} {
		if Secret(v) != want {
			t.Errorf("Secret(%q) = %v, want %v", v, !want, want)
		}
	}
	for name, want := range map[string]bool{"API_KEY": true, "GITHUB_TOKEN": true, "X-Api-Key": true, "Authorization": true, "DB_PASSWORD": true,
		"LOG_LEVEL": false, "HOME": false, "KEYBOARD": false, "MONKEY": false} {
		if SecretName(name) != want {
			t.Errorf("SecretName(%q) = %v, want %v", name, !want, want)
		}
	}
	r := NewScoped([]string{"nats-pw-123"}, map[string][]string{"a": {"a-secret-1"}, "b": {"b-secret-2", "info"}})
	msg := "a-secret-1 b-secret-2 nats-pw-123 /etc/information"
	for _, tc := range []struct {
		m    Masker
		want string
	}{
		{r, "REDACTED REDACTED REDACTED /etc/information"},
		{r.For("a"), "REDACTED b-secret-2 REDACTED /etc/information"},
		{r.For("b"), "a-secret-1 REDACTED REDACTED /etc/information"},
		{r.For("other"), "a-secret-1 b-secret-2 REDACTED /etc/information"},
	} {
		if got := tc.m.String(msg); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
	var c Current
	c.Set(r)
	if got := c.For("a").String(msg); got != "REDACTED b-secret-2 REDACTED /etc/information" {
		t.Errorf("Current.For: %q", got)
	}
}
