// Package redact hides secrets in text that leaves toolbus: logs, the health bucket and
// `toolbus health`, `toolbus tools` and the other commands' output, the console, error
// messages a model reads, span attributes. One rule, used everywhere:
//
//   - every secret the configuration holds is replaced by REDACTED wherever it appears:
//     the values that came from ${VAR}, the userinfo, query values and header values of
//     configured URLs, the values of stdio servers' env entries named like a secret
//     (SecretName), the NATS URLs' passwords — each only if it could not be part of
//     ordinary text (Secret: 6 bytes or more, not a plain word); a server's own secrets
//     are masked in its messages (For), and in text of unknown source (String);
//   - in any URL in the text, configured or not, the password of its userinfo and the
//     query values that may be secrets (SecretQuery) are replaced by REDACTED, so that
//     the scheme, host, port and path still say where a request went; a text that looks
//     like a URL but does not parse is replaced whole. A configured URL's token-like
//     path segments (a key in the path, TokenLike) are among the configuration's
//     secrets (URLSecrets).
package redact

import (
	"context"
	"log/slog"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
)

// Mask is what a secret is replaced by.
const Mask = "REDACTED"

// A value is a secret only if it could not be part of ordinary text: at least minSecret
// bytes, and not a plain word. Shorter or plain values ("info", "production", "on")
// would mask pieces of ordinary words: LOG_LEVEL=info must leave /etc/information alone.
const (
	minSecret = 6
	// minWordLike is the length from which even a value of letters of one case is a
	// secret: a long run of letters is more likely a key than a word.
	minWordLike = 24
)

// Secret reports whether v is worth masking wherever it appears (see minSecret): at
// least 6 bytes, and not a plain word (letters of one case, '-' or '_' only) shorter
// than 24.
func Secret(v string) bool {
	if len(v) < minSecret {
		return false
	}
	if len(v) >= minWordLike {
		return true
	}
	lower, upper, other := false, false, false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c >= 'a' && c <= 'z':
			lower = true
		case c >= 'A' && c <= 'Z':
			upper = true
		case c == '-' || c == '_':
		default:
			other = true
		}
	}
	return other || lower && upper
}

// SecretName reports whether an environment variable or header called name holds a
// secret by its name: KEY, TOKEN, SECRET, PASSWORD, PASS, PASSWD, CREDENTIAL(S), AUTH,
// PRIVATE, SESSION, COOKIE, SIGNATURE, DSN among its words (API_KEY, GITHUB_TOKEN,
// X-Api-Key, Authorization).
func SecretName(name string) bool {
	n := strings.ToUpper(name)
	if strings.Contains(n, "AUTHORIZATION") {
		return true
	}
	for _, w := range strings.FieldsFunc(n, func(r rune) bool { return r == '_' || r == '-' || r == '.' }) {
		switch w {
		case "KEY", "APIKEY", "TOKEN", "SECRET", "PASSWORD", "PASS", "PASSWD", "PWD", "CREDENTIAL", "CREDENTIALS",
			"AUTH", "PRIVATE", "SESSION", "COOKIE", "SIGNATURE", "DSN", "ACCESSKEY", "SECRETKEY":
			return true
		}
	}
	return false
}

// Redactor hides a set of secrets and the secrets of any URL. Some secrets belong to
// one source (a server's env and headers): String masks them everywhere, For(source)
// only in that source's messages and the shared secrets. The zero value and nil hide
// only the secrets of URLs.
type Redactor struct {
	secrets []string            // longest first, so that a secret containing another is masked whole
	shared  []string            // the secrets of no source
	scoped  map[string][]string // source → its own secrets
}

// New returns a redactor of secrets (those Secret rejects are ignored).
func New(secrets ...string) *Redactor { return NewScoped(secrets, nil) }

// NewScoped returns a redactor of shared secrets and of each source's own (those Secret
// rejects are ignored).
func NewScoped(shared []string, scoped map[string][]string) *Redactor {
	r := &Redactor{shared: keep(shared)}
	all := slices.Clone(shared)
	for source, secrets := range scoped {
		if k := keep(append(slices.Clone(secrets), shared...)); len(k) > 0 {
			if r.scoped == nil {
				r.scoped = map[string][]string{}
			}
			r.scoped[source] = k
		}
		all = append(all, secrets...)
	}
	r.secrets = keep(all)
	return r
}

// keep returns the secrets worth masking, each once, longest first.
func keep(secrets []string) []string {
	var out []string
	for _, s := range secrets {
		if Secret(s) && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// For returns the masker of the messages of source (a server): the shared secrets and
// source's own, not another source's.
func (r *Redactor) For(source string) Masker {
	if r == nil {
		return r
	}
	if s, ok := r.scoped[source]; ok {
		return &Redactor{secrets: s}
	}
	return &Redactor{secrets: r.shared}
}

// URLSecrets are the secrets of a URL: its userinfo password, its query values that
// may be secrets (SecretQuery) and its token-like path segments (TokenLike: a key some
// services put in the path). Its scheme, host, port and the rest of its path are not:
// an error may say where it failed to connect.
func URLSecrets(raw string) []string {
	u, err := url.Parse(raw)
	if err != nil {
		return nil
	}
	var out []string
	if u.User != nil {
		if p, ok := u.User.Password(); ok {
			out = append(out, p)
		}
	}
	for k, vs := range u.Query() {
		for _, v := range vs {
			if SecretQuery(k, v) {
				out = append(out, v)
			}
		}
	}
	for _, seg := range strings.Split(u.Path, "/") {
		if TokenLike(seg) {
			out = append(out, seg)
		}
	}
	return out
}

// SecretQuery reports whether a URL's query value may be a secret: its key is named like
// one (SecretName, or sig, code, state, jwt, pw), or the value could not be ordinary
// text (Secret). "v=2" and "format=json" are not.
func SecretQuery(key, value string) bool {
	if SecretName(key) {
		return true
	}
	switch strings.ToLower(key) {
	case "sig", "code", "state", "jwt", "pw":
		return true
	}
	return Secret(value)
}

// TokenLike reports whether a URL's path segment reads as a key rather than a name: 16
// bytes or more of letters, digits, '-', '_', '.' and '~', with both letters and digits.
func TokenLike(seg string) bool {
	if len(seg) < 16 {
		return false
	}
	letters, digits := false, false
	for i := 0; i < len(seg); i++ {
		switch c := seg[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
			letters = true
		case c >= '0' && c <= '9':
			digits = true
		case c == '-' || c == '_' || c == '.' || c == '~':
		default:
			return false
		}
	}
	return letters && digits
}

// urlLike matches what may be a URL in free text.
var urlLike = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>]+`)

// String returns s with every secret masked.
func (r *Redactor) String(s string) string {
	if r != nil {
		for _, secret := range r.secrets {
			if strings.Contains(s, secret) {
				s = strings.ReplaceAll(s, secret, Mask)
			}
		}
	}
	if !strings.Contains(s, "://") {
		return s
	}
	return urlLike.ReplaceAllStringFunc(s, redactURL)
}

func redactURL(raw string) string {
	trail := ""
	for strings.HasSuffix(raw, ")") || strings.HasSuffix(raw, ",") || strings.HasSuffix(raw, ".") || strings.HasSuffix(raw, ":") {
		trail, raw = raw[len(raw)-1:]+trail, raw[:len(raw)-1]
	}
	u, err := url.Parse(raw)
	if err != nil {
		return Mask + trail
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), Mask)
		}
	}
	if u.RawQuery != "" {
		q, masked := u.Query(), false
		for k, vs := range q {
			for i, v := range vs {
				if SecretQuery(k, v) {
					vs[i], masked = Mask, true
				}
			}
		}
		if masked {
			u.RawQuery = q.Encode()
		}
	}
	return u.String() + trail
}

// Masker masks text: a [*Redactor] or a [*Current].
type Masker interface{ String(s string) string }

// Handler returns a slog handler that masks the message and every string, error and
// stringer attribute of each record before h sees it.
func Handler(h slog.Handler, r Masker) slog.Handler { return &handler{h: h, r: r} }

type handler struct {
	h slog.Handler
	r Masker
}

func (x *handler) Enabled(ctx context.Context, l slog.Level) bool { return x.h.Enabled(ctx, l) }

func (x *handler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, x.r.String(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(x.attr(a))
		return true
	})
	return x.h.Handle(ctx, out)
}

func (x *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	masked := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		masked[i] = x.attr(a)
	}
	return &handler{h: x.h.WithAttrs(masked), r: x.r}
}

func (x *handler) WithGroup(name string) slog.Handler {
	return &handler{h: x.h.WithGroup(name), r: x.r}
}

func (x *handler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, x.r.String(v.String()))
	case slog.KindGroup:
		group := v.Group()
		masked := make([]any, len(group))
		for i, g := range group {
			masked[i] = x.attr(g)
		}
		return slog.Group(a.Key, masked...)
	case slog.KindAny:
		switch any := v.Any().(type) {
		case error:
			return slog.String(a.Key, x.r.String(any.Error()))
		case interface{ String() string }:
			return slog.String(a.Key, x.r.String(any.String()))
		}
	}
	return a
}

// Current is a redactor that can be replaced while in use (a configuration reload brings
// new secrets). The zero value hides only URL secrets until Set.
type Current struct{ p atomic.Pointer[Redactor] }

// Set replaces the redactor.
func (c *Current) Set(r *Redactor) { c.p.Store(r) }

// String masks s with the current redactor.
func (c *Current) String(s string) string {
	if c == nil {
		return (*Redactor)(nil).String(s)
	}
	return c.p.Load().String(s)
}

// For masks the messages of source with the current redactor (Redactor.For).
func (c *Current) For(source string) Masker {
	if c == nil {
		return (*Redactor)(nil)
	}
	return c.p.Load().For(source)
}
