package executor

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/toolbus/toolbus/pkg/messages"
)

// Defaults of [BreakerOptions].
const (
	DefaultCoolDown         = 5 * time.Second
	DefaultFailureThreshold = 5
)

// BreakerOptions configures a [Breaker]. The zero value means the defaults.
type BreakerOptions struct {
	// CoolDown is how long an open circuit refuses every call before it lets one
	// trial call through (half-open). Default 5s.
	CoolDown time.Duration
	// FailureThreshold is the number of consecutive calls that failed with
	// server_unavailable, timeout or outcome_unknown after which the circuit opens.
	// Default 5; negative: never.
	FailureThreshold int
	// Now is the clock. Default time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Breaker is the executor's [Gate]: a circuit breaker per MCP server, fed by the
// outcome of the calls it let through ([Breaker.Report]) and by nothing else — the
// calls are what the breaker protects, so their outcomes, not a health probe's opinion,
// decide (passive outlier detection, as Envoy's): a server whose calls succeed is never
// refused. Backends other than "mcp:<server>" run in process and are always allowed.
//
// A circuit opens after FailureThreshold consecutive calls failed with
// server_unavailable, timeout or outcome_unknown; a failure that is final at once (a
// configuration or authentication failure, a server that needs a login) is not the
// server's trouble and counts for nothing. An open circuit answers server_unavailable
// at once, without trying the server. CoolDown after it opened, and after each failed
// trial, it lets one call through (half-open): success (or a tool's own error: the
// server answered) closes the circuit, failure keeps it open for another CoolDown.
//
// In the executor, a refused call is answered at once: no attempt, no retry, no
// redelivery.
//
// Use:
//
//	exec.Gate = executor.NewBreaker(nil)
//
// Allow and Report take a mutex and read memory only: no call costs a round trip.
type Breaker struct {
	opts BreakerOptions

	mu       sync.Mutex
	circuits map[string]*circuit // by server name
}

type circuit struct {
	failures int       // consecutive transient failures reported
	lastErr  string    // the message of the last of them: what is wrong with the server
	openedAt time.Time // when the circuit last opened; zero while closed
	trialAt  time.Time // when the last trial call was let through
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
	if o.FailureThreshold == 0 {
		o.FailureThreshold = DefaultFailureThreshold
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Breaker{opts: o, circuits: map[string]*circuit{}}
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

// isOpen reports whether c's circuit is open, changing nothing.
func (b *Breaker) isOpen(c *circuit) bool {
	return b.opts.FailureThreshold > 0 && c.failures >= b.opts.FailureThreshold
}

// open is isOpen, and starts or ends the open period.
func (b *Breaker) open(c *circuit, now time.Time) bool {
	isOpen := b.isOpen(c)
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
	why := fmt.Sprintf("%d calls in a row failed", c.failures)
	if c.lastErr != "" {
		why += ", the last with: " + c.lastErr
	}
	// Final: this call is answered now and nothing retries it. The model may call
	// again; the first call after the cool-down goes through as a trial.
	return &messages.ToolError{
		Code: messages.CodeServerUnavailable,
		Message: fmt.Sprintf("the server %q is failing (%s); this call was not sent to it and will not be retried. A call made after %v is let through to try the server again.",
			server, why, wait.Round(100*time.Millisecond)),
		Unsent: true,
	}
}

// Open reports, for every server the breaker has seen, whether its circuit is open
// (calls refused, trials aside).
func (b *Breaker) Open() map[string]bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]bool, len(b.circuits))
	for server, c := range b.circuits {
		out[server] = b.isOpen(c)
	}
	return out
}

// Refusing reports, for every server the breaker has seen, whether its circuit refuses
// calls now: open, and within the cool-down since it opened or since its last trial
// failed. After that the next call goes through as a trial, so the gauge made of it
// (toolbus_breaker_open) returns to 0 when calls stop, rather than staying 1 until a
// call comes.
func (b *Breaker) Refusing() map[string]bool {
	now := b.opts.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]bool, len(b.circuits))
	for server, c := range b.circuits {
		since := c.openedAt
		if c.trialAt.After(since) {
			since = c.trialAt
		}
		out[server] = b.isOpen(c) && !since.IsZero() && now.Sub(since) < b.opts.CoolDown
	}
	return out
}

// Report tells the breaker how a call it allowed ended. server_unavailable, timeout and
// outcome_unknown (the connection broke during the call) count as failures of the
// server; a final failure (configuration, authentication, a login needed) counts for
// nothing; anything else, a tool's own error included, shows that the server answers.
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
