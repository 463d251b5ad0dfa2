// Package oauth authorizes toolbus with the http MCP servers that require OAuth: a
// server's "oauth" entry ([Config], as Claude Code writes it), the authorization-code
// login whose grant every replica shares through a [TokenStore] and refreshes one at a
// time, and the client credentials grant (a secret, or a signed private_key_jwt
// assertion). pkg/mcpwire's sessions authorize their requests with [NewHandler].
package oauth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/auth/extauth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
)

// Config is a server's "oauth" entry, as Claude Code writes it ("clientId",
// "callbackPort") and with what a gateway needs beyond that.
type Config struct {
	// ClientID and ClientSecret name a client registered with the server's
	// authorization server beforehand. Without them, toolbus registers itself (a client
	// ID metadata document when ClientMetadataURL is set, else dynamic registration).
	ClientID     string `json:"clientId,omitempty"`
	ClientSecret string `json:"clientSecret,omitempty"` // write it as ${VAR}
	// Grant is the OAuth grant toolbus uses: "authorization_code" (the default: a
	// user's login, once, with `toolbus auth login SERVER`; refreshed from then on) or
	// "client_credentials" (machine to machine: ClientID and ClientSecret, no login).
	Grant string `json:"grant,omitempty"`
	// Scopes requested at login; default: those the server's challenge or its
	// protected resource metadata names.
	Scopes []string `json:"scopes,omitempty"`
	// CallbackPort is the local port of the login's redirect
	// (http://127.0.0.1:PORT/callback); default: a free one. A pre-registered client
	// usually names its redirect, hence its port.
	CallbackPort int `json:"callbackPort,omitempty"`
	// ClientMetadataURL is the https URL of toolbus's client ID metadata document,
	// when the operator hosts one.
	ClientMetadataURL string `json:"clientMetadataUrl,omitempty"`
	// PrivateKey (PEM, written as ${VAR}) or PrivateKeyFile authenticates the client
	// credentials grant with a signed assertion (private_key_jwt) instead of a secret;
	// SigningAlgorithm defaults to the key's (ES256, RS256, EdDSA).
	PrivateKey       string `json:"privateKey,omitempty"`
	PrivateKeyFile   string `json:"privateKeyFile,omitempty"`
	SigningAlgorithm string `json:"signingAlgorithm,omitempty"`
}

// OAuth grants an "oauth" entry names.
const (
	GrantAuthorizationCode = "authorization_code"
	GrantClientCredentials = "client_credentials"
)

// GrantType is the entry's grant, the default filled in.
func (o *Config) GrantType() string {
	if o == nil || o.Grant == "" {
		return GrantAuthorizationCode
	}
	return o.Grant
}

// Validate says what is wrong with the entry, naming the key ("oauth.clientId").
func (o *Config) Validate() error {
	switch {
	case o.GrantType() != GrantAuthorizationCode && o.GrantType() != GrantClientCredentials:
		return fmt.Errorf("oauth.grant: %q is not a grant toolbus uses (want %q or %q)", o.Grant, GrantAuthorizationCode, GrantClientCredentials)
	case o.GrantType() == GrantClientCredentials && o.ClientID == "":
		return fmt.Errorf("oauth.clientId: the client credentials grant needs the client's id")
	case o.GrantType() == GrantClientCredentials && o.ClientSecret == "" && o.PrivateKey == "" && o.PrivateKeyFile == "":
		return fmt.Errorf("oauth.clientSecret: the client credentials grant needs the client's secret, or its privateKey or privateKeyFile (private_key_jwt)")
	case (o.ClientSecret != "" && (o.PrivateKey != "" || o.PrivateKeyFile != "")) || (o.PrivateKey != "" && o.PrivateKeyFile != ""):
		return fmt.Errorf("oauth: one of clientSecret, privateKey and privateKeyFile authenticates the client, not several")
	case o.GrantType() != GrantClientCredentials && (o.PrivateKey != "" || o.PrivateKeyFile != ""):
		return fmt.Errorf("oauth.privateKey: a private key authenticates the client credentials grant only (\"grant\": %q)", GrantClientCredentials)
	case o.ClientSecret != "" && o.ClientID == "":
		return fmt.Errorf("oauth.clientSecret: a secret needs the client's id (clientId)")
	case o.CallbackPort < 0 || o.CallbackPort > 65535:
		return fmt.Errorf("oauth.callbackPort: %d is not a port", o.CallbackPort)
	case o.ClientMetadataURL != "" && !httpsWithPath(o.ClientMetadataURL):
		return fmt.Errorf("oauth.clientMetadataUrl: %q must be an https URL with a path", o.ClientMetadataURL)
	}
	return nil
}

// ErrNeedsLogin: the server requires an OAuth authorization that nobody has given yet,
// or that was revoked or no longer refreshes. Trying again changes nothing until a
// user logs in (`toolbus auth login SERVER`); a [NeedsLoginError] says why.
var ErrNeedsLogin = errors.New("needs login")

// NeedsLoginError is a server's refusal that only a login can lift.
type NeedsLoginError struct {
	Server string
	Reason string
}

func (e *NeedsLoginError) Error() string {
	return fmt.Sprintf("%s %s: %s", e.Server, ErrNeedsLogin, e.Reason)
}

// Is makes errors.Is(err, ErrNeedsLogin) hold.
func (e *NeedsLoginError) Is(target error) bool { return target == ErrNeedsLogin }

// Grant is what an authorization-code login leaves for every replica: the token, and
// what refreshing it needs (the client and the token endpoint), so that no replica
// repeats the discovery or the registration.
type Grant struct {
	// URL is the server's URL the grant was given for: a grant is used for that URL
	// only, so that a configuration pointing the name elsewhere never sends it there.
	URL          string           `json:"url"`
	ClientID     string           `json:"client_id"`
	ClientSecret string           `json:"client_secret,omitempty"`
	TokenURL     string           `json:"token_url"`
	AuthStyle    oauth2.AuthStyle `json:"auth_style,omitempty"`
	Scopes       []string         `json:"scopes,omitempty"`
	Token        *oauth2.Token    `json:"token"`
	// Updated is when the token was last obtained.
	Updated time.Time `json:"updated"`
}

// config is the OAuth client that refreshes g's token.
func (g *Grant) config() *oauth2.Config {
	return &oauth2.Config{
		ClientID: g.ClientID, ClientSecret: g.ClientSecret, Scopes: g.Scopes,
		Endpoint: oauth2.Endpoint{TokenURL: g.TokenURL, AuthStyle: g.AuthStyle},
	}
}

// fresh reports whether g's access token may still be sent.
func (g *Grant) fresh() bool { return g != nil && g.Token != nil && g.Token.Valid() }

// TokenStore keeps the grants of servers, keyed by server name, where every replica
// finds them. toolbus keeps them in a JetStream key-value bucket, encrypted; a pool
// without one keeps them in memory ([MemoryTokens]).
type TokenStore interface {
	// Load returns the server's grant, or nil when it has none.
	Load(ctx context.Context, server string) (*Grant, error)
	// Save stores a new grant (a login's).
	Save(ctx context.Context, server string, g *Grant) error
	// Delete forgets the server's grant.
	Delete(ctx context.Context, server string) error
	// Refresh replaces the grant whose token stale holds with refresh's answer, one
	// caller at a time across every replica: a caller that finds the stored grant
	// already replaced (by another replica's refresh or a new login) gets that one and
	// does not call refresh, so a refresh token is never used twice.
	Refresh(ctx context.Context, server string, stale *Grant, refresh func(*Grant) (*Grant, error)) (*Grant, error)
}

// MemoryTokens is a [TokenStore] in memory: grants live as long as the process.
type MemoryTokens struct {
	mu     sync.Mutex
	grants map[string]*Grant
}

func (m *MemoryTokens) Load(_ context.Context, server string) (*Grant, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.grants[server], nil
}

func (m *MemoryTokens) Save(_ context.Context, server string, g *Grant) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.grants == nil {
		m.grants = map[string]*Grant{}
	}
	m.grants[server] = g
	return nil
}

func (m *MemoryTokens) Delete(_ context.Context, server string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.grants, server)
	return nil
}

func (m *MemoryTokens) Refresh(_ context.Context, server string, stale *Grant, refresh func(*Grant) (*Grant, error)) (*Grant, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.grants[server]
	if cur == nil || !SameToken(cur, stale) {
		return cur, nil
	}
	g, err := refresh(cur)
	if err != nil {
		return nil, err
	}
	if m.grants == nil {
		m.grants = map[string]*Grant{}
	}
	m.grants[server] = g
	return g, nil
}

// SameToken reports whether a and b hold the same access token.
func SameToken(a, b *Grant) bool {
	return a != nil && b != nil && a.Token != nil && b.Token != nil && a.Token.AccessToken == b.Token.AccessToken
}

// Login is a user's part of an authorization-code flow: where the authorization
// server sends the browser back to (a local callback), and how the code comes back
// from there. [Options.Login] makes one for a server when it first needs a login.
type Login struct {
	// RedirectURL is the callback the authorization server redirects to.
	RedirectURL string
	// Fetch shows the user the authorization URL and returns the code and state the
	// redirect carried.
	Fetch auth.AuthorizationCodeFetcher
}

// Client authorizes the requests of one http server: it implements the go-sdk's
// auth.OAuthHandler. The token comes from the store (a login's grant, shared by every
// replica) and is refreshed through the store, one replica at a time. When the server
// refuses and nobody can log in here (a headless executor), the server needs a login;
// when a login can run here (`toolbus auth login`, `toolbus run`), the go-sdk's
// authorization-code handler runs it: discovery of the protected resource and
// authorization server metadata (with the 2025-03-26 fallbacks), registration (client
// ID metadata document, pre-registered client or dynamic registration), PKCE, scope
// selection and step-up, and offline access.
type Client struct {
	server string
	url    string
	cfg    Config
	tokens TokenStore
	login  func(server string, cfg Config) (*Login, error)
	hc     *http.Client

	mu    sync.Mutex
	grant *Grant // the last one seen
	// protected is set once the server answered 401 or a grant was seen: until then
	// the store is not asked, so that a server without OAuth costs no lookup per
	// request.
	protected bool
	sdk       *auth.AuthorizationCodeHandler
	// refused is why the server last refused with nobody to log in, until a grant
	// turns up.
	refused *NeedsLoginError
}

// NewHandler returns the authorization of the http server name at url: the client
// credentials grant when its "oauth" entry (cfg, nil for none) names it, else the
// authorization-code login, whose *Client is returned too (nil otherwise).
func NewHandler(name, url string, cfg *Config, tokens TokenStore, login func(string, Config) (*Login, error), hc *http.Client) (auth.OAuthHandler, *Client, error) {
	var o Config
	if cfg != nil {
		o = *cfg
	}
	if o.GrantType() == GrantClientCredentials && (o.PrivateKey != "" || o.PrivateKeyFile != "") {
		h, err := newJWTCredentials(o, hc)
		return h, nil, err
	}
	if o.GrantType() == GrantClientCredentials {
		h, err := extauth.NewClientCredentialsHandler(&extauth.ClientCredentialsHandlerConfig{
			Credentials: &oauthex.ClientCredentials{
				ClientID:         o.ClientID,
				ClientSecretAuth: &oauthex.ClientSecretAuth{ClientSecret: o.ClientSecret},
			},
			HTTPClient: hc,
		})
		return h, nil, err
	}
	if tokens == nil {
		tokens = &MemoryTokens{}
	}
	c := &Client{server: name, url: url, cfg: o, tokens: tokens, login: login, hc: hc}
	return c, c, nil
}

// tokenTimeout bounds the store and the token endpoint when a token is needed.
const tokenTimeout = 30 * time.Second

// TokenSource returns the client itself once a grant for the server's URL exists; nil
// (no Authorization header) before that.
func (c *Client) TokenSource(ctx context.Context) (oauth2.TokenSource, error) {
	g, err := c.current(ctx)
	if err != nil || g == nil {
		return nil, err
	}
	return c, nil
}

// current returns the grant last seen, loading it from the store when none was seen
// or it is stale.
func (c *Client) current(ctx context.Context) (*Grant, error) {
	c.mu.Lock()
	g, protected := c.grant, c.protected
	c.mu.Unlock()
	if g.fresh() || !protected {
		return g, nil
	}
	stored, err := c.tokens.Load(ctx, c.server)
	if err != nil {
		return nil, fmt.Errorf("%s: the stored OAuth grant: %w", c.server, err)
	}
	if stored == nil || stored.URL != c.url || stored.Token == nil {
		return nil, nil
	}
	c.mu.Lock()
	c.grant = stored
	if stored.fresh() {
		c.refused = nil
	}
	c.mu.Unlock()
	return stored, nil
}

// Token returns a valid access token, refreshing it through the store when it expired.
// A refresh the authorization server refuses (invalid_grant: revoked, expired) is
// returned as the go-sdk expects it: the request goes without a token, the server
// answers 401, and Authorize says the server needs a login.
func (c *Client) Token() (*oauth2.Token, error) {
	ctx, cancel := context.WithTimeout(context.Background(), tokenTimeout)
	defer cancel()
	g, err := c.current(ctx)
	if err != nil {
		return nil, err
	}
	if g == nil {
		return nil, &oauth2.RetrieveError{ErrorCode: "invalid_grant", ErrorDescription: "no grant"}
	}
	if g.fresh() {
		return g.Token, nil
	}
	if g.Token.RefreshToken == "" {
		return nil, &oauth2.RetrieveError{ErrorCode: "invalid_grant", ErrorDescription: "the token expired and there is no refresh token"}
	}
	ng, err := c.tokens.Refresh(ctx, c.server, g, func(cur *Grant) (*Grant, error) {
		tok, err := cur.config().TokenSource(context.WithValue(ctx, oauth2.HTTPClient, c.hc), &oauth2.Token{RefreshToken: cur.Token.RefreshToken}).Token()
		if err != nil {
			return nil, err
		}
		next := *cur
		next.Token, next.Updated = tok, time.Now()
		return &next, nil
	})
	if err != nil {
		return nil, err
	}
	if ng == nil || ng.Token == nil {
		return nil, &oauth2.RetrieveError{ErrorCode: "invalid_grant", ErrorDescription: "the grant was removed"}
	}
	c.mu.Lock()
	c.grant = ng
	c.mu.Unlock()
	return ng.Token, nil
}

// Authorize answers the server's 401, or its 403 asking for more scope.
func (c *Client) Authorize(ctx context.Context, req *http.Request, resp *http.Response) error {
	challenges, _ := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	bearerErr := ""
	for _, ch := range challenges {
		if ch.Scheme == "bearer" && ch.Params["error"] != "" {
			bearerErr = ch.Params["error"]
		}
	}
	if resp.StatusCode == http.StatusForbidden && bearerErr != "insufficient_scope" {
		drain(resp)
		return nil // not a matter of authorization: the request's answer says why
	}
	c.mu.Lock()
	c.protected = true
	c.mu.Unlock()
	// A grant in the store (a login, another replica's refresh) that was not sent:
	// retry with it.
	if resp.StatusCode == http.StatusUnauthorized {
		sent := strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer ")
		stored, err := c.tokens.Load(ctx, c.server)
		if err == nil && stored != nil && stored.URL == c.url && stored.fresh() && stored.Token.AccessToken != sent {
			c.mu.Lock()
			c.grant, c.refused = stored, nil
			c.mu.Unlock()
			drain(resp)
			return nil
		}
	}
	if c.login == nil {
		drain(resp)
		reason := "the server requires an OAuth authorization and none was given"
		switch {
		case resp.StatusCode == http.StatusForbidden:
			reason = "the server asks for more scope than the login granted"
		case req.Header.Get("Authorization") != "":
			reason = "the server refused the stored OAuth token (revoked or expired) and it could not be refreshed"
		}
		e := &NeedsLoginError{Server: c.server, Reason: reason}
		c.mu.Lock()
		c.refused = e
		c.mu.Unlock()
		return e
	}
	h, err := c.handler()
	if err != nil {
		drain(resp)
		return err
	}
	return h.Authorize(ctx, req, resp)
}

// Forget drops the grant last seen, so that the next request reads the store again: a
// logout, a new login or another replica's refresh, seen by the store's watch, takes
// effect at once rather than when the token expires.
func (c *Client) Forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.grant, c.protected = nil, true
}

// NeedsLogin returns why the server last refused with nobody to log in, or nil.
func (c *Client) NeedsLogin() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.refused == nil {
		return nil
	}
	return c.refused
}

// handler returns the go-sdk's authorization-code handler of the server, made on first
// need: one per server, so that scopes granted earlier are kept on step-up.
func (c *Client) handler() (*auth.AuthorizationCodeHandler, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sdk != nil {
		return c.sdk, nil
	}
	l, err := c.login(c.server, c.cfg)
	if err != nil {
		return nil, err
	}
	hc := &auth.AuthorizationCodeHandlerConfig{
		RedirectURL:              l.RedirectURL,
		AuthorizationCodeFetcher: l.Fetch,
		RequestRefreshToken:      true,
		Client:                   c.hc,
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{
			Metadata: &oauthex.ClientRegistrationMetadata{
				RedirectURIs: []string{l.RedirectURL},
				ClientName:   "toolbus",
				GrantTypes:   []string{"authorization_code", "refresh_token"},
			},
		},
		NewTokenSource: c.saveGrant,
	}
	if c.cfg.ClientMetadataURL != "" {
		hc.ClientIDMetadataDocumentConfig = &auth.ClientIDMetadataDocumentConfig{URL: c.cfg.ClientMetadataURL}
	}
	if c.cfg.ClientID != "" {
		pre := &oauthex.ClientCredentials{ClientID: c.cfg.ClientID}
		if c.cfg.ClientSecret != "" {
			pre.ClientSecretAuth = &oauthex.ClientSecretAuth{ClientSecret: c.cfg.ClientSecret}
		}
		hc.PreregisteredClient = pre
	}
	if len(c.cfg.Scopes) > 0 {
		scopes := c.cfg.Scopes
		hc.ScopeFilter = func([]string) []string { return scopes }
	}
	h, err := auth.NewAuthorizationCodeHandler(hc)
	if err != nil {
		return nil, fmt.Errorf("%s: oauth: %w", c.server, err)
	}
	c.sdk = h
	return h, nil
}

// saveGrant keeps the token a login obtained, with what refreshing it needs, in the
// store: from then on every replica uses it.
func (c *Client) saveGrant(ctx context.Context, cfg *oauth2.Config, tok *oauth2.Token) (oauth2.TokenSource, error) {
	g := &Grant{
		URL: c.url, ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret,
		TokenURL: cfg.Endpoint.TokenURL, AuthStyle: cfg.Endpoint.AuthStyle,
		Scopes: cfg.Scopes, Token: tok, Updated: time.Now(),
	}
	if err := c.tokens.Save(ctx, c.server, g); err != nil {
		return nil, fmt.Errorf("%s: keeping the OAuth grant: %w", c.server, err)
	}
	c.mu.Lock()
	c.grant, c.refused, c.protected = g, nil, true
	c.mu.Unlock()
	return c, nil
}

// drain reads what is left of a small body and closes it (the connection is reused).
func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
}

// httpsWithPath reports whether s is an https URL with a host and a path.
func httpsWithPath(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Scheme == "https" && u.Host != "" && u.Path != "" && u.Path != "/"
}
