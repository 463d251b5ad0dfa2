// Package redact hides secrets in text that leaves toolbus: logs, the health bucket and
// `toolbus health`, error messages a model reads, span attributes. One rule, used
// everywhere:
//
//   - every secret the configuration holds is replaced by REDACTED wherever it appears:
//     the values that came from ${VAR}, the userinfo, query values and header values of
//     configured URLs, the env values of stdio servers, the NATS URLs' passwords;
//   - in any URL in the text, configured or not, the password of its userinfo and the
//     values of its query are replaced by REDACTED; a text that looks like a URL but does
//     not parse is replaced whole.
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

// minSecret is the shortest value treated as a secret: shorter ones ("1", "on") would
// mask ordinary words.
const minSecret = 4

// Redactor hides a set of secrets and the secrets of any URL. The zero value and nil
// hide only the latter.
type Redactor struct {
	secrets []string // longest first, so that a secret containing another is masked whole
}

// New returns a redactor of secrets (short or empty ones are ignored).
func New(secrets ...string) *Redactor {
	r := &Redactor{}
	for _, s := range secrets {
		if len(s) >= minSecret && !slices.Contains(r.secrets, s) {
			r.secrets = append(r.secrets, s)
		}
	}
	slices.SortFunc(r.secrets, func(a, b string) int { return len(b) - len(a) })
	return r
}

// URLSecrets are the secrets of a URL: its userinfo password (and user name when there
// is a password) and its query values.
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
	for _, vs := range u.Query() {
		out = append(out, vs...)
	}
	return out
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
		q := u.Query()
		for k := range q {
			q[k] = []string{Mask}
		}
		u.RawQuery = q.Encode()
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
