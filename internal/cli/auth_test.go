package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/toolbus/toolbus/internal/mcptest"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/tokens"
	"github.com/toolbus/toolbus/pkg/toolbus"
)

// An MCP server behind the go-sdk's bearer-token middleware and a local authorization
// server, through the whole pipeline: a call before any login is answered at once,
// naming the command; `toolbus auth login` once; then calls from executor replicas
// succeed, across token expiry (one refresh at a time, no refresh token used twice); a
// revoked grant leads back to the "needs login" answer and health state; and no token
// shows in logs, spans, health or `toolbus auth status`.
//
// Tokens last an hour, and the test makes the stored one expired when it wants it so
// (expire), as its lifetime running out would: no step has to finish within a token's
// lifetime, so a busy machine cannot use a token up early and cause a refresh the test
// does not expect.
func TestOAuthLoginThroughThePipeline(t *testing.T) {
	rig := newSecureRig(t)
	key, as, nc, js, cfgPath := rig.key, rig.as, rig.nc, rig.js, rig.cfgPath
	logs := &bustest.LogBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	start := func(services ...string) func() {
		stop, err := rig.start(toolbus.Options{Logger: log, TracerProvider: tp, TokenKey: key}, services...)
		if err != nil {
			t.Fatal(err)
		}
		return stop
	}
	c, err := client.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ask := func() messages.OutputResult { t.Helper(); return rig.ask(c, "c-auth") }
	needsLogin := func(when string) {
		t.Helper()
		r := ask()
		if r.Success || r.Error == nil || r.Error.Code != messages.CodeServerUnavailable ||
			!strings.Contains(r.Error.Message, "toolbus auth login secure") || r.Attempts != 1 {
			t.Fatalf("%s: %+v %+v, want server_unavailable naming the login, one attempt", when, r, r.Error)
		}
		t.Logf("%s: %s", when, r.Error.Message)
	}
	grants, err := tokens.Open(context.Background(), js, key)
	if err != nil {
		t.Fatal(err)
	}
	// expire makes the stored grant's access token expired. A replica that loads it then
	// (a replica started after, healthd's next probe) must refresh it.
	expire := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		g, err := grants.Load(ctx, "secure")
		if err != nil || g == nil || g.Token == nil || !g.Token.Valid() {
			t.Fatalf("the stored grant: %+v, %v; want a valid token to expire", g, err)
		}
		g.Token.Expiry = time.Now().Add(-time.Minute)
		if err := grants.Save(ctx, "secure", g); err != nil {
			t.Fatal(err)
		}
	}
	healthIs := func(want messages.HealthState) messages.HealthStatus {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		kv, _ := js.KeyValue(ctx, messages.BucketHealth)
		var st messages.HealthStatus
		for ctx.Err() == nil {
			if e, err := kv.Get(ctx, bus.Key("secure")); err == nil && json.Unmarshal(e.Value(), &st) == nil && st.State == want {
				return st
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("health of secure: %+v, want %s", st, want)
		return st
	}

	start(toolbus.Parser, toolbus.Formatter, toolbus.Healthd)
	stop1 := start(toolbus.Executor)
	needsLogin("before any login")
	if st := healthIs(messages.HealthNeedsLogin); !strings.Contains(st.Error, "toolbus auth login secure") {
		t.Errorf("health: %q does not name the login", st.Error)
	}

	// Log in once, as a user would: the URL printed, opened, approved.
	var stdout bytes.Buffer
	browser := &mcptest.FollowLogin{}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code := Main(ctx, []string{"auth", "login", "secure", "--config", cfgPath, "--nats", nc.ConnectedUrl()},
		Env{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: browser, Getenv: os.Getenv})
	if code != 0 || browser.Opened != 1 || !strings.Contains(stdout.String(), "authorized toolbus with secure (1 tools") {
		t.Fatalf("auth login: exit %d, %d URLs opened\n%s%s", code, browser.Opened, stdout.String(), browser.String())
	}

	// The first executor replica uses the grant.
	first := ask()
	if !first.Success {
		t.Fatalf("after login: %+v %+v", first, first.Error)
	}
	healthIs(messages.HealthUp)
	stop1()

	if n, _ := as.Refreshes(); n != 0 {
		t.Fatalf("%d refreshes of a fresh token", n)
	}

	// Another replica, after the token expired: it refreshes (or healthd's probe does
	// first, and the replica takes its grant).
	expire()
	stop2 := start(toolbus.Executor)
	if r := ask(); !r.Success || string(r.Result) == string(first.Result) {
		t.Fatalf("second replica: %+v %+v (first %s)", r, r.Error, first.Result)
	}
	if n, reused := as.Refreshes(); n != 1 || reused != 0 {
		t.Fatalf("refreshes: %d, reused refresh tokens: %d; want 1, 0", n, reused)
	}

	// Two replicas at once find the token expired: one refresh between them (and
	// healthd's probes).
	stop2()
	expire()
	start(toolbus.Executor)
	start(toolbus.Executor)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r := ask(); !r.Success {
				t.Errorf("concurrent call: %+v %+v", r, r.Error)
			}
		}()
	}
	wg.Wait()
	if n, reused := as.Refreshes(); n != 2 || reused != 0 {
		t.Errorf("refreshes: %d, reused refresh tokens: %d; want 2, 0", n, reused)
	}
	t.Logf("sessions: first %s, later %s", first.Result, ask().Result)

	// Revoked: back to the answer that names the login, and the health state.
	as.Revoke()
	needsLogin("after revocation")
	healthIs(messages.HealthNeedsLogin)

	// `toolbus auth status` tells what the grant is, never its tokens.
	stdout.Reset()
	var stderr bytes.Buffer
	code = Main(ctx, []string{"auth", "status", "--config", cfgPath, "--nats", nc.ConnectedUrl()},
		Env{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr, Getenv: os.Getenv})
	if code != 0 || !strings.Contains(stdout.String(), "secure") || !strings.Contains(stdout.String(), "refreshable") {
		t.Errorf("auth status: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}

	// No token anywhere an operator looks.
	var seen strings.Builder
	seen.WriteString(logs.String())
	seen.WriteString(stdout.String())
	seen.WriteString(browser.String())
	for _, s := range rec.Ended() {
		seen.WriteString(s.Name() + " " + s.Status().Description)
		for _, a := range s.Attributes() {
			seen.WriteString(" " + a.Value.Emit())
		}
		for _, e := range s.Events() {
			for _, a := range e.Attributes {
				seen.WriteString(" " + a.Value.Emit())
			}
		}
	}
	kv, _ := js.KeyValue(ctx, messages.BucketHealth)
	if e, err := kv.Get(ctx, bus.Key("secure")); err == nil {
		seen.Write(e.Value())
	}
	issued := as.Issued()
	if len(issued) < 6 {
		t.Fatalf("%d tokens issued", len(issued))
	}
	for _, tok := range issued {
		if strings.Contains(seen.String(), tok) {
			t.Errorf("a token shows in logs, spans, health or status: %s…", tok[:6])
		}
	}

	// Logged out: the grant is gone.
	code = Main(ctx, []string{"auth", "logout", "--config", cfgPath, "--nats", nc.ConnectedUrl(), "secure"},
		Env{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr, Getenv: os.Getenv})
	store, err := tokens.Open(ctx, js, key)
	if err != nil {
		t.Fatal(err)
	}
	if g, _ := store.Load(ctx, "secure"); code != 0 || g != nil {
		t.Errorf("auth logout: exit %d, grant %v", code, g != nil)
	}
}

// A browser on another machine cannot reach the local callback: the user pastes the
// URL it ended on, and the login completes from that.
func TestAuthLoginPastedURL(t *testing.T) {
	key := tokens.NewKey()
	t.Setenv(tokens.EnvKey, base64.StdEncoding.EncodeToString(key))
	as := mcptest.NewOAuthServer(t, time.Hour)
	nc, js := bustest.Provisioned(t)
	cfgPath := filepath.Join(t.TempDir(), "toolbus.json")
	if err := os.WriteFile(cfgPath, []byte(`{"mcpServers": {"secure": {"type": "http", "url": "`+as.URL+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// Without a key, before anything is asked of the user.
	var noKey bytes.Buffer
	if code := Main(context.Background(), []string{"auth", "login", "secure", "--config", cfgPath, "--nats", nc.ConnectedUrl()},
		Env{Stdin: strings.NewReader(""), Stdout: &noKey, Stderr: &noKey, Getenv: func(string) string { return "" }}); code == 0 ||
		!strings.Contains(noKey.String(), tokens.EnvKey) || strings.Contains(noKey.String(), "/authorize") {
		t.Fatalf("auth login without a key: exit %d\n%s", code, noKey.String())
	}
	stdin, paste := io.Pipe()
	defer paste.Close()
	browser := &mcptest.FollowLogin{Paste: paste}
	var stdout bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code := Main(ctx, []string{"auth", "login", "--config", cfgPath, "--nats", nc.ConnectedUrl(), "secure"},
		Env{Stdin: stdin, Stdout: &stdout, Stderr: browser, Getenv: os.Getenv})
	if code != 0 || !strings.Contains(browser.String(), "paste the URL") {
		t.Fatalf("auth login: exit %d\n%s%s", code, stdout.String(), browser.String())
	}
	store, err := tokens.Open(ctx, js, key)
	if err != nil {
		t.Fatal(err)
	}
	if g, err := store.Load(ctx, "secure"); err != nil || g == nil || g.URL != as.URL {
		t.Fatalf("the grant: %+v, %v", g, err)
	}
}

// secureRig is what the OAuth tests start from: an MCP server "secure" behind a local
// authorization server, in a configuration file (its health probed every 200 ms), a
// NATS server with the streams, and a token key in the environment.
type secureRig struct {
	t       *testing.T
	key     []byte
	as      *mcptest.OAuthServer
	nc      *nats.Conn
	js      jetstream.JetStream
	cfgPath string
	cfg     *config.Config
}

func newSecureRig(t *testing.T) *secureRig {
	r := &secureRig{t: t, key: tokens.NewKey()}
	t.Setenv(tokens.EnvKey, base64.StdEncoding.EncodeToString(r.key))
	r.as = mcptest.NewOAuthServer(t, time.Hour)
	r.nc, r.js = bustest.Provisioned(t)
	r.cfgPath = filepath.Join(t.TempDir(), "toolbus.json")
	if err := os.WriteFile(r.cfgPath, []byte(`{
  "mcpServers": {"secure": {"type": "http", "url": "`+r.as.URL+`"}},
  "engineering": {"enabled": false},
  "health": {"interval": "200ms"}
}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var err error
	if r.cfg, err = config.Load(r.cfgPath); err != nil {
		t.Fatal(err)
	}
	return r
}

// start runs services on the rig's connection, with o's logger, tracer and key, until
// the test ends; the function returned stops them sooner.
func (r *secureRig) start(o toolbus.Options, services ...string) (func(), error) {
	ctx, cancel := context.WithCancel(context.Background())
	o.Provision, o.Conn, o.Config, o.Services, o.Topology = true, r.nc, r.cfg, services, bus.Topology{Memory: true}
	n, err := toolbus.Start(ctx, o)
	if err != nil {
		cancel()
		return nil, err
	}
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); _ = n.Wait() }) }
	r.t.Cleanup(stop)
	return stop, nil
}

// ask calls secure__whoami once, in conversation conv, and returns its result.
func (r *secureRig) ask(c *client.Client, conv string) messages.OutputResult {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := c.Ask(ctx, conv, `<tool_call>{"name": "secure__whoami", "arguments": {}}</tool_call>`, nil)
	if err != nil || len(out.Results) != 1 {
		r.t.Fatalf("Ask: %+v, %v", out, err)
	}
	return out.Results[0]
}
