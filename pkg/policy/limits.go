package policy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
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
	// Calls is how many calls an Interval allows.
	Calls int `json:"calls"`
	// Interval is the window: it starts with the first call counted, and a call past
	// its end starts the next.
	Interval messages.Duration `json:"interval"`
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
		case l.Calls <= 0:
			return fmt.Errorf("%s (%q): calls must be at least 1", at, l.Name)
		case l.Interval <= 0 || time.Duration(l.Interval) > MaxInterval:
			return fmt.Errorf("%s (%q): interval must be more than 0 and at most %v", at, l.Name, MaxInterval)
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
	// RetryAfter is how long until the limit's window ends and a call is counted again.
	RetryAfter time.Duration
}

func (e *LimitedError) Error() string {
	what := e.Limit.Per + " " + fmt.Sprintf("%q", e.Counted)
	if e.Counted == "" && e.Limit.Per == PerTenant {
		what = "the default tenant"
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
		if len(lim.Tools) > 0 && !catalog.MatchTool(lim.Tools, call.Server, name) {
			continue
		}
		var counted string
		switch lim.Per {
		case PerTenant:
			counted = call.Tenant
		case PerConversation:
			counted = call.Conversation
		case PerServer:
			counted = call.Server
		case PerTool:
			counted = call.Tool
		}
		if err := l.take(ctx, lim, counted); err != nil {
			return err
		}
	}
	return nil
}

// maxConflicts bounds the compare-and-set rounds of one count: each lost round means
// another call was counted.
const maxConflicts = 50

func (l *Limiter) take(ctx context.Context, lim Limit, counted string) error {
	sum := sha256.Sum256([]byte(lim.Per + "\x00" + counted))
	key := lim.Name + "." + hex.EncodeToString(sum[:10])
	interval := time.Duration(lim.Interval)
	for range maxConflicts {
		now := time.Now()
		if l.Now != nil {
			now = l.Now()
		}
		entry, err := l.KV.Get(ctx, key)
		var w window
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return fmt.Errorf("limit %q: %w", lim.Name, err)
		default:
			if json.Unmarshal(entry.Value(), &w) != nil {
				w = window{} // unreadable: start again
			}
		}
		if w.Start.IsZero() || !now.Before(w.Start.Add(interval)) {
			w = window{Start: now}
		}
		if w.Count >= lim.Calls {
			return &LimitedError{Limit: lim, Counted: counted, RetryAfter: w.Start.Add(interval).Sub(now)}
		}
		w.Count++
		value, _ := json.Marshal(w)
		if entry == nil {
			_, err = l.KV.Create(ctx, key, value)
		} else {
			_, err = l.KV.Update(ctx, key, value, entry.Revision())
		}
		switch {
		case err == nil:
			return nil
		case errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch):
			continue // another call was counted first: count again
		default:
			return fmt.Errorf("limit %q: %w", lim.Name, err)
		}
	}
	return fmt.Errorf("limit %q: the count kept changing under %d tries", lim.Name, maxConflicts)
}
