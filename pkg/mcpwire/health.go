package mcpwire

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// callFailure is a call whose connection failed before the server answered it: when,
// and why.
type callFailure struct {
	at  int64 // unix nanoseconds
	err error
}

// Liveness says what [Pool.Check] could tell of a server.
type Liveness int

const (
	// NotServed: the pool has no such server (not configured here, disabled, or the
	// pool has not started).
	NotServed Liveness = iota
	// Starting: the server's first connection attempt is still under way (a stdio
	// server that takes seconds to start, `npx -y` fetching a package): no verdict yet.
	Starting
	// Checked: the result says how the server's live session is.
	Checked
)

// Check probes a server over the pool's live session — the one that serves its calls —
// never over a session or process of its own: tools/list on that session (every
// protocol version has it; 2026-07-28 has no ping), within ctx — except for a server
// whose configuration declares its tools, which is never asked for them: ping, or
// where its protocol has none, its live session ([declaredAlive]). A server whose session
// is down fails with why it is (the last connection attempt's error); one whose first
// connection attempt is under way is [Starting]. A server that answered a call at or
// after since is up whatever the probe met (a single-threaded server busy with a long
// call answers tools/list late): its calls work. One whose calls since then met a broken
// connection, none answered, fails whatever the probe would meet: its calls do not work.
func (p *Pool) Check(ctx context.Context, name string, since time.Time) (ProbeResult, Liveness) {
	s, ok := p.server(name)
	if !ok || p.closed.Load() {
		return ProbeResult{}, NotServed
	}
	p.mu.RLock()
	started := s.started
	p.mu.RUnlock()
	if !started {
		return ProbeResult{}, NotServed
	}
	answered := func() bool { return s.answered.Load() >= since.UnixNano() }
	start := time.Now()
	s.mu.Lock()
	sess, lastErr, tools := s.sess, s.err, len(s.tools)
	s.mu.Unlock()
	if sess == nil || isDone(sess.done()) {
		select {
		case <-s.tried:
		default:
			return ProbeResult{Note: "the executor is starting the server"}, Starting
		}
		if answered() {
			return ProbeResult{Tools: tools, Note: "no session at the moment, but calls were answered since the last probe"}, Checked
		}
		if lastErr == nil {
			lastErr = errors.New("not connected")
		}
		return ProbeResult{Latency: time.Since(start), Err: fmt.Errorf("no live session: %w", lastErr)}, Checked
	}
	r := ProbeResult{Transport: fellBack(s.cfg, sess)}
	if _, version := sess.describe(); version != "" {
		r.Protocol = version
	}
	if f := s.unanswered.Load(); f != nil && f.at >= since.UnixNano() && !answered() {
		// Health follows the calls: what they met since the last check, none answered,
		// is what the server is, whatever one probe on the session meets now.
		r.Latency, r.Err = time.Since(start), fmt.Errorf("its calls since the last check were not answered: %w", f.err)
		return r, Checked
	}
	if len(s.cfg.Tools) > 0 {
		r.Tools, r.Note, r.Err = declaredAlive(ctx, sess, tools, answered())
		r.Latency = time.Since(start)
		return r, Checked
	}
	listed, err := sess.listTools(ctx)
	r.Latency = time.Since(start)
	switch {
	case err == nil:
		r.Tools = len(listed)
	case isMethodNotFound(err):
		// A service without tools/list is up, with what the configuration declares.
		r.Tools = tools
	case answered():
		r.Tools = tools
		r.Note = fmt.Sprintf("tools/list on the live session failed (%v), but calls were answered meanwhile", describe(ctx, "tools/list", err))
	default:
		r.Err = describe(ctx, "tools/list", err)
	}
	return r, Checked
}

// declaredAlive checks a live session of a server whose configuration declares its
// tools (n of them), which is never asked for its tools: by ping, or — where its
// protocol has none — by the session itself, live, and answered: whether a call was
// answered since the last check.
func declaredAlive(ctx context.Context, sess session, n int, answered bool) (tools int, note string, err error) {
	switch err := sess.ping(ctx); {
	case err == nil:
		return n, "", nil
	case errors.Is(err, errNoPing) || isMethodNotFound(err):
		note := "its tools are declared and its protocol has no ping: judged by its session"
		if answered {
			note += " and the calls it answered"
		}
		return n, note, nil
	case answered:
		return n, fmt.Sprintf("ping failed (%v), but calls were answered meanwhile", describe(ctx, "ping", err)), nil
	default:
		return 0, "", describe(ctx, "ping", err)
	}
}

// isMethodNotFound reports whether err is the server's "method not found".
func isMethodNotFound(err error) bool {
	var werr *jsonrpc.Error
	return errors.As(err, &werr) && werr.Code == codeMethodNotFound
}
