package mcptest

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// OAuthServer is an MCP server protected by the go-sdk's own bearer-token middleware,
// and the authorization server it trusts, both on local ports: metadata discovery
// (RFC 9728 and RFC 8414), dynamic client registration, the authorization-code grant
// with PKCE (approved at once, as a user who clicks "allow"), and refresh tokens that
// rotate (a refresh token used twice is refused and counted). Its tool "whoami" answers
// the MCP session's id.
type OAuthServer struct {
	// URL is the MCP endpoint; Issuer the authorization server.
	URL, Issuer string
	// TokenLifetime is how long an access token lasts.
	TokenLifetime time.Duration
	// AssertionKey, when set, lets the client AssertionClient use the client
	// credentials grant, authenticated with an assertion this key verifies
	// (private_key_jwt: iss and sub the client, aud the issuer, a jti never seen).
	AssertionKey    crypto.PublicKey
	AssertionClient string
	jtis            map[string]bool

	mu       sync.Mutex
	codes    map[string]codeGrant
	access   map[string]time.Time // token → expiry
	refresh  map[string]bool      // token → still usable
	issued   []string             // every token handed out
	refreshN int
	reused   int
	refused  int
	revoked  bool
}

// Refused counts the MCP requests answered 401.
func (o *OAuthServer) Refused() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.refused
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

type codeGrant struct{ challenge, redirect string }

// NewOAuthServer starts both servers until the test ends.
func NewOAuthServer(t testing.TB, lifetime time.Duration) *OAuthServer {
	t.Helper()
	o := &OAuthServer{TokenLifetime: lifetime, codes: map[string]codeGrant{}, access: map[string]time.Time{}, refresh: map[string]bool{}}
	as := httptest.NewServer(http.HandlerFunc(o.authorization))
	t.Cleanup(as.Close)
	o.Issuer = as.URL

	srv := mcp.NewServer(&mcp.Implementation{Name: "secure", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "whoami", Description: "The MCP session's id."},
		func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, struct {
			Session string `json:"session"`
		}, error) {
			return nil, struct {
				Session string `json:"session"`
			}{req.Session.ID()}, nil
		})
	mux := http.NewServeMux()
	rs := httptest.NewServer(mux)
	t.Cleanup(rs.Close)
	o.URL = rs.URL + "/mcp"
	mux.Handle("/.well-known/oauth-protected-resource/mcp", auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource: o.URL, AuthorizationServers: []string{o.Issuer}, ScopesSupported: []string{"tools"},
	}))
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	protected := auth.RequireBearerToken(o.verify, &auth.RequireBearerTokenOptions{
		ResourceMetadataURL: rs.URL + "/.well-known/oauth-protected-resource/mcp",
	})(mcpHandler)
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		protected.ServeHTTP(sw, r)
		if sw.status == http.StatusUnauthorized {
			o.mu.Lock()
			o.refused++
			o.mu.Unlock()
		}
	})
	return o
}

func (o *OAuthServer) verify(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	exp, ok := o.access[token]
	if !ok || o.revoked {
		return nil, auth.ErrInvalidToken
	}
	return &auth.TokenInfo{Scopes: []string{"tools"}, Expiration: exp}, nil
}

// Revoke invalidates every token handed out so far, access and refresh alike.
func (o *OAuthServer) Revoke() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.revoked = true
}

// Refreshes counts the refresh grants answered; Reused the refresh tokens presented
// a second time.
func (o *OAuthServer) Refreshes() (answered, reused int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.refreshN, o.reused
}

// Issued returns every access and refresh token handed out.
func (o *OAuthServer) Issued() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.issued...)
}

func random() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (o *OAuthServer) authorization(w http.ResponseWriter, r *http.Request) {
	writeJSON := func(code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
	switch r.URL.Path {
	case "/.well-known/oauth-authorization-server":
		writeJSON(200, map[string]any{
			"issuer": o.Issuer, "authorization_endpoint": o.Issuer + "/authorize", "token_endpoint": o.Issuer + "/token",
			"registration_endpoint": o.Issuer + "/register", "response_types_supported": []string{"code"},
			"grant_types_supported": []string{"authorization_code", "refresh_token"}, "code_challenge_methods_supported": []string{"S256"},
			"token_endpoint_auth_methods_supported": []string{"none", "client_secret_basic", "client_secret_post"},
		})
	case "/register":
		var m map[string]any
		_ = json.NewDecoder(r.Body).Decode(&m)
		m["client_id"] = "client-" + random()
		m["token_endpoint_auth_method"] = "none"
		writeJSON(201, m)
	case "/authorize":
		q := r.URL.Query()
		if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" {
			http.Error(w, "PKCE S256 required", 400)
			return
		}
		code := random()
		o.mu.Lock()
		o.codes[code] = codeGrant{challenge: q.Get("code_challenge"), redirect: q.Get("redirect_uri")}
		o.mu.Unlock()
		to, err := url.Parse(q.Get("redirect_uri"))
		if err != nil {
			http.Error(w, "bad redirect_uri", 400)
			return
		}
		v := to.Query()
		v.Set("code", code)
		v.Set("state", q.Get("state"))
		to.RawQuery = v.Encode()
		http.Redirect(w, r, to.String(), http.StatusFound)
	case "/token":
		_ = r.ParseForm()
		o.mu.Lock()
		defer o.mu.Unlock()
		switch r.PostForm.Get("grant_type") {
		case "authorization_code":
			g, ok := o.codes[r.PostForm.Get("code")]
			sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
			if !ok || base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge {
				writeJSON(400, map[string]string{"error": "invalid_grant"})
				return
			}
			delete(o.codes, r.PostForm.Get("code"))
		case "refresh_token":
			rt := r.PostForm.Get("refresh_token")
			usable, known := o.refresh[rt]
			if known && !usable {
				o.reused++
			}
			if !usable || o.revoked {
				writeJSON(400, map[string]string{"error": "invalid_grant"})
				return
			}
			o.refresh[rt] = false
			o.refreshN++
		case "client_credentials":
			if err := o.checkAssertion(r.PostForm); err != nil {
				writeJSON(401, map[string]string{"error": "invalid_client", "error_description": err.Error()})
				return
			}
		default:
			writeJSON(400, map[string]string{"error": "unsupported_grant_type"})
			return
		}
		access, refresh := "at-"+random(), "rt-"+random()
		o.access[access] = time.Now().Add(o.TokenLifetime)
		o.refresh[refresh] = true
		o.issued = append(o.issued, access, refresh)
		writeJSON(200, map[string]any{
			"access_token": access, "token_type": "Bearer", "refresh_token": refresh,
			"expires_in": int(o.TokenLifetime.Seconds()), "scope": "tools",
		})
	default:
		http.NotFound(w, r)
	}
}

// checkAssertion verifies a private_key_jwt client assertion; o.mu is held.
func (o *OAuthServer) checkAssertion(form url.Values) error {
	if o.AssertionKey == nil {
		return errors.New("no client may use client credentials")
	}
	if form.Get("client_assertion_type") != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer" {
		return errors.New("client_assertion_type")
	}
	var claims jwt.RegisteredClaims
	_, err := jwt.ParseWithClaims(form.Get("client_assertion"), &claims, func(*jwt.Token) (any, error) { return o.AssertionKey, nil },
		jwt.WithAudience(o.Issuer), jwt.WithIssuer(o.AssertionClient), jwt.WithSubject(o.AssertionClient), jwt.WithExpirationRequired(), jwt.WithIssuedAt())
	if err != nil {
		return err
	}
	if claims.ID == "" || o.jtis[claims.ID] {
		return errors.New("jti missing or replayed")
	}
	if o.jtis == nil {
		o.jtis = map[string]bool{}
	}
	o.jtis[claims.ID] = true
	return nil
}

// FollowLogin is a browser for a test: it reads what toolbus prints, and opens the
// authorization URL it prints (following the redirect to toolbus's callback), as a
// user who approves. Use it as the Stderr of `toolbus auth login`.
type FollowLogin struct {
	// Paste, when set, gets the URL the authorization server redirects to, as a user
	// pastes it when the callback cannot be reached; the redirect is not followed.
	Paste io.Writer

	mu     sync.Mutex
	buf    strings.Builder
	Opened int
}

func (f *FollowLogin) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.buf.Write(p)
	for _, line := range strings.Split(string(p), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "http") && strings.Contains(line, "/authorize?") {
			f.Opened++
			paste := f.Paste
			go func() {
				c := &http.Client{}
				if paste != nil {
					c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
				}
				resp, err := c.Get(line)
				if err != nil {
					return
				}
				resp.Body.Close()
				if paste != nil {
					fmt.Fprintln(paste, resp.Header.Get("Location"))
				}
			}()
		}
	}
	return len(p), nil
}

func (f *FollowLogin) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.buf.String()
}
