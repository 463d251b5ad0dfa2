package frontdoor

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// HTTPOptions configure [Door.Handler]; nil means the defaults.
type HTTPOptions struct {
	// Tokens maps the SHA-256 (hex) of each bearer token to the tenant whose clients
	// present it ("" the default tenant). Empty: no token is asked for, and every
	// client is the default tenant's — for a loopback address only.
	Tokens map[string]string
	// Origins are the further origins ("https://app.example") whose pages may call;
	// a request with an Origin header naming another host than its own is refused (403).
	Origins []string
	// MaxBodyBytes bounds a request's body (413 beyond); default 4 MiB.
	MaxBodyBytes int64
	// SessionTimeout closes a session idle that long; default 30 minutes.
	SessionTimeout time.Duration
}

// HashToken is the form a bearer token is kept in configuration: its SHA-256 in hex. A
// token is 192 random bits (console.NewToken's kind), so a plain hash cannot be
// reversed by guessing.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// Handler serves MCP's streamable HTTP: each request's Origin is checked, its token
// names its tenant (401 without a known one, when tokens are configured), its body is
// bounded, and each tools/call in it carries its JSON-RPC id to the door.
func (d *Door) Handler(o *HTTPOptions) http.Handler {
	var opts HTTPOptions
	if o != nil {
		opts = *o
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 4 << 20
	}
	if opts.SessionTimeout <= 0 {
		opts.SessionTimeout = 30 * time.Minute
	}
	// The events of the sessions' streams are kept (the go-sdk's store, in memory, 10
	// MiB at most, the oldest dropped first), so that a client whose stream broke while
	// this replica lives resumes it with Last-Event-ID and gets what it missed; a
	// stream of protocol 2025-11-25 begins with a priming event that names it.
	events := mcp.NewMemoryEventStore(nil)
	sdk := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		return d.Server(tenantOf(r.Context()))
	}, &mcp.StreamableHTTPOptions{SessionTimeout: opts.SessionTimeout, CrossOriginProtection: http.NewCrossOriginProtection(), Logger: d.o.Logger,
		EventStore: events})
	var h http.Handler = withRequestIDs(d.adoptSessions(sdk, opts.SessionTimeout, events), opts.MaxBodyBytes)
	if len(opts.Tokens) > 0 {
		tokens := opts.Tokens
		h = auth.RequireBearerToken(func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
			tenant, ok := tokens[HashToken(token)]
			if !ok {
				return nil, fmt.Errorf("%w: not a token of this front door", auth.ErrInvalidToken)
			}
			// The user id binds a session to its tenant: another tenant's token cannot
			// use it (the go-sdk answers 403).
			return &auth.TokenInfo{UserID: "tenant:" + tenant, Extra: map[string]any{tenantKey: tenant}}, nil
		}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
		h = challenge(h, tokens)
	}
	return checkOrigin(h, opts.Origins)
}

// challenge says, on the 401 that next gives a request without a token of tokens, how
// to authenticate (RFC 6750: WWW-Authenticate: Bearer), which the go-sdk's middleware
// leaves out without a resource metadata URL.
func challenge(next http.Handler, tokens map[string]string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if _, known := tokens[HashToken(token)]; !ok || !known {
			w.Header().Set("WWW-Authenticate", `Bearer realm="toolbus"`)
		}
		next.ServeHTTP(w, r)
	})
}

const tenantKey = "toolbus/tenant"

var errTooManySessions = errors.New("frontdoor: this replica serves as many sessions of other replicas as it may; try again")

// tenantOf is the tenant of the request's token ("" without one).
func tenantOf(ctx context.Context) string {
	if ti := auth.TokenInfoFromContext(ctx); ti != nil {
		if t, ok := ti.Extra[tenantKey].(string); ok {
			return t
		}
	}
	return ""
}

// checkOrigin refuses a request from a page of another origin than the server's own or
// those allowed (DNS rebinding, a page calling a local server).
func checkOrigin(next http.Handler, allowed []string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin != "" && !slices.Contains(allowed, origin) {
			u, err := url.Parse(origin)
			if err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
				http.Error(w, "a request from origin "+origin+": not this server's", http.StatusForbidden)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// withRequestIDs bounds a POST's body and puts the JSON-RPC id of each tools/call in it
// (a message, or a batch of them) in its _meta.
func withRequestIDs(next http.Handler, max int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
		if err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				http.Error(w, fmt.Sprintf("the request body is larger than %d bytes", max), http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		if rewritten, ok := markCalls(body); ok {
			body = rewritten
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		next.ServeHTTP(w, r)
	})
}

// markCalls returns body with each tools/call's id in its _meta, and whether it changed
// anything; a body that is not JSON-RPC is left for the SDK to refuse.
func markCalls(body []byte) ([]byte, bool) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return nil, false
	}
	if trimmed[0] == '[' {
		var batch []json.RawMessage
		if json.Unmarshal(trimmed, &batch) != nil {
			return nil, false
		}
		changed := false
		for i, m := range batch {
			if out, ok := markCall(m); ok {
				batch[i], changed = out, true
			}
		}
		if !changed {
			return nil, false
		}
		var b bytes.Buffer
		b.WriteByte('[')
		for i, m := range batch {
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(m)
		}
		b.WriteByte(']')
		return b.Bytes(), true
	}
	return markCall(trimmed)
}

func markCall(msg json.RawMessage) (json.RawMessage, bool) {
	members, err := object(msg)
	if err != nil {
		return nil, false
	}
	var method string
	id, hasID := members["id"]
	if !hasID || json.Unmarshal(members["method"], &method) != nil || method != "tools/call" {
		return nil, false
	}
	params, err := withRequestID(members["params"], id)
	if err != nil {
		return nil, false
	}
	members["params"] = params
	return writeObject(members), true
}
