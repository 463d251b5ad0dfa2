package cli

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/toolbus/toolbus/pkg/mcpwire/oauth"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/mcpwire"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/tokens"
)

// authCmd is `toolbus auth login|status|logout`: the OAuth logins of http servers,
// kept sealed in the deployment's bucket for every executor replica.
func authCmd(ctx context.Context, env Env, args []string) error {
	usage := func() error {
		fmt.Fprint(env.Stderr, `usage: toolbus auth <login|status|logout> [flags] [SERVER]

  login SERVER    authorize toolbus with an http server that requires OAuth: open the
                  printed URL, log in, and the redirect comes back to a local port (or
                  paste the URL the browser ended on); every executor then uses the grant
  status          the grants kept, without their tokens
  logout SERVER   forget the server's grant

The grants are sealed with the key in `+tokens.EnvKey+` (or the file `+tokens.EnvKeyFile+`
names), the same on every toolbus process.
`)
		return usageError{errors.New("auth: a subcommand is needed")}
	}
	if len(args) == 0 {
		return usage()
	}
	switch args[0] {
	case "login":
		return authLoginCmd(ctx, env, args[1:])
	case "status":
		return authStatusCmd(ctx, env, args[1:])
	case "logout":
		return authLogoutCmd(ctx, env, args[1:])
	}
	return usage()
}

// tokenKey reads the key that seals OAuth grants from the environment now
// (TOOLBUS_TOKEN_KEY, TOOLBUS_TOKEN_KEY_FILE), and decodes it when asked.
func tokenKey(env Env) func() ([]byte, error) {
	vals := map[string]string{tokens.EnvKey: env.getenv(tokens.EnvKey), tokens.EnvKeyFile: env.getenv(tokens.EnvKeyFile)}
	return func() ([]byte, error) {
		return tokens.KeyFromEnv(func(k string) (string, bool) { v := vals[k]; return v, v != "" })
	}
}

// authStore connects to the deployment's NATS and opens its grants.
func authStore(ctx context.Context, env Env, cf connectFlags, cfg *config.Config) (*tokens.Store, func(), error) {
	nc, err := cf.connect("toolbus auth", cfg, nil)
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	key, err := tokenKey(env)()
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	store, err := tokens.Open(ctx, js, key)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("%w (is toolbus provisioned on %s? `toolbus provision` or `toolbus serve` creates it)", err, redactURLs(cf.URL(cfg)))
	}
	return store, nc.Close, nil
}

func authLoginCmd(ctx context.Context, env Env, args []string) error {
	fs := newFlags("auth login", env)
	cfgPath := fs.String("config", envDefault(env, "config", ""), "configuration file naming the server")
	cf := addConnectFlags(fs, env)
	open := fs.String("open", "", "command run with the authorization URL as its last argument (e.g. xdg-open); default: print it only")
	timeout := fs.Duration("timeout", 5*time.Minute, "how long the login may take")
	servers, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(servers) != 1 {
		return usageError{errors.New("auth login: name one server")}
	}
	name := servers[0]
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	sc, ok := cfg.MCPServers[name]
	if !ok {
		return fmt.Errorf("no server %q in %s", name, orDefault(cfg.Source, "the configuration"))
	}
	if sc.Transport() != mcpwire.TransportHTTP {
		return fmt.Errorf("%s is a %s server: only an http server takes an OAuth login", name, sc.Transport())
	}
	if sc.OAuth != nil && sc.OAuth.Grant == oauth.GrantClientCredentials {
		return fmt.Errorf("%s uses the client credentials grant: it needs no login", name)
	}
	// Without a key the grant could not be kept: say so before the user logs in.
	if key, err := tokenKey(env)(); err != nil || key == nil {
		return cmp.Or(err, tokens.ErrNoKey)
	}
	store, closeNATS, err := authStore(ctx, env, cf, cfg)
	if err != nil {
		return err
	}
	defer closeNATS()
	ui := &loginUI{env: env, open: *open, paste: true}
	defer ui.close()
	// The login is the connection's first request: give it the login's time.
	sc.Timeout = messages.Duration(*timeout)
	fresh := &freshLogin{TokenStore: store}
	pool, err := mcpwire.NewPool(map[string]mcpwire.ServerConfig{name: sc}, &mcpwire.Options{Tokens: fresh, Login: ui.login})
	if err != nil {
		return err
	}
	defer pool.Close()
	lctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err := pool.Connect(lctx); err != nil {
		return fmt.Errorf("login to %s: %w", name, err)
	}
	g := fresh.saved()
	if g == nil {
		fmt.Fprintf(env.Stdout, "%s answered without asking for authorization: nothing to keep\n", name)
		return nil
	}
	tools := 0
	for _, st := range pool.Status() {
		tools = st.Tools
	}
	fmt.Fprintf(env.Stdout, "authorized toolbus with %s (%d tools; %s); the grant is kept sealed for every executor\n", name, tools, describeGrant(g))
	return nil
}

// openAuth is the start of `auth status` and `auth logout`: their flags, the
// configuration, the grants; servers is how many server names the command takes.
func openAuth(ctx context.Context, env Env, name string, args []string, servers int) ([]string, *config.Config, *tokens.Store, func(), error) {
	fs := newFlags(name, env)
	cfgPath := fs.String("config", envDefault(env, "config", ""), "configuration file")
	cf := addConnectFlags(fs, env)
	names, err := parseInterleaved(fs, args)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if len(names) != servers {
		return nil, nil, nil, nil, usageError{fmt.Errorf("%s: name %d server(s)", name, servers)}
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	store, closeNATS, err := authStore(ctx, env, cf, cfg)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	return names, cfg, store, closeNATS, nil
}

func authStatusCmd(ctx context.Context, env Env, args []string) error {
	_, cfg, store, closeNATS, err := openAuth(ctx, env, "auth status", args, 0)
	if err != nil {
		return err
	}
	defer closeNATS()
	names := map[string]bool{}
	for name, sc := range cfg.MCPServers {
		if sc.Transport() == mcpwire.TransportHTTP && (sc.OAuth == nil || sc.OAuth.Grant != oauth.GrantClientCredentials) {
			names[name] = true
		}
	}
	stored, err := store.Servers(ctx)
	if err != nil && !errors.Is(err, jetstream.ErrNoKeysFound) {
		return err
	}
	for _, n := range stored {
		names[n] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tGRANT")
	for _, n := range sorted {
		g, err := store.Load(ctx, n)
		state := ""
		switch {
		case err != nil:
			state = err.Error()
		case g == nil:
			state = "none: `toolbus auth login " + n + "` if the server requires OAuth"
		default:
			state = describeGrant(g)
			if sc, ok := cfg.MCPServers[n]; ok && sc.URL != g.URL {
				state += "; given for another URL, not used"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\n", n, state)
	}
	return tw.Flush()
}

// authLogoutCmd forgets a server's grant; the running executors see it at once (they
// follow the bucket). A server that is neither configured nor holds a grant is an error:
// a misspelled name must not read as a logout.
func authLogoutCmd(ctx context.Context, env Env, args []string) error {
	servers, cfg, store, closeNATS, err := openAuth(ctx, env, "auth logout", args, 1)
	if err != nil {
		return err
	}
	defer closeNATS()
	name := servers[0]
	stored, err := store.Servers(ctx)
	if err != nil && !errors.Is(err, jetstream.ErrNoKeysFound) {
		return err
	}
	_, configured := cfg.MCPServers[name]
	if !slices.Contains(stored, name) {
		if !configured {
			return fmt.Errorf("auth logout: no server %q is configured and no grant of it is stored (grants are kept for: %s)", name, orDefault(strings.Join(stored, ", "), "none"))
		}
		fmt.Fprintf(env.Stdout, "%s has no grant stored: nothing to forget\n", name)
		return nil
	}
	if err := store.Delete(ctx, name); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "forgot the grant of %s; running executors stop using it now\n", name)
	return nil
}

// parseInterleaved parses flags written before and after the arguments
// (`toolbus auth login notion --config toolbus.json`) and returns the arguments.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var rest []string
	for {
		if err := parseFlags(fs, args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return rest, nil
		}
		rest, args = append(rest, fs.Arg(0)), fs.Args()[1:]
	}
}

// describeGrant says what a grant holds, never its tokens.
func describeGrant(g *oauth.Grant) string {
	var parts []string
	if g.Token != nil && !g.Token.Expiry.IsZero() {
		if d := time.Until(g.Token.Expiry); d > 0 {
			parts = append(parts, "token valid for "+d.Round(time.Second).String())
		} else {
			parts = append(parts, "token expired "+(-d).Round(time.Second).String()+" ago")
		}
	} else {
		parts = append(parts, "token without expiry")
	}
	if g.Token != nil && g.Token.RefreshToken != "" {
		parts = append(parts, "refreshable")
	} else {
		parts = append(parts, "not refreshable")
	}
	if len(g.Scopes) > 0 {
		parts = append(parts, "scopes "+strings.Join(g.Scopes, " "))
	}
	parts = append(parts, "client "+g.ClientID, "since "+g.Updated.Format(time.RFC3339))
	return strings.Join(parts, ", ")
}

// freshLogin hides the grant already stored, so that `auth login` logs in again, and
// remembers the one the login saves.
type freshLogin struct {
	oauth.TokenStore
	mu  sync.Mutex
	new *oauth.Grant
}

func (f *freshLogin) Load(ctx context.Context, server string) (*oauth.Grant, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.new, nil
}

func (f *freshLogin) Save(ctx context.Context, server string, g *oauth.Grant) error {
	if err := f.TokenStore.Save(ctx, server, g); err != nil {
		return err
	}
	f.mu.Lock()
	f.new = g
	f.mu.Unlock()
	return nil
}

func (f *freshLogin) saved() *oauth.Grant {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.new
}

// loginUI is a user's side of an authorization-code login on this machine: the
// authorization URL printed (and opened with a command, when one is given), the redirect
// received on a local port, or the URL the browser ended on pasted on stdin.
type loginUI struct {
	env   Env
	open  string
	paste bool

	mu        sync.Mutex
	listeners []net.Listener
}

// login makes a server's callback: http://127.0.0.1:PORT/callback, PORT the entry's
// callbackPort or a free one.
func (u *loginUI) login(server string, cfg oauth.Config) (*oauth.Login, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.CallbackPort)))
	if err != nil {
		return nil, fmt.Errorf("%s: the login's callback port: %w", server, err)
	}
	u.mu.Lock()
	u.listeners = append(u.listeners, ln)
	u.mu.Unlock()
	redirect := "http://" + ln.Addr().String() + "/callback"
	answers := make(chan url.Values, 1)
	// state is the one the authorization URL carries: a callback with another (or none)
	// did not come from the authorization server's redirect of this login.
	var stateMu sync.Mutex
	state := ""
	mux := http.NewServeMux()
	mux.HandleFunc("/callback", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		select {
		case answers <- q:
		default:
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		stateMu.Lock()
		want := state
		stateMu.Unlock()
		if q.Get("state") != want {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, "<p>toolbus: this is not the redirect of toolbus's login to %s (its state does not match); the login stopped.</p>", html.EscapeString(server))
			return
		}
		if e := q.Get("error"); e != "" {
			fmt.Fprintf(w, "<p>toolbus: %s refused the authorization: %s</p>", html.EscapeString(server), html.EscapeString(e))
			return
		}
		fmt.Fprintf(w, "<p>toolbus is authorized with %s. You may close this page.</p>", html.EscapeString(server))
	})
	go func() { _ = (&http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}).Serve(ln) }()
	if u.paste {
		go func() {
			sc := bufio.NewScanner(u.env.Stdin)
			for sc.Scan() {
				if pu, err := url.Parse(strings.TrimSpace(sc.Text())); err == nil && (pu.Query().Has("code") || pu.Query().Has("error")) {
					select {
					case answers <- pu.Query():
					default:
					}
					return
				}
			}
		}()
	}
	fetch := func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
		if au, err := url.Parse(args.URL); err == nil {
			stateMu.Lock()
			state = au.Query().Get("state")
			stateMu.Unlock()
		}
		fmt.Fprintf(u.env.Stderr, "toolbus: %s requires a login. Open this URL in a browser and authorize toolbus:\n\n  %s\n\n", server, args.URL)
		if u.paste {
			fmt.Fprintf(u.env.Stderr, "The browser comes back to %s; if that page cannot be reached from the browser's machine, paste the URL it ended on here.\n", redirect)
		}
		if u.open != "" {
			fields := strings.Fields(u.open)
			cmd := exec.CommandContext(ctx, fields[0], append(fields[1:], args.URL)...)
			cmd.Stdout, cmd.Stderr = io.Discard, u.env.Stderr
			if err := cmd.Start(); err != nil {
				fmt.Fprintf(u.env.Stderr, "toolbus: --open %s: %v\n", u.open, err)
			} else {
				go func() { _ = cmd.Wait() }()
			}
		}
		select {
		case q := <-answers:
			stateMu.Lock()
			want := state
			stateMu.Unlock()
			if q.Get("state") != want {
				return nil, fmt.Errorf("%s: a callback came with another state than the login's: it is not the authorization server's redirect of this login (forged, or left from an older login); the login stopped, run it again", server)
			}
			if e := q.Get("error"); e != "" {
				return nil, fmt.Errorf("the authorization server refused: %s %s", e, q.Get("error_description"))
			}
			return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
		case <-ctx.Done():
			return nil, fmt.Errorf("%s: no login within the time given: %w", server, ctx.Err())
		}
	}
	return &oauth.Login{RedirectURL: redirect, Fetch: fetch}, nil
}

// close stops listening for callbacks.
func (u *loginUI) close() {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, ln := range u.listeners {
		_ = ln.Close()
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
