package healthd

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/toolbus/toolbus/pkg/mcpwire/oauth"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/engineering"
	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/mcpwire"
	"github.com/toolbus/toolbus/pkg/messages"
)

// Result is the outcome of one probe.
type Result struct {
	// Latency is how long the probe took: connecting (for stdio, starting the server),
	// the handshake and tools/list.
	Latency time.Duration
	// Protocol is the negotiated MCP protocol version; empty for plain JSON-RPC.
	Protocol string
	Tools    int
	// Err is why the probe failed; nil means the server answered.
	Err error
	// Note says what is wrong with a server that answered: the local tools that
	// cannot be used.
	Note string
	// Pending: no verdict yet — the executor is still starting the server. The
	// server's state and failure count stay as they were.
	Pending bool
	// Via says whose session the probe went over ([messages.HealthStatus.Via]).
	Via string
	// Transport is the one the session uses when it is not the configured one (an
	// entry without a type that fell back to HTTP+SSE): the status shows it.
	Transport string
}

// Target is one thing healthd probes: a configured server, the local tools or the
// engineering suite. Probe must return when ctx is done.
type Target struct {
	Name      string
	Transport string
	Probe     func(ctx context.Context) Result
	// Timeout, when set, is this target's time limit instead of the prober's: a
	// server's probeTimeout, and at least the server's own timeout (its `timeout`,
	// default 60s) for a stdio server, whose probe may have to start its process (`npx
	// -y` fetching a package cold takes seconds) when no executor serves it.
	Timeout time.Duration
	// spec is the configuration the target was built from: a target whose spec changes
	// with a configuration reload is probed anew.
	spec string
}

// Transport of the in-process backends.
const inProcess = "in-process"

// TargetOptions configures [Targets].
type TargetOptions struct {
	// HTTPClient is the base client of http, sse and jsonrpc probes; the server's
	// headers are added to it. Default: a client whose requests time out after
	// RequestTimeout.
	HTTPClient *http.Client
	// RequestTimeout bounds each HTTP request of a probe when HTTPClient is nil.
	// Default 5s.
	RequestTimeout time.Duration
	// BaseDir is what the local folders are relative to. Default: the folder of the
	// configuration file.
	BaseDir string
	// Tokens holds the OAuth grants of http servers (the executor's): a server that
	// requires authorization is probed with its grant, and is "needs_login" without.
	Tokens oauth.TokenStore
	// Conn, when set, is how a server is probed over the executors' live sessions
	// ([AnswerProbes]); only a server no executor serves gets a session (for stdio, a
	// process) of the probe's own. Without it every probe opens its own.
	Conn *nats.Conn
}

// Targets returns what cfg asks healthd to probe: "local" (the tools folder and the
// built-in tools), "engineering" when it is on, then every enabled server by name whose
// "health" is not false.
func Targets(cfg *config.Config, opts *TargetOptions) []Target {
	var o TargetOptions
	if opts != nil {
		o = *opts
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = DefaultTimeout
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: o.RequestTimeout}
	}
	if o.BaseDir == "" && cfg.Source != "" {
		o.BaseDir = filepath.Dir(cfg.Source)
	}
	local := localTarget(cfg.Local, o.BaseDir)
	spec, _ := json.Marshal(cfg.Local)
	local.spec = o.BaseDir + string(spec)
	targets := []Target{local}
	if config.On(cfg.Engineering.Enabled) {
		n := len(engineering.New(&engineering.Options{Expose: cfg.Engineering.Expose}).Tools())
		targets = append(targets, Target{Name: "engineering", Transport: inProcess, spec: cfg.Engineering.Expose, Probe: func(context.Context) Result {
			return Result{Tools: n}
		}})
	}
	for _, name := range cfg.ServerNames() {
		if sc := cfg.MCPServers[name]; sc.Probed() {
			targets = append(targets, serverTarget(name, sc, o))
		}
	}
	return targets
}

// closeGrace is how long closing a probed session may take: a stdio server gets two
// seconds to exit (mcpwire's grace) before it is killed.
const closeGrace = 2 * time.Second

// serverTarget probes a configured server: over an executor's live session when o.Conn
// is set and an executor serves it, else through mcpwire.Probe, which dials it exactly
// as the executor's pool does.
func serverTarget(name string, sc mcpwire.ServerConfig, o TargetOptions) Target {
	spec, _ := json.Marshal(sc)
	limit := time.Duration(sc.ProbeTimeout)
	if sc.Transport() == mcpwire.TransportStdio {
		limit = max(limit, sc.CallTimeout())
	}
	live := cmp.Or(time.Duration(sc.ProbeTimeout), o.RequestTimeout)
	var last atomic.Int64 // when the previous probe started (Unix nanoseconds)
	return Target{Name: name, Transport: string(sc.Transport()), spec: string(spec), Timeout: limit, Probe: func(ctx context.Context) Result {
		now := time.Now()
		since := now
		if prev := last.Swap(now.UnixNano()); prev != 0 {
			since = time.Unix(0, prev)
		}
		if o.Conn != nil {
			if r, err := askExecutors(ctx, o.Conn, name, since, live); !errors.Is(err, errNotServed) {
				return r
			}
		}
		r := mcpwire.Probe(ctx, name, sc, &mcpwire.ProbeOptions{HTTPClient: o.HTTPClient, ClientName: "toolbus-healthd", Tokens: o.Tokens})
		return Result{Latency: r.Latency, Protocol: r.Protocol, Tools: r.Tools, Err: r.Err, Note: r.Note, Via: "probe", Transport: r.Transport}
	}}
}

// localTarget checks the local tools: the tools folder can be read and its tools are
// usable (manifest valid, executable present and executable), and the knowledge base
// and file_writer folders exist. Tools that cannot be used are a note, not a failure:
// the others still work.
func localTarget(c localtools.Config, baseDir string) Target {
	path := func(p string) string {
		if filepath.IsAbs(p) || baseDir == "" {
			return p
		}
		return filepath.Join(baseDir, p)
	}
	var mu sync.Mutex
	var folder *localtools.Folder // kept, so that unchanged tools are not reloaded
	probe := func(context.Context) Result {
		start := time.Now()
		var r Result
		var errs []error
		if c.Clock == nil || *c.Clock {
			r.Tools++
		}
		for _, dir := range []struct {
			key, path string
			enabled   *bool
		}{
			{"knowledge_base.folder", c.KnowledgeBase.Folder, c.KnowledgeBase.Enabled},
			{"file_writer.root", c.FileWriter.Root, c.FileWriter.Enabled},
		} {
			if dir.path == "" || (dir.enabled != nil && !*dir.enabled) {
				continue
			}
			if fi, err := os.Stat(path(dir.path)); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", dir.key, err))
			} else if !fi.IsDir() {
				errs = append(errs, fmt.Errorf("%s: %s is not a folder", dir.key, dir.path))
			} else {
				r.Tools++
			}
		}
		if tc := c.Tools; tc.Folder != "" && (tc.Enabled == nil || *tc.Enabled) {
			mu.Lock()
			var err error
			if folder == nil {
				folder, err = localtools.NewFolder(path(tc.Folder), &localtools.FolderOptions{RescanInterval: time.Hour})
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("tools.folder: %w", err))
			} else if _, statErr := os.Stat(folder.Dir()); statErr != nil {
				errs = append(errs, fmt.Errorf("tools.folder: %w", statErr))
			} else {
				if problems := folder.Rescan(); problems != nil {
					r.Note = "tools skipped: " + strings.ReplaceAll(problems.Error(), "\n", "; ")
				}
				r.Tools += len(folder.Tools())
			}
			mu.Unlock()
		}
		r.Latency, r.Err = time.Since(start), errors.Join(errs...)
		return r
	}
	return Target{Name: "local", Transport: inProcess, Probe: probe}
}

// ProbeAll probes every target once, all at the same time, each under timeout, and
// returns their statuses in the targets' order: up when the probe succeeded, down when
// it failed. It is `toolbus health --probe`.
func ProbeAll(ctx context.Context, targets []Target, timeout time.Duration) []messages.HealthStatus {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	out := make([]messages.HealthStatus, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Go(func() {
			r := runProbe(ctx, t, timeout, nil)
			st := messages.HealthStatus{Server: t.Name, Transport: cmp.Or(r.Transport, t.Transport)}
			out[i] = Next(st, r, 1, time.Now().UTC())
		})
	}
	wg.Wait()
	return out
}

// runProbe runs one probe under timeout. A probe that does not return in time (plus a
// grace for closing) is reported as failed and left to finish on its own; exited, when
// set, is called when it does.
func runProbe(ctx context.Context, t Target, timeout time.Duration, exited func()) Result {
	if t.Timeout > 0 {
		timeout = t.Timeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	done := make(chan Result, 1)
	start := time.Now()
	go func() {
		defer cancel()
		if exited != nil {
			defer exited()
		}
		defer func() {
			if p := recover(); p != nil {
				done <- Result{Latency: time.Since(start), Err: fmt.Errorf("the probe crashed: %v", p)}
			}
		}()
		done <- t.Probe(ctx)
	}()
	hard := time.NewTimer(timeout + 2*closeGrace)
	defer hard.Stop()
	select {
	case r := <-done:
		if r.Latency == 0 {
			r.Latency = time.Since(start)
		}
		return r
	case <-hard.C:
		return Result{Latency: time.Since(start), Err: fmt.Errorf("no answer within %v", timeout)}
	}
}
