package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/messages"
)

// Defaults of [BreakerOptions].
const (
	DefaultCoolDown         = 5 * time.Second
	DefaultStaleAfter       = time.Minute
	DefaultFailureThreshold = 5
)

// BreakerOptions configures a [Breaker]. The zero value means the defaults.
type BreakerOptions struct {
	// CoolDown is how long an open circuit refuses every call before it lets one
	// trial call through (half-open). Default 5s.
	CoolDown time.Duration
	// StaleAfter is the age of a probe past which a "down" status is ignored: healthd
	// may have stopped, and calls should not be refused on old news. Default 1m.
	StaleAfter time.Duration
	// FailureThreshold is the number of consecutive calls that failed with
	// server_unavailable, timeout or outcome_unknown after which the circuit opens
	// without waiting for healthd. Default 5; negative: only healthd opens it.
	FailureThreshold int
	// Now is the clock. Default time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Breaker is the executor's [Gate]: a circuit breaker per MCP server, fed by healthd's
// statuses ([Breaker.SetHealth], normally through [WatchHealth]) and by the outcome of
// the calls it let through ([Breaker.Report]). Backends other than "mcp:<server>" run
// in process and are always allowed.
//
// A circuit is open while healthd marks the server down — unless that probe is older
// than StaleAfter, or a call has succeeded since that status arrived — or after
// FailureThreshold consecutive calls failed with server_unavailable, timeout or
// outcome_unknown. An open circuit answers server_unavailable at once, without trying
// the server. CoolDown after it opened, and after each failed trial, it lets one call
// through (half-open): success closes the circuit, failure keeps it open for another
// CoolDown. A newer "down" status opens it again.
//
// In the executor, a refused call is answered at once: no attempt, no retry, no
// redelivery.
//
// Use:
//
//	gate := executor.NewBreaker(&executor.BreakerOptions{StaleAfter: 4 * cfg.HealthInterval()})
//	if err := executor.WatchHealth(ctx, healthKV, gate); err != nil {
//		return err
//	}
//	exec.Gate = gate
//
// Allow and Report take a mutex and read memory only: no call costs a round trip.
type Breaker struct {
	opts BreakerOptions

	mu       sync.Mutex
	circuits map[string]*circuit // by server name
	keys     map[string]string   // bucket key → server name, to handle deletes
}

type circuit struct {
	health *messages.HealthStatus // the last status from healthd, if any
	// overridden is the CheckedAt of the "down" status that a successful call has
	// overruled; the next probe's status counts again.
	overridden time.Time
	failures   int       // consecutive transient failures reported
	lastErr    string    // the message of the last of them: what is wrong with the server
	openedAt   time.Time // when the circuit last opened; zero while closed
	trialAt    time.Time // when the last trial call was let through
}

// NewBreaker returns a breaker with every circuit closed.
func NewBreaker(opts *BreakerOptions) *Breaker {
	var o BreakerOptions
	if opts != nil {
		o = *opts
	}
	if o.CoolDown <= 0 {
		o.CoolDown = DefaultCoolDown
	}
	if o.StaleAfter <= 0 {
		o.StaleAfter = DefaultStaleAfter
	}
	if o.FailureThreshold == 0 {
		o.FailureThreshold = DefaultFailureThreshold
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Breaker{opts: o, circuits: map[string]*circuit{}, keys: map[string]string{}}
}

// serverOf returns the MCP server of a backend name, or "" for in-process backends.
func serverOf(backend string) string {
	server, _ := strings.CutPrefix(backend, "mcp:")
	if server == backend {
		return ""
	}
	return server
}

func (b *Breaker) circuit(server string) *circuit {
	c := b.circuits[server]
	if c == nil {
		c = &circuit{}
		b.circuits[server] = c
	}
	return c
}

// markedDown reports whether healthd's status, still fresh and not overruled, says the
// server is down.
func (b *Breaker) markedDown(c *circuit, now time.Time) bool {
	h := c.health
	return h != nil && h.State == messages.HealthDown && now.Sub(h.CheckedAt) < b.opts.StaleAfter &&
		!h.CheckedAt.Equal(c.overridden)
}

// isOpen reports whether c's circuit is open, changing nothing.
func (b *Breaker) isOpen(c *circuit, now time.Time) bool {
	return b.markedDown(c, now) || (b.opts.FailureThreshold > 0 && c.failures >= b.opts.FailureThreshold)
}

// open is isOpen, and starts or ends the open period.
func (b *Breaker) open(c *circuit, now time.Time) bool {
	isOpen := b.isOpen(c, now)
	if !isOpen {
		c.openedAt, c.trialAt = time.Time{}, time.Time{}
	} else if c.openedAt.IsZero() {
		c.openedAt = now
	}
	return isOpen
}

// Allow returns nil when a call to backend may go ahead, and otherwise a
// *messages.ToolError with code server_unavailable, marked Unsent.
func (b *Breaker) Allow(backend string) error {
	server := serverOf(backend)
	if server == "" {
		return nil
	}
	now := b.opts.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.circuit(server)
	if !b.open(c, now) {
		return nil
	}
	since := c.openedAt
	if c.trialAt.After(since) {
		since = c.trialAt
	}
	if wait := b.opts.CoolDown - now.Sub(since); wait > 0 {
		return b.refusal(server, c, wait)
	}
	c.trialAt = now
	b.opts.Logger.Info("breaker: trial call", "server", server)
	return nil
}

func (b *Breaker) refusal(server string, c *circuit, wait time.Duration) error {
	why := fmt.Sprintf("%d attempts in a row failed", c.failures)
	if c.lastErr != "" {
		why += ", the last with: " + c.lastErr
	}
	if h := c.health; h != nil && h.State == messages.HealthDown {
		why = fmt.Sprintf("%d health probes in a row failed", h.Failures)
		if h.Error != "" {
			why += ", the last with: " + h.Error
		}
	}
	return &messages.ToolError{
		Code: messages.CodeServerUnavailable,
		Message: fmt.Sprintf("the server %q is down (%s); this attempt was not sent to it. It will be tried again in %v.",
			server, why, wait.Round(100*time.Millisecond)),
		Unsent: true,
	}
}

// Open reports, for every server the breaker has seen, whether its circuit is open now
// (calls refused, trials aside).
func (b *Breaker) Open() map[string]bool {
	now := b.opts.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]bool, len(b.circuits))
	for server, c := range b.circuits {
		out[server] = b.isOpen(c, now)
	}
	return out
}

// Report tells the breaker how a call it allowed ended. server_unavailable, timeout and
// outcome_unknown (the connection broke during the call) count as failures of the
// server; anything else, a tool's own error included, shows that the server answers.
func (b *Breaker) Report(backend string, err error) {
	server := serverOf(backend)
	if server == "" {
		return
	}
	failed := false
	if err != nil {
		if messages.AsToolError(err).Final {
			return // a server that needs a login answered at once: not a sign of trouble
		}
		code := messages.AsToolError(err).Code
		failed = code == messages.CodeServerUnavailable || code == messages.CodeTimeout || code == messages.CodeOutcomeUnknown
	}
	now := b.opts.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.circuit(server)
	wasOpen := b.open(c, now)
	if !failed {
		c.failures = 0
		if c.health != nil && c.health.State == messages.HealthDown {
			c.overridden = c.health.CheckedAt
		}
		c.openedAt, c.trialAt = time.Time{}, time.Time{}
		if wasOpen {
			b.opts.Logger.Info("breaker: closed after a successful call", "server", server)
		}
		return
	}
	c.failures++
	c.lastErr = messages.AsToolError(err).Message
	switch {
	case wasOpen:
		c.trialAt = now // the trial failed: wait another cool-down
	case b.open(c, now):
		b.opts.Logger.Warn("breaker: open after failed calls", "server", server, "failures", c.failures)
	}
}

// SetHealth takes a status from healthd into account.
func (b *Breaker) SetHealth(st messages.HealthStatus) {
	if st.Server == "" {
		return
	}
	now := b.opts.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.circuit(st.Server)
	wasDown := b.markedDown(c, now)
	c.health = &st
	if st.State == messages.HealthUp {
		c.failures = 0
	}
	b.open(c, now)
	if !wasDown && b.markedDown(c, now) {
		b.opts.Logger.Warn("breaker: open, healthd marks the server down", "server", st.Server, "err", st.Error)
	}
}

// Health returns the last status healthd gave for server.
func (b *Breaker) Health(server string) (messages.HealthStatus, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if c := b.circuits[server]; c != nil && c.health != nil {
		return *c.health, true
	}
	return messages.HealthStatus{}, false
}

// forget drops healthd's status of the server stored under key.
func (b *Breaker) forget(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if server, ok := b.keys[key]; ok {
		if c := b.circuits[server]; c != nil {
			c.health = nil
		}
		delete(b.keys, key)
	}
}

func (b *Breaker) setKey(key, server string) {
	b.mu.Lock()
	b.keys[key] = server
	b.mu.Unlock()
}

// WatchHealth feeds b with the statuses of the health bucket: it returns once the
// current ones are loaded (or ctx is done), and keeps watching, re-watching after
// failures, until ctx is done.
func WatchHealth(ctx context.Context, kv jetstream.KeyValue, b *Breaker) error {
	w, err := kv.WatchAll(ctx)
	if err != nil {
		return fmt.Errorf("watch %s: %w", kv.Bucket(), err)
	}
	loaded := make(chan struct{})
	go func() {
		for {
			if w != nil {
				follow(ctx, w, b, loaded)
				_ = w.Stop()
			}
			if ctx.Err() != nil {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			if w, err = kv.WatchAll(ctx); err != nil {
				b.opts.Logger.Warn("breaker: watching health again", "err", err)
				w = nil
			}
		}
	}()
	select {
	case <-loaded:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// follow applies a watcher's entries until its channel closes; the nil entry marks the
// end of the initial values.
func follow(ctx context.Context, w jetstream.KeyWatcher, b *Breaker, loaded chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e == nil {
				select {
				case <-loaded:
				default:
					close(loaded)
				}
				continue
			}
			if e.Operation() != jetstream.KeyValuePut {
				b.forget(e.Key())
				continue
			}
			var st messages.HealthStatus
			if e.Key() == messages.HealthLeaderKey || json.Unmarshal(e.Value(), &st) != nil || st.Server == "" {
				continue
			}
			b.setKey(e.Key(), st.Server)
			b.SetHealth(st)
		}
	}
}
