package cli

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolbus/toolbus/internal/mcptest"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/tokens"
	"github.com/toolbus/toolbus/pkg/toolbus"
)

// OAuth as operators run it: an executor that could not open the grants does not
// start; a logout and a new login reach a running executor at once; a logout of a
// server nobody knows is an error; a forged callback ends the login with an error.
func TestOAuthForOperators(t *testing.T) {
	rig := newSecureRig(t)
	key, as, nc, cfgPath := rig.key, rig.as, rig.nc, rig.cfgPath
	run := func(args ...string) (int, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var out bytes.Buffer
		browser := &mcptest.FollowLogin{}
		code := Main(ctx, append(args, "--config", cfgPath, "--nats", nc.ConnectedUrl()),
			Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: browser, Getenv: os.Getenv})
		return code, out.String() + browser.String()
	}
	start := func(key []byte, services ...string) (func(), error) {
		return rig.start(toolbus.Options{TokenKey: key}, services...)
	}

	// An executor without the key, with a server whose oauth entry asks for a login:
	// it does not start.
	withEntry, err := config.Parse([]byte(`{"mcpServers": {"notes": {"type": "http", "url": "`+as.URL+`", "oauth": {"clientId": "toolbus", "scopes": ["read"]}}}}`), "entry.json", nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := toolbus.Start(context.Background(), toolbus.Options{Conn: nc, Config: withEntry, Services: []string{toolbus.Executor}}); err == nil || !strings.Contains(err.Error(), tokens.EnvKey) || !strings.Contains(err.Error(), "notes") {
		if err == nil {
			n.Close()
		}
		t.Errorf("an executor without the token key, an oauth entry configured: %v; want a start-up error naming the server and %s", err, tokens.EnvKey)
	}

	// A logout of a server that is neither configured nor logged in to.
	if code, out := run("auth", "logout", "nosuch"); code == 0 || strings.Contains(out, "forgot") {
		t.Errorf("auth logout nosuch: exit %d\n%s", code, out)
	}

	if code, out := run("auth", "login", "secure"); code != 0 {
		t.Fatalf("auth login: exit %d\n%s", code, out)
	}

	// An executor without the key, with a login's grant stored: it does not start.
	if _, err := start(nil, toolbus.Executor); err == nil || !strings.Contains(err.Error(), tokens.EnvKey) || !strings.Contains(err.Error(), "secure") {
		t.Errorf("an executor without the token key, a grant stored: %v; want a start-up error naming the server and %s", err, tokens.EnvKey)
	}

	if _, err := start(key, toolbus.Parser, toolbus.Formatter, toolbus.Executor); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ask := func() messages.OutputResult { t.Helper(); return rig.ask(c, "c-ops") }
	if r := ask(); !r.Success {
		t.Fatalf("after the login: %+v", r.Error)
	}

	// Logged out: the running executor stops using the grant now, not when its token
	// (valid for an hour) expires.
	if code, out := run("auth", "logout", "secure"); code != 0 {
		t.Fatalf("auth logout: exit %d\n%s", code, out)
	}
	eventually(t, "the logout reaches the executor", func() bool {
		r := ask()
		return !r.Success && r.Error.Code == messages.CodeServerUnavailable && strings.Contains(r.Error.Message, "toolbus auth login secure")
	})
	// A configured server without a grant: nothing to forget, said so.
	if code, out := run("auth", "logout", "secure"); code != 0 || !strings.Contains(out, "nothing to forget") {
		t.Errorf("a second logout: exit %d\n%s", code, out)
	}

	// Logged in again: the executor uses the new grant at once.
	if code, out := run("auth", "login", "secure"); code != 0 {
		t.Fatalf("auth login again: exit %d\n%s", code, out)
	}
	eventually(t, "the new login reaches the executor", func() bool { return ask().Success })

	// A forged callback (not the authorization server's redirect: another state) ends
	// the login with an error instead of leaving it waiting.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	forger := &forgedCallback{}
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"auth", "login", "secure", "--config", cfgPath, "--nats", nc.ConnectedUrl(), "--timeout", "50s"},
			Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: forger, Getenv: os.Getenv})
	}()
	select {
	case code := <-done:
		if code == 0 || !strings.Contains(forger.String(), "not the authorization server's redirect") {
			t.Errorf("auth login with a forged callback: exit %d\n%s%s", code, out.String(), forger.String())
		}
		t.Logf("forged callback: %s", strings.TrimSpace(forger.String()[strings.LastIndex(strings.TrimSpace(forger.String()), "\n")+1:]))
	case <-time.After(45 * time.Second):
		t.Fatalf("auth login still waits 45 s after a forged callback\n%s", forger.String())
	}
}

// eventually retries cond for up to 30 s: what a watch delivers takes a moment.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30 s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// forgedCallback reads what `toolbus auth login` prints and, instead of the user's
// browser, sends the login's callback a code and state of its own making, as a hostile
// page can.
type forgedCallback struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (f *forgedCallback) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.buf.Write(p)
	for _, line := range strings.Split(string(p), "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "http") || !strings.Contains(line, "/authorize?") {
			continue
		}
		u, err := url.Parse(line)
		if err != nil {
			continue
		}
		redirect := u.Query().Get("redirect_uri")
		go func() {
			resp, err := http.Get(redirect + "?code=forged&state=forged")
			if err == nil {
				resp.Body.Close()
			}
		}()
	}
	return len(p), nil
}

func (f *forgedCallback) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.buf.String()
}
