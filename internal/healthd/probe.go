package healthd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolbus/toolbus/internal/config"
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
}

// Target is one thing healthd probes: a configured server, the local tools or the
// engineering suite. Probe must return when ctx is done.
type Target struct {
	Name      string
	Transport string
	Probe     func(ctx context.Context) Result
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
}

// Targets returns what cfg asks healthd to probe: "local" (the tools folder and the
// built-in tools), "engineering" when it is on, then every enabled server by name.
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
	targets := []Target{localTarget(cfg.Local, o.BaseDir)}
	if config.On(cfg.Engineering.Enabled) {
		n := len(engineering.New(&engineering.Options{Expose: cfg.Engineering.Expose}).Tools())
		targets = append(targets, Target{Name: "engineering", Transport: inProcess, Probe: func(context.Context) Result {
			return Result{Tools: n}
		}})
	}
	for _, name := range cfg.ServerNames() {
		sc := cfg.MCPServers[name]
		t := Target{Name: name, Transport: string(sc.Transport())}
		if sc.Transport() == mcpwire.TransportJSONRPC {
			t.Probe = func(ctx context.Context) Result { return probeJSONRPC(ctx, sc, o.HTTPClient) }
		} else {
			t.Probe = func(ctx context.Context) Result { return probeMCP(ctx, sc, o.HTTPClient) }
		}
		targets = append(targets, t)
	}
	return targets
}

// clientInfo is how healthd introduces itself to servers.
var clientInfo = &mcp.Implementation{Name: "toolbus-healthd", Version: "0.1.0"}

// closeGrace is how long a probed session gets to close before its server is killed.
const closeGrace = time.Second

// probeMCP opens a fresh session, lists the tools and closes the session. tools/list is
// the probe for every protocol version: servers of 2026-07-28 and later have no ping.
func probeMCP(ctx context.Context, sc mcpwire.ServerConfig, base *http.Client) Result {
	start := time.Now()
	var t mcp.Transport
	var cmd *exec.Cmd
	switch sc.Transport() {
	case mcpwire.TransportStdio:
		cmd = exec.Command(sc.Command, sc.Args...)
		cmd.Dir = sc.Cwd
		cmd.Env = os.Environ()
		for k, v := range sc.Env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		cmd.WaitDelay = closeGrace
		ownProcessGroup(cmd)
		defer killGroup(cmd)
		t = &mcp.CommandTransport{Command: cmd, TerminateDuration: closeGrace}
	case mcpwire.TransportHTTP:
		t = &mcp.StreamableClientTransport{
			Endpoint: sc.URL, HTTPClient: sc.HTTPClient(base), MaxRetries: -1, DisableStandaloneSSE: true,
		}
	case mcpwire.TransportSSE:
		t = &mcp.SSEClientTransport{Endpoint: sc.URL, HTTPClient: sc.HTTPClient(base)}
	default:
		return Result{Err: fmt.Errorf("unknown transport %q", sc.Type)}
	}
	// The SSE transport keeps Connect's context for the stream: cancel it only after
	// the session is closed.
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cs, err := mcp.NewClient(clientInfo, nil).Connect(sctx, t, nil)
	if err != nil {
		return Result{Latency: time.Since(start), Err: describe(ctx, "connect", err)}
	}
	defer closeBounded(cs, cmd)
	init := cs.InitializeResult()
	r := Result{Protocol: init.ProtocolVersion}
	if init.Capabilities != nil && init.Capabilities.Tools == nil {
		// A server without tools answered the handshake: it is up, with none.
		r.Latency = time.Since(start)
		return r
	}
	cursor := ""
	for range maxPages {
		res, err := cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			r.Latency, r.Err = time.Since(start), describe(ctx, "tools/list", err)
			return r
		}
		r.Tools += len(res.Tools)
		if cursor = res.NextCursor; cursor == "" {
			break
		}
	}
	r.Latency = time.Since(start)
	return r
}

// maxPages bounds tools/list pagination against a server that never stops paging.
const maxPages = 100

// closeBounded closes a probed session, killing a stdio server that does not exit in
// time, so that closing never holds the probe up for long.
func closeBounded(cs *mcp.ClientSession, cmd *exec.Cmd) {
	done := make(chan struct{})
	go func() {
		_ = cs.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(closeGrace):
		if cmd != nil {
			killGroup(cmd)
		}
		<-done
	}
}

// describe names the step that failed, and says "no answer within the timeout" rather
// than "context deadline exceeded".
func describe(ctx context.Context, step string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: no answer in time: %w", step, ctx.Err())
	}
	return fmt.Errorf("%s: %w", step, err)
}

// probeJSONRPC posts tools/list to a plain JSON-RPC service. Any JSON-RPC answer, an
// error included (a service without tools/list), means the service is up.
func probeJSONRPC(ctx context.Context, sc mcpwire.ServerConfig, base *http.Client) Result {
	start := time.Now()
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, sc.URL, bytes.NewReader(body))
	if err != nil {
		return Result{Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := sc.HTTPClient(base).Do(req)
	if err != nil {
		return Result{Latency: time.Since(start), Err: describe(ctx, "tools/list", err)}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	r := Result{Latency: time.Since(start)}
	if err != nil {
		r.Err = describe(ctx, "tools/list", err)
		return r
	}
	var answer struct {
		Result *struct {
			Tools []json.RawMessage `json:"tools"`
		} `json:"result"`
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	switch {
	case json.Unmarshal(data, &answer) == nil && answer.Error != nil:
		if answer.Error.Code != -32601 { // method not found: a service without tools
			r.Note = fmt.Sprintf("tools/list: %d %s", answer.Error.Code, answer.Error.Message)
		}
	case resp.StatusCode >= 500:
		r.Err = fmt.Errorf("tools/list: HTTP %s", resp.Status)
	case answer.Result != nil:
		r.Tools = len(answer.Result.Tools)
	default:
		r.Err = fmt.Errorf("tools/list: HTTP %s with no JSON-RPC answer", resp.Status)
	}
	return r
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
			st := messages.HealthStatus{Server: t.Name, Transport: t.Transport}
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
