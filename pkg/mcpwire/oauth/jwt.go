package oauth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// jwtCredentials is the client credentials grant with private_key_jwt client
// authentication (RFC 7523, SEP-1046): toolbus proves it holds the client's private key
// with a short-lived signed assertion (iss and sub the client id, aud the
// authorization server's issuer) in place of a shared secret. On the server's first 401
// it finds the token endpoint as the go-sdk's client credentials handler does (the
// protected resource metadata, then the authorization server's metadata, with the
// 2025-03-26 fallback) and asks for a token; the token is renewed with a new assertion
// when it expires.
type jwtCredentials struct {
	clientID string
	key      crypto.Signer
	method   jwt.SigningMethod
	scopes   []string
	hc       *http.Client

	mu sync.Mutex
	ts oauth2.TokenSource
}

// newJWTCredentials reads the entry's private key (PEM: PKCS#8, SEC 1 or PKCS#1) and
// picks the signing method: the entry's, else ES256 for a P-256 key, RS256 for RSA,
// EdDSA for Ed25519.
func newJWTCredentials(o Config, hc *http.Client) (*jwtCredentials, error) {
	text := o.PrivateKey
	if o.PrivateKeyFile != "" {
		b, err := os.ReadFile(o.PrivateKeyFile)
		if err != nil {
			return nil, fmt.Errorf("oauth.privateKeyFile: %w", err)
		}
		text = string(b)
	}
	key, err := parsePrivateKey(text)
	if err != nil {
		return nil, err
	}
	method, err := signingMethod(o.SigningAlgorithm, key)
	if err != nil {
		return nil, err
	}
	return &jwtCredentials{clientID: o.ClientID, key: key, method: method, scopes: o.Scopes, hc: hc}, nil
}

func parsePrivateKey(text string) (crypto.Signer, error) {
	block, _ := pem.Decode([]byte(strings.TrimSpace(text)))
	if block == nil {
		return nil, errors.New("oauth.privateKey: no PEM block")
	}
	var key any
	var err error
	switch block.Type {
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	default:
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	}
	if err != nil {
		return nil, fmt.Errorf("oauth.privateKey: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("oauth.privateKey: a %T cannot sign", key)
	}
	return signer, nil
}

func signingMethod(alg string, key crypto.Signer) (jwt.SigningMethod, error) {
	if alg == "" {
		switch k := key.(type) {
		case *ecdsa.PrivateKey:
			alg = map[int]string{256: "ES256", 384: "ES384", 521: "ES512"}[k.Curve.Params().BitSize]
		case *rsa.PrivateKey:
			alg = "RS256"
		case ed25519.PrivateKey:
			alg = "EdDSA"
		}
	}
	m := jwt.GetSigningMethod(alg)
	if m == nil || alg == "none" || strings.HasPrefix(alg, "HS") {
		return nil, fmt.Errorf("oauth.signingAlgorithm: %q is not an algorithm of a private key", alg)
	}
	return m, nil
}

// assertionLifetime is how long a client assertion is valid.
const assertionLifetime = 5 * time.Minute

// assertion signs a client assertion for the authorization server audience.
func (j *jwtCredentials) assertion(audience string) (string, error) {
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	now := time.Now()
	claims := jwt.RegisteredClaims{
		Issuer: j.clientID, Subject: j.clientID, Audience: jwt.ClaimStrings{audience},
		IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(assertionLifetime)),
		ID: base64.RawURLEncoding.EncodeToString(id),
	}
	return jwt.NewWithClaims(j.method, claims).SignedString(j.key)
}

func (j *jwtCredentials) TokenSource(context.Context) (oauth2.TokenSource, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.ts, nil
}

func (j *jwtCredentials) Authorize(ctx context.Context, req *http.Request, resp *http.Response) error {
	defer drain(resp)
	challenges, _ := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	scope, bearerErr, metadataURL := "", "", ""
	for _, ch := range challenges {
		if ch.Scheme == "bearer" {
			scope, bearerErr = ch.Params["scope"], ch.Params["error"]
		}
		if u := ch.Params["resource_metadata"]; u != "" {
			metadataURL = u
		}
	}
	if resp.StatusCode == http.StatusForbidden && bearerErr != "insufficient_scope" {
		return nil
	}
	resource, issuer := req.URL.String(), ""
	scopes := j.scopes
	if prm := protectedResource(ctx, metadataURL, req.URL, j.hc); prm != nil {
		resource, issuer = prm.Resource, prm.AuthorizationServers[0]
		if len(scopes) == 0 && scope == "" {
			scopes = prm.ScopesSupported
		}
	} else {
		issuer = (&url.URL{Scheme: req.URL.Scheme, Host: req.URL.Host}).String() // 2025-03-26: the server's origin
	}
	if len(j.scopes) == 0 && scope != "" {
		scopes = strings.Fields(scope)
	}
	asm, err := auth.GetAuthServerMetadata(ctx, issuer, j.hc)
	if err != nil {
		return fmt.Errorf("the authorization server's metadata: %w", err)
	}
	if asm == nil {
		asm = &oauthex.AuthServerMeta{Issuer: issuer, TokenEndpoint: strings.TrimSuffix(issuer, "/") + "/token"}
	}
	src := &assertionSource{j: j, audience: asm.Issuer, cfg: clientcredentials.Config{
		ClientID: j.clientID, TokenURL: asm.TokenEndpoint, Scopes: scopes, AuthStyle: oauth2.AuthStyleInParams,
	}, resource: resource}
	ts := oauth2.ReuseTokenSource(nil, src)
	if _, err := ts.Token(); err != nil {
		return fmt.Errorf("client credentials (private_key_jwt): %w", err)
	}
	j.mu.Lock()
	j.ts = ts
	j.mu.Unlock()
	return nil
}

// protectedResource finds the server's protected resource metadata: at the URL its
// challenge names, else at the well-known path of its URL, else at its origin's; nil
// when there is none (a 2025-03-26 server).
func protectedResource(ctx context.Context, fromChallenge string, server *url.URL, hc *http.Client) *oauthex.ProtectedResourceMetadata {
	origin := server.Scheme + "://" + server.Host
	var urls []string
	if fromChallenge != "" {
		urls = append(urls, fromChallenge)
	}
	if p := strings.TrimSuffix(server.Path, "/"); p != "" {
		urls = append(urls, origin+"/.well-known/oauth-protected-resource"+p)
	}
	urls = append(urls, origin+"/.well-known/oauth-protected-resource")
	for _, u := range urls {
		prm, err := oauthex.GetProtectedResourceMetadata(ctx, u, server.String(), hc)
		if err == nil && prm != nil && len(prm.AuthorizationServers) > 0 {
			return prm
		}
	}
	return nil
}

// assertionSource asks the token endpoint for a token with a new assertion each time.
type assertionSource struct {
	j        *jwtCredentials
	audience string
	resource string
	cfg      clientcredentials.Config
}

func (s *assertionSource) Token() (*oauth2.Token, error) {
	a, err := s.j.assertion(s.audience)
	if err != nil {
		return nil, err
	}
	cfg := s.cfg
	cfg.EndpointParams = url.Values{
		"client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:jwt-bearer"},
		"client_assertion":      {a},
		"resource":              {s.resource},
	}
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), oauth2.HTTPClient, s.j.hc), tokenTimeout)
	defer cancel()
	return cfg.Token(ctx)
}
