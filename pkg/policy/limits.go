package policy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/catalog"
	"github.com/toolbus/toolbus/pkg/messages"
)

// What a limit counts separately: one count per tenant, per conversation, per server or
// per tool.
const (
	PerTenant       = "tenant"
	PerConversation = "conversation"
	PerServer       = "server"
	PerTool         = "tool"
)

// MaxInterval is the longest interval of a limit: the limits bucket forgets a count
// a day after its last change.
const MaxInterval = 24 * time.Hour

// Limit is one entry of the configuration's "limits": at most Calls calls per Interval
// for each tenant, conversation, server or tool (Per), counting the calls of Tools.
type Limit struct {
	// Name names the limit in the answers it refuses and in its keys in the limits
	// bucket: letters, digits, '-' and '_'.
	Name string `json:"name"`
	// Per is what is counted separately: "tenant", "conversation", "server" or "tool".
	Per string `json:"per"`
	// Tools, when set, are the tools whose calls count, as allowedTools patterns are
	// written; none: every tool's.
	Tools []string `json:"tools,omitempty"`
	// Calls is how many calls an Interval allows; 0 with Concurrent set: no such bound.
	Calls int `json:"calls,omitempty"`
	// Interval is the window: it starts with the first call counted, and a call past
	// its end starts the next.
	Interval messages.Duration `json:"interval,omitempty"`
	// Concurrent, when set, is how many calls may run at once, across every executor.
	Concurrent int `json:"concurrent,omitempty"`
}

var limitName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// ValidateLimits says which limit cannot be used and why.
func ValidateLimits(limits []Limit) error {
	seen := map[string]bool{}
	for i, l := range limits {
		at := fmt.Sprintf("limits[%d]", i)
		switch {
		case !limitName.MatchString(l.Name):
			return fmt.Errorf("%s: name %q must be letters, digits, '-' and '_'", at, l.Name)
		case seen[l.Name]:
			return fmt.Errorf("%s: another limit is called %q", at, l.Name)
		case l.Per != PerTenant && l.Per != PerConversation && l.Per != PerServer && l.Per != PerTool:
			return fmt.Errorf("%s (%q): per %q is not \"tenant\", \"conversation\", \"server\" or \"tool\"", at, l.Name, l.Per)
		case l.Calls < 0 || l.Concurrent < 0:
			return fmt.Errorf("%s (%q): calls and concurrent must be at least 1", at, l.Name)
		case l.Calls == 0 && l.Concurrent == 0:
			return fmt.Errorf("%s (%q): a limit needs calls (with interval) or concurrent", at, l.Name)
		case l.Calls > 0 && (l.Interval <= 0 || time.Duration(l.Interval) > MaxInterval):
			return fmt.Errorf("%s (%q): interval must be more than 0 and at most %v", at, l.Name, MaxInterval)
		case l.Calls == 0 && l.Interval != 0:
			return fmt.Errorf("%s (%q): interval is for a limit of calls", at, l.Name)
		}
		for _, p := range l.Tools {
			if !catalog.ValidPattern(p) {
				return fmt.Errorf("%s (%q): tools: %q is not a valid pattern", at, l.Name, p)
			}
		}
		seen[l.Name] = true
	}
	return nil
}

// LimitedError is a call over a limit.
type LimitedError struct {
	Limit Limit
	// Counted is what the limit counts separately for this call: the tenant's,
	// conversation's, server's or tool's name.
	Counted string
	// RetryAfter is how long until the limit's window ends and a call is counted again;
	// for calls at once (Running), a guess: a second.
	RetryAfter time.Duration
	// Running: the limit of calls at once (Limit.Concurrent) refused the call.
	Running bool
}

func (e *LimitedError) Error() string {
	what := e.Limit.Per + " " + fmt.Sprintf("%q", e.Counted)
	if e.Counted == "" && e.Limit.Per == PerTenant {
		what = "the default tenant"
	}
	if e.Running {
		return fmt.Sprintf("the limit %q allows %d calls at once for each %s, and %s has them running; try again when one has finished (in about %v)",
			e.Limit.Name, e.Limit.Concurrent, e.Limit.Per, what, e.RetryAfter.Round(time.Second))
	}
	return fmt.Sprintf("the limit %q allows %d calls per %v for each %s, and %s has made them; try again in %v",
		e.Limit.Name, e.Limit.Calls, time.Duration(e.Limit.Interval), e.Limit.Per, what, e.RetryAfter.Round(time.Second))
}

// ToolError is the error a model reads: rate_limited, saying when to try again.
func (e *LimitedError) ToolError() *messages.ToolError {
	return &messages.ToolError{Code: messages.CodeRateLimited, Message: "the call was not run: " + e.Error(), Err: e, Unsent: true}
}

// Limiter counts calls against limits in a key-value bucket (messages.BucketLimits),
// one key per limit and counted value, changed by compare-and-set: replicas that count
// at once retry on each other's writes, and no call is counted twice or lost; a restart
// finds the counts where they were.
type Limiter struct {
	KV jetstream.KeyValue
	// Now is the clock; default time.Now.
	Now    func() time.Time
	limits atomic.Pointer[[]Limit]
}

// Set replaces the limits (a reload); the counts of the limits kept stay.
func (l *Limiter) Set(limits []Limit) {
	if len(limits) == 0 {
		l.limits.Store(nil)
		return
	}
	l.limits.Store(&limits)
}

// Active reports whether any limit is set.
func (l *Limiter) Active() bool { return l != nil && l.limits.Load() != nil }

// window is the value of a count's key.
type window struct {
	Start time.Time `json:"start"`
	Count int       `json:"count"`
}

// Take counts call against every limit it falls under, in the order written, and
// returns a *LimitedError for the first limit it is over (the limits before it counted
// the call); any other error is the bucket's, and the call was not refused.
func (l *Limiter) Take(ctx context.Context, call Call) error {
	if !l.Active() {
		return nil
	}
	name := call.Name
	if name == "" {
		name = call.Tool
	}
	for _, lim := range *l.limits.Load() {
		if lim.Calls == 0 || len(lim.Tools) > 0 && !catalog.MatchTool(lim.Tools, call.Server, name) {
			continue
		}
		if err := l.take(ctx, lim, lim.counted(call)); err != nil {
			return err
		}
	}
	return nil
}

// counted is what lim counts call under.
func (lim Limit) counted(call Call) string {
	switch lim.Per {
	case PerTenant:
		return call.Tenant
	case PerConversation:
		return call.Conversation
	case PerServer:
		return call.Server
	case PerTool:
		return call.Tool
	}
	return ""
}

// key is the key of lim's count of counted, with a kind ("" for the window of calls).
func (lim Limit) key(kind, counted string) string {
	sum := sha256.Sum256([]byte(lim.Per + "\x00" + counted))
	return lim.Name + kind + "." + hex.EncodeToString(sum[:10])
}

func (l *Limiter) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

// take counts a call of counted against lim, by compare-and-set (bus.UpdateJSON): a
// round lost to another replica counts again on what it wrote.
func (l *Limiter) take(ctx context.Context, lim Limit, counted string) error {
	interval := time.Duration(lim.Interval)
	_, err := bus.UpdateJSON(ctx, l.KV, lim.key("", counted), func(w *window) (bool, error) {
		now := l.now()
		if w.Start.IsZero() || !now.Before(w.Start.Add(interval)) {
			*w = window{Start: now}
		}
		if w.Count >= lim.Calls {
			return false, &LimitedError{Limit: lim, Counted: counted, RetryAfter: w.Start.Add(interval).Sub(now)}
		}
		w.Count++
		return true, nil
	})
	var le *LimitedError
	if err != nil && !errors.As(err, &le) {
		return fmt.Errorf("limit %q: %w", lim.Name, err)
	}
	return err
}

// Concurrent reports whether any limit bounds the calls running at once.
func (l *Limiter) Concurrent() bool {
	if !l.Active() {
		return false
	}
	for _, lim := range *l.limits.Load() {
		if lim.Concurrent > 0 {
			return true
		}
	}
	return false
}

// running is the value of a key of calls at once: each call running, by id, with when
// its hold ends (an executor that stopped without giving it back).
type running struct {
	Calls map[string]time.Time `json:"calls"`
}

// Acquire takes a place for call (id callID) under every limit of calls at once it
// falls under, in the order written, each held until release is called or hold has
// passed (the most the call may take: an executor that stops without giving its places
// back leaves them that long). Over one, it gives back those it took and returns a
// *LimitedError; any other error is the bucket's. A call that holds a place already
// (a redelivery) keeps it.
func (l *Limiter) Acquire(ctx context.Context, call Call, callID string, hold time.Duration) (release func(context.Context), err error) {
	if !l.Concurrent() {
		return func(context.Context) {}, nil
	}
	name := call.Name
	if name == "" {
		name = call.Tool
	}
	var held []string
	release = func(ctx context.Context) {
		for _, key := range held {
			_ = l.leave(ctx, key, callID)
		}
	}
	for _, lim := range *l.limits.Load() {
		if lim.Concurrent == 0 || len(lim.Tools) > 0 && !catalog.MatchTool(lim.Tools, call.Server, name) {
			continue
		}
		counted := lim.counted(call)
		key := lim.key(".running", counted)
		if err := l.enter(ctx, lim, key, counted, callID, hold); err != nil {
			release(ctx)
			return nil, err
		}
		held = append(held, key)
	}
	return release, nil
}

// change applies fn to the calls running under a key, by compare-and-set, once the
// holds that passed are dropped; fn reports whether it changed anything.
func (l *Limiter) change(ctx context.Context, key string, fn func(r *running, now time.Time) (bool, error)) error {
	_, err := bus.UpdateJSON(ctx, l.KV, key, func(r *running) (bool, error) {
		now := l.now()
		if r.Calls == nil {
			r.Calls = map[string]time.Time{}
		}
		pruned := false
		for id, until := range r.Calls {
			if !now.Before(until) {
				delete(r.Calls, id) // its executor stopped without giving it back
				pruned = true
			}
		}
		changed, err := fn(r, now)
		return changed || pruned && err == nil, err
	})
	return err
}

func (l *Limiter) enter(ctx context.Context, lim Limit, key, counted, callID string, hold time.Duration) error {
	err := l.change(ctx, key, func(r *running, now time.Time) (bool, error) {
		if _, ok := r.Calls[callID]; !ok && len(r.Calls) >= lim.Concurrent {
			return false, &LimitedError{Limit: lim, Counted: counted, RetryAfter: time.Second, Running: true}
		}
		r.Calls[callID] = now.Add(hold)
		return true, nil
	})
	var le *LimitedError
	if err != nil && !errors.As(err, &le) {
		return fmt.Errorf("limit %q: %w", lim.Name, err)
	}
	return err
}

func (l *Limiter) leave(ctx context.Context, key, callID string) error {
	return l.change(ctx, key, func(r *running, _ time.Time) (bool, error) {
		_, held := r.Calls[callID]
		delete(r.Calls, callID)
		return held, nil
	})
}
