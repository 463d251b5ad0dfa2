package console

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/policy"
)

//go:embed web
var web embed.FS

// Handler serves the page and the API:
//
//	GET  /api/flow                 Flow: the stages' queues
//	GET  /api/events               the Flow every second, as server-sent events ("flow")
//	GET  /api/servers              every server's last status
//	GET  /api/tools                the catalog, with each tool's declarations
//	GET  /api/calls?tenant=&conversation=&response=&tool=&server=&outcome=ok|failed&since=&until=&cursor=&limit=
//	                               a page of calls, newest first (CallPage; FindCalls)
//	GET  /api/stats?tenant=&conversation=&since=&until=
//	                               each tool's calls, error rate, p50 and p99 (ToolStats)
//	GET  /api/dead?tenant=&conversation=&tool=&server=&since=&until=&cursor=&limit=
//	                               a page of dead letters, newest first, each with its
//	                               newest redrive and its output (DeadLetters)
//	POST /api/dead/redrive         {"seq": N, "force": false}: send a dead letter's call
//	                               again, its new output; 409 when it was redriven before
//	                               and force is not true
//	GET  /api/approvals?all=       the calls waiting for a person's approval, oldest
//	                               first; with all, the decided ones kept too
//	POST /api/approvals/decide     {"id", "decision": "approve"|"deny", "reason", "arguments_sha256"}: decide
//	                               one, as "console"; 409 when it was decided before
//	POST /api/try                  {"conversation", "text"}: the output of that response
//
// since and until are RFC 3339 times or durations before now ("1h"); cursor is a page's
// next. A filter the console cannot read is answered 400.
//
// Every request passes guard first, which answers for itself when it refuses one:
//
//   - Its Host must be one the console is served on (421): the address the connection
//     came to, localhost, 127.0.0.1 or [::1] with its port when that is a loopback
//     address, or one of hosts ("name" on any port, "name:port"; a console behind a
//     proxy, the name of a host listening on every interface). A page of another site
//     that a DNS name made point at the console (DNS rebinding) is refused on every path.
//   - Its Origin, when there is one, must be the console's own: the Host it came with,
//     or one of hosts (403).
//   - Under /api/, it must carry token as "Authorization: Bearer TOKEN" (401): never in
//     the query string, nor in a cookie, which a browser adds to other sites' requests.
//     Fetch metadata saying another site sent it is refused (403).
//   - A request that changes something (any method but GET and HEAD) must be
//     application/json (415), which no form and no cross-site "simple" request can be.
//
// The page and its script and style need no token: the page takes it once from its URL
// (?token=…, as toolbus prints it), keeps it in the tab's sessionStorage and sends it
// on every API request. Every response carries a Content-Security-Policy allowing only
// the console's own script, style and API, and refuses framing.
//
// A token "" serves the API without authentication, the other checks kept: only a
// throwaway console in a test should; toolbus serve, toolbus console
// and toolbus bench always have one (NewToken).
func (c *Console) Handler(token string, hosts ...string) http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(web, "web")
	mux.Handle("GET /", http.FileServerFS(static))
	get := func(path string, f func(r *http.Request) (any, error)) {
		mux.HandleFunc("GET "+path, func(w http.ResponseWriter, r *http.Request) { reply(w, r, f) })
	}
	get("/api/flow", func(r *http.Request) (any, error) { return c.Flow(r.Context()) })
	get("/api/servers", func(r *http.Request) (any, error) { return c.Servers(r.Context()) })
	get("/api/tools", func(r *http.Request) (any, error) { return c.Tools(r.Context()) })
	get("/api/calls", func(r *http.Request) (any, error) {
		q, p, err := query(r)
		if err != nil {
			return nil, err
		}
		return c.FindCalls(r.Context(), CallFilter{Tenant: q.Get("tenant"), Conversation: q.Get("conversation"), Response: q.Get("response"),
			Tool: q.Get("tool"), Server: q.Get("server"), Outcome: q.Get("outcome"), Since: p.since, Until: p.until, Cursor: p.cursor, Limit: p.limit})
	})
	get("/api/stats", func(r *http.Request) (any, error) {
		q, p, err := query(r)
		if err != nil {
			return nil, err
		}
		return c.ToolStats(r.Context(), StatsFilter{Tenant: q.Get("tenant"), Conversation: q.Get("conversation"), Since: p.since, Until: p.until})
	})
	get("/api/dead", func(r *http.Request) (any, error) {
		q, p, err := query(r)
		if err != nil {
			return nil, err
		}
		return c.DeadLetters(r.Context(), DeadFilter{Tenant: q.Get("tenant"), Conversation: q.Get("conversation"), Tool: q.Get("tool"),
			Server: q.Get("server"), Since: p.since, Until: p.until, Cursor: p.cursor, Limit: p.limit})
	})
	mux.HandleFunc("POST /api/dead/redrive", func(w http.ResponseWriter, r *http.Request) {
		reply(w, r, func(r *http.Request) (any, error) {
			var in struct {
				Seq   uint64 `json:"seq"`
				Force bool   `json:"force"`
			}
			if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&in); err != nil && err != io.EOF {
				return nil, badRequest{fmt.Errorf("want {\"seq\": N, \"force\": false}: %w", err)}
			}
			q := r.URL.Query() // seq and force may also come in the query
			if q.Has("seq") {
				seq, err := strconv.ParseUint(q.Get("seq"), 10, 64)
				if err != nil {
					return nil, badRequest{errors.New("seq: the dead letter's sequence number")}
				}
				in.Seq = seq
			}
			if q.Has("force") {
				force, err := strconv.ParseBool(q.Get("force"))
				if err != nil {
					return nil, badRequest{errors.New("force: true or false")}
				}
				in.Force = force
			}
			if in.Seq == 0 {
				return nil, badRequest{errors.New("seq: the dead letter's sequence number")}
			}
			ctx, cancel := context.WithTimeout(r.Context(), 2*time.Minute)
			defer cancel()
			redrive := c.Redrive
			if in.Force {
				redrive = c.ForceRedrive
			}
			out, err := redrive(ctx, in.Seq)
			if errors.Is(err, ErrNotRedrivable) {
				return nil, badRequest{err}
			}
			return out, err
		})
	})
	get("/api/approvals", func(r *http.Request) (any, error) {
		return c.Approvals(r.Context(), r.URL.Query().Get("all") != "")
	})
	mux.HandleFunc("POST /api/approvals/decide", func(w http.ResponseWriter, r *http.Request) {
		reply(w, r, func(r *http.Request) (any, error) {
			var in struct {
				ID       string `json:"id"`
				Decision string `json:"decision"`
				Reason   string `json:"reason"`
				SHA256   string `json:"arguments_sha256"`
			}
			if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&in); err != nil || in.ID == "" || (in.Decision != "approve" && in.Decision != "deny") {
				return nil, badRequest{fmt.Errorf("want {\"id\": ID, \"decision\": \"approve\" or \"deny\", \"reason\": TEXT, \"arguments_sha256\": the digest shown}")}
			}
			return c.Decide(r.Context(), in.ID, in.Decision == "approve", in.Reason, in.SHA256)
		})
	})
	mux.HandleFunc("POST /api/try", func(w http.ResponseWriter, r *http.Request) {
		reply(w, r, func(r *http.Request) (any, error) {
			var in struct{ Conversation, Text string }
			if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&in); err != nil {
				return nil, badRequest{fmt.Errorf("want {\"conversation\", \"text\"}: %w", err)}
			}
			if in.Conversation == "" {
				in.Conversation = "console"
			}
			if err := messages.ValidateConversation(in.Conversation); err != nil {
				return nil, badRequest{err}
			}
			ctx, cancel := context.WithTimeout(r.Context(), 2*time.Minute)
			defer cancel()
			return c.Client.Ask(ctx, in.Conversation, in.Text, nil)
		})
	})
	mux.HandleFunc("GET /api/events", c.events)
	g := &guard{token: token, next: mux}
	for _, h := range hosts {
		if h = strings.TrimSpace(h); h != "" {
			g.hosts = append(g.hosts, parseHost(h, ""))
		}
	}
	return g
}

// ContentSecurityPolicy is the policy of every response: the console's own script,
// style, images and API (fetch), nothing inline, no plugin, no framing, forms only to
// itself.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// NewToken returns a random token (192 bits, hex).
func NewToken() string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail
	}
	return hex.EncodeToString(b)
}

// ValidToken says why a configured token cannot be used (nil when it can): it goes in a
// URL and an HTTP header, and must not be guessed.
func ValidToken(token string) error {
	if len(token) < 16 {
		return errors.New("shorter than 16 characters")
	}
	for _, r := range token {
		if r <= ' ' || r > '~' {
			return errors.New("only printable ASCII without spaces")
		}
	}
	return nil
}

// guard checks every request before the console's handlers see it (see Handler).
type guard struct {
	token string
	hosts []hostPort // given names
	next  http.Handler
}

type hostPort struct{ host, port string }

// parseHost splits "name", "name:port", "[v6]" or "[v6]:port", lower case, without
// brackets; port is def when none is given.
func parseHost(s, def string) hostPort {
	s = strings.ToLower(s)
	if h, p, err := net.SplitHostPort(s); err == nil {
		return hostPort{h, p}
	}
	return hostPort{strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"), def}
}

func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	api := strings.HasPrefix(r.URL.Path, "/api/")
	if api {
		h.Set("Cache-Control", "no-store")
	}
	if !g.servedOn(r) {
		refuse(w, api, http.StatusMisdirectedRequest, fmt.Sprintf("the console is not served on host %q (toolbus serve/console --console-host adds a name)", r.Host))
		return
	}
	if origin := r.Header.Get("Origin"); origin != "" && !g.sameOrigin(origin, r) {
		refuse(w, api, http.StatusForbidden, fmt.Sprintf("a request from %s: the console answers only its own page", origin))
		return
	}
	if api {
		if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
			refuse(w, api, http.StatusForbidden, "a request from another site ("+site+"): the console answers only its own page")
			return
		}
		if g.token != "" && !g.bearer(r) {
			h.Set("WWW-Authenticate", `Bearer realm="toolbus console"`)
			refuse(w, api, http.StatusUnauthorized, "the console's token is required (Authorization: Bearer TOKEN): open the URL toolbus printed (…/?token=…)")
			return
		}
	} else if q := r.URL.Query(); g.token != "" && q.Has("token") && subtle.ConstantTimeCompare([]byte(q.Get("token")), []byte(g.token)) != 1 {
		refuse(w, api, http.StatusUnauthorized, "this is not the console's token: open the URL toolbus printed (…/?token=…)")
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
			refuse(w, api, http.StatusUnsupportedMediaType, "a request that changes something must be application/json")
			return
		}
	}
	g.next.ServeHTTP(w, r)
}

// servedOn reports whether r's Host is one the console is served on.
func (g *guard) servedOn(r *http.Request) bool {
	def := "80"
	if r.TLS != nil {
		def = "443"
	}
	host := parseHost(r.Host, def)
	for _, h := range g.hosts {
		if h.host == host.host && (h.port == "" || h.port == host.port) {
			return true
		}
	}
	local, ok := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr)
	if !ok || strconv.Itoa(local.Port) != host.port {
		return false
	}
	ip := net.ParseIP(host.host)
	if ip != nil && ip.Equal(local.IP) {
		return true
	}
	return local.IP.IsLoopback() && (host.host == "localhost" || ip != nil && ip.IsLoopback())
}

// sameOrigin reports whether origin is the console's own: its host is r's Host (which
// servedOn accepted), or one of the given names.
func (g *guard) sameOrigin(origin string, r *http.Request) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.Path != "" && u.Path != "/" {
		return false // "null" too: a sandboxed frame, a file, a redirect across sites
	}
	if strings.EqualFold(u.Host, r.Host) {
		return true
	}
	def := "80"
	if u.Scheme == "https" {
		def = "443"
	}
	o := parseHost(u.Host, def)
	for _, h := range g.hosts {
		if h.host == o.host && (h.port == "" || h.port == o.port) {
			return true
		}
	}
	return false
}

// bearer reports whether r carries the token as "Authorization: Bearer TOKEN".
func (g *guard) bearer(r *http.Request) bool {
	scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	return ok && strings.EqualFold(scheme, "Bearer") && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(g.token)) == 1
}

// refuse answers a request the guard refuses: JSON under /api/, as the handlers do;
// text elsewhere.
func refuse(w http.ResponseWriter, api bool, code int, msg string) {
	if !api {
		http.Error(w, msg, code)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// events streams the flow every second while the page is open.
func (c *Console) events(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	defer c.Watch()()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		f, err := c.Flow(ctx)
		cancel()
		if err == nil {
			b, _ := json.Marshal(f)
			fmt.Fprintf(w, "event: flow\ndata: %s\n\n", b)
			flusher.Flush()
		}
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
	}
}

type badRequest struct{ error }

// pageParams are a list's query parameters that are not text.
type pageParams struct {
	since, until time.Time
	cursor       uint64
	limit        int
}

// query reads a list's query parameters: since and until (RFC 3339, or a duration
// before now), cursor and limit.
func query(r *http.Request) (url.Values, pageParams, error) {
	q, p := r.URL.Query(), pageParams{}
	now := time.Now()
	for name, t := range map[string]*time.Time{"since": &p.since, "until": &p.until} {
		v := q.Get(name)
		if v == "" {
			continue
		}
		if d, err := time.ParseDuration(v); err == nil && d >= 0 {
			*t = now.Add(-d)
		} else if *t, err = time.Parse(time.RFC3339, v); err != nil {
			return q, p, badRequest{fmt.Errorf("%s: a time (RFC 3339) or a duration before now (1h)", name)}
		}
	}
	var err error
	if v := q.Get("cursor"); v != "" {
		if p.cursor, err = strconv.ParseUint(v, 10, 64); err != nil {
			return q, p, badRequest{errors.New("cursor: a page's next")}
		}
	}
	if v := q.Get("limit"); v != "" {
		if p.limit, err = strconv.Atoi(v); err != nil || p.limit < 1 || p.limit > 1000 {
			return q, p, badRequest{errors.New("limit: 1 to 1000")}
		}
	}
	return q, p, nil
}

func reply(w http.ResponseWriter, r *http.Request, f func(*http.Request) (any, error)) {
	v, err := f(r)
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		code := http.StatusInternalServerError
		body := map[string]any{"error": err.Error()}
		var bad badRequest
		var redriven *RedrivenError
		switch {
		case errors.As(err, &bad), errors.Is(err, ErrFilter):
			code = http.StatusBadRequest
		case errors.As(err, &redriven):
			code, body["redriven"] = http.StatusConflict, redriven
		case errors.Is(err, policy.ErrDecided):
			code = http.StatusConflict
		case errors.Is(err, policy.ErrNoApproval):
			code = http.StatusNotFound
		}
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(body)
		return
	}
	json.NewEncoder(w).Encode(v)
}

// Local reports whether addr (host:port) binds to the loopback interface only.
func Local(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
