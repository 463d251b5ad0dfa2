package mcpwire_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"github.com/toolbus/toolbus/pkg/mcpwire/oauth"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolbus/toolbus/internal/mcptest"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/mcpwire"
	"github.com/toolbus/toolbus/pkg/messages"
)

func ecKeyPEM(t *testing.T) (*ecdsa.PrivateKey, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return key, string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

// The client credentials grant authenticated with a signed assertion
// (private_key_jwt): the authorization server verifies iss, sub, aud, exp and a fresh
// jti with the client's public key, and the go-sdk's bearer middleware lets the call
// through; a key the server does not know gets no token.
func TestClientCredentialsPrivateKeyJWT(t *testing.T) {
	as := mcptest.NewOAuthServer(t, time.Hour)
	key, keyPEM := ecKeyPEM(t)
	as.AssertionKey, as.AssertionClient = &key.PublicKey, "toolbus-m2m"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	call := func(pemText string) (json.RawMessage, error) {
		t.Helper()
		pool, err := mcpwire.NewPool(map[string]mcpwire.ServerConfig{"secure": {Type: "http", URL: as.URL, OAuth: &oauth.Config{
			Grant: oauth.GrantClientCredentials, ClientID: "toolbus-m2m", PrivateKey: pemText,
		}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		if err := pool.Connect(ctx); err != nil {
			return nil, err
		}
		return pool.Call(ctx, "whoami", json.RawMessage(`{}`))
	}
	out, err := call(keyPEM)
	if err != nil || !strings.Contains(string(out), "session") {
		t.Fatalf("with the client's key: %s, %v", out, err)
	}
	if _, err := call(keyPEM); err != nil { // a new assertion: its jti is new
		t.Fatalf("a second client: %v", err)
	}
	_, other := ecKeyPEM(t)
	if _, err := call(other); err == nil || !strings.Contains(err.Error(), "invalid_client") {
		t.Fatalf("with another key: %v, want invalid_client", err)
	}
}

func TestPrivateKeyConfigValidated(t *testing.T) {
	_, keyPEM := ecKeyPEM(t)
	http := func(o *oauth.Config) mcpwire.ServerConfig {
		return mcpwire.ServerConfig{Type: "http", URL: "https://api.example/mcp", OAuth: o}
	}
	for _, tt := range []struct {
		name string
		o    *oauth.Config
		ok   bool
	}{
		{"private key", &oauth.Config{Grant: "client_credentials", ClientID: "a", PrivateKey: keyPEM}, true},
		{"key file", &oauth.Config{Grant: "client_credentials", ClientID: "a", PrivateKeyFile: "/run/secrets/key.pem"}, true},
		{"secret and key", &oauth.Config{Grant: "client_credentials", ClientID: "a", ClientSecret: "s", PrivateKey: keyPEM}, false},
		{"key with a login", &oauth.Config{ClientID: "a", PrivateKey: keyPEM}, false},
		{"key without a client", &oauth.Config{Grant: "client_credentials", PrivateKey: keyPEM}, false},
	} {
		if err := http(tt.o).Validate(); (err == nil) != tt.ok {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
	// A key that does not parse, or an algorithm that is no private key's, fails the
	// server's connection with the reason.
	for _, o := range []*oauth.Config{
		{Grant: "client_credentials", ClientID: "a", PrivateKey: "not a key"},
		{Grant: "client_credentials", ClientID: "a", PrivateKey: keyPEM, SigningAlgorithm: "HS256"},
	} {
		pool, err := mcpwire.NewPool(map[string]mcpwire.ServerConfig{"s": http(o)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := pool.Connect(ctx); err == nil || !strings.Contains(err.Error(), "oauth.") {
			t.Errorf("%+v: Connect = %v", o.SigningAlgorithm, err)
		}
		cancel()
		pool.Close()
	}
}

// A server that requires a login nobody gave: every connection attempt fails with
// ErrNeedsLogin (calls are unavailable, saying so), and the pool says it once, not at
// each of its retries.
func TestNeedsLoginSaidOnce(t *testing.T) {
	as := mcptest.NewOAuthServer(t, time.Hour)
	logs := &bustest.LogBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	fast := &mcpwire.RetryPolicy{InitialInterval: messages.Duration(5 * time.Millisecond), MaxInterval: messages.Duration(10 * time.Millisecond)}
	pool, err := mcpwire.NewPool(map[string]mcpwire.ServerConfig{"secure": {Type: "http", URL: as.URL, Retry: fast}}, &mcpwire.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pool.Connect(ctx); !errors.Is(err, oauth.ErrNeedsLogin) {
		t.Fatalf("Connect = %v, want ErrNeedsLogin", err)
	}
	for as.Refused() < 10 && ctx.Err() == nil { // the pool keeps trying
		time.Sleep(5 * time.Millisecond)
	}
	_, err = pool.Call(ctx, "secure__whoami", json.RawMessage(`{}`))
	if !errors.Is(err, oauth.ErrNeedsLogin) {
		t.Errorf("Call = %v, want ErrNeedsLogin", err)
	}
	n := strings.Count(logs.String(), "needs an OAuth login")
	if n != 1 {
		t.Errorf("said %d times in %d attempts, want once", n, as.Refused())
	}
}

// countingTokens counts the lookups of a TokenStore.
type countingTokens struct {
	oauth.MemoryTokens
	mu    sync.Mutex
	loads int
}

func (c *countingTokens) Load(ctx context.Context, server string) (*oauth.Grant, error) {
	c.mu.Lock()
	c.loads++
	c.mu.Unlock()
	return c.MemoryTokens.Load(ctx, server)
}

// A server that never asked for authorization costs no lookup of the grants per
// request: the store is asked only once the server answered 401.
func TestNoGrantLookupWithoutOAuth(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "open", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "ping"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, map[string]any, error) {
		return nil, map[string]any{"ok": true}, nil
	})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	defer hs.Close()
	tokens := &countingTokens{}
	pool, err := mcpwire.NewPool(map[string]mcpwire.ServerConfig{"open": {Type: "http", URL: hs.URL}}, &mcpwire.Options{Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 20 {
		if _, err := pool.Call(ctx, "ping", json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	tokens.mu.Lock()
	defer tokens.mu.Unlock()
	if tokens.loads != 0 {
		t.Errorf("%d lookups of the grants for a server without OAuth, want 0", tokens.loads)
	}

	// A protected one is looked up once it asked, then the grant is kept.
	as := mcptest.NewOAuthServer(t, time.Hour)
	counted := &countingTokens{}
	secure, err := mcpwire.NewPool(map[string]mcpwire.ServerConfig{"secure": {Type: "http", URL: as.URL}}, &mcpwire.Options{Tokens: counted})
	if err != nil {
		t.Fatal(err)
	}
	defer secure.Close()
	if err := secure.Connect(ctx); !errors.Is(err, oauth.ErrNeedsLogin) {
		t.Fatalf("Connect = %v", err)
	}
	counted.mu.Lock()
	defer counted.mu.Unlock()
	if counted.loads == 0 {
		t.Error("a server that answered 401 was not looked up")
	}
}
