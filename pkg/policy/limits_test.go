package policy_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/policy"
)

func limitsBucket(t *testing.T) (jetstream.KeyValue, jetstream.KeyValue) {
	t.Helper()
	url := bustest.Server(t)
	var kvs []jetstream.KeyValue
	for range 2 { // two connections: two replicas
		_, js := bustest.Connect(t, url)
		kv, err := js.CreateOrUpdateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: messages.BucketLimits})
		if err != nil {
			t.Fatal(err)
		}
		kvs = append(kvs, kv)
	}
	return kvs[0], kvs[1]
}

// Two limiters on one bucket, taking at once from many goroutines, let exactly the
// limit's calls through: the compare-and-set loses no count and counts none twice.
func TestLimiterHoldsAcrossReplicas(t *testing.T) {
	a, b := limitsBucket(t)
	limits := []policy.Limit{{Name: "ten", Per: policy.PerTenant, Calls: 10, Interval: messages.Duration(time.Minute)}}
	replicas := []*policy.Limiter{{KV: a}, {KV: b}}
	for _, l := range replicas {
		l.Set(limits)
	}
	var mu sync.Mutex
	taken, limited := 0, 0
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Go(func() {
			err := replicas[i%2].Take(context.Background(), policy.Call{Tool: "clock", Conversation: "acme.c1", Tenant: "acme"})
			var le *policy.LimitedError
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				taken++
			case errors.As(err, &le):
				limited++
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if taken != 10 || limited != 20 {
		t.Fatalf("%d taken, %d limited; want 10 and 20", taken, limited)
	}
	// Another tenant counts apart.
	if err := replicas[0].Take(context.Background(), policy.Call{Tool: "clock", Tenant: "globex"}); err != nil {
		t.Fatal(err)
	}
}

// The window starts with the first call counted: past its end, calls are counted again;
// within it, the refusal says how long is left. Only the limit's tools count.
func TestLimiterWindow(t *testing.T) {
	kv, _ := limitsBucket(t)
	now := time.Date(2026, 1, 1, 12, 0, 30, 0, time.UTC)
	l := &policy.Limiter{KV: kv, Now: func() time.Time { return now }}
	l.Set([]policy.Limit{{Name: "two", Per: policy.PerTool, Tools: []string{"search__*"}, Calls: 2, Interval: messages.Duration(time.Minute)}})
	call := policy.Call{Tool: "search__query", Server: "search", Name: "query"}
	ctx := context.Background()
	for range 2 {
		if err := l.Take(ctx, call); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Take(ctx, policy.Call{Tool: "clock"}); err != nil {
		t.Fatalf("a tool the limit does not name: %v", err)
	}
	now = now.Add(45 * time.Second)
	err := l.Take(ctx, call)
	var le *policy.LimitedError
	if !errors.As(err, &le) || le.RetryAfter != 15*time.Second || !strings.Contains(le.ToolError().Message, `tool "search__query" has made them; try again in 15s`) ||
		le.ToolError().Code != messages.CodeRateLimited {
		t.Fatalf("got %v", err)
	}
	now = now.Add(15 * time.Second)
	if err := l.Take(ctx, call); err != nil {
		t.Fatalf("the next window: %v", err)
	}
}

func TestValidateLimits(t *testing.T) {
	for _, tc := range []struct {
		name    string
		limit   policy.Limit
		wantErr string
	}{
		{name: "valid", limit: policy.Limit{Name: "a", Per: "conversation", Calls: 1, Interval: messages.Duration(time.Second)}},
		{name: "name", limit: policy.Limit{Name: "a b", Per: "tenant", Calls: 1, Interval: messages.Duration(time.Second)}, wantErr: `name "a b"`},
		{name: "calls", limit: policy.Limit{Name: "a", Per: "tenant", Interval: messages.Duration(time.Second)}, wantErr: "a limit needs calls (with interval) or concurrent"},
		{name: "concurrent", limit: policy.Limit{Name: "a", Per: "tool", Concurrent: 2}},
		{name: "both", limit: policy.Limit{Name: "a", Per: "tool", Concurrent: 2, Calls: 5, Interval: messages.Duration(time.Minute)}},
		{name: "interval without calls", limit: policy.Limit{Name: "a", Per: "tool", Concurrent: 2, Interval: messages.Duration(time.Minute)}, wantErr: "interval is for a limit of calls"},
		{name: "negative", limit: policy.Limit{Name: "a", Per: "tool", Concurrent: -1}, wantErr: "at least 1"},
		{name: "interval", limit: policy.Limit{Name: "a", Per: "tenant", Calls: 1}, wantErr: "interval must be"},
		{name: "pattern", limit: policy.Limit{Name: "a", Per: "tool", Tools: []string{"["}, Calls: 1, Interval: messages.Duration(time.Second)}, wantErr: "not a valid pattern"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := policy.ValidateLimits([]policy.Limit{tc.limit})
			if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("got %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// Two limiters on one bucket let at most the limit's calls hold a place at once: of 20
// acquiring together, 3 get one; a place given back is taken by the next; a place whose
// hold passed (its executor stopped) is free again; a call holding one already keeps it.
func TestConcurrentPlacesAcrossReplicas(t *testing.T) {
	a, b := limitsBucket(t)
	now := time.Now()
	clock := func() time.Time { return now }
	limits := []policy.Limit{{Name: "three", Per: policy.PerServer, Concurrent: 3}}
	replicas := []*policy.Limiter{{KV: a, Now: clock}, {KV: b, Now: clock}}
	for _, l := range replicas {
		l.Set(limits)
	}
	ctx := context.Background()
	call := policy.Call{Tool: "docs__read", Server: "docs", Name: "read"}
	var mu sync.Mutex
	var held []func(context.Context)
	limited := 0
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			release, err := replicas[i%2].Acquire(ctx, call, fmt.Sprint("call-", i), time.Minute)
			var le *policy.LimitedError
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				held = append(held, release)
			case errors.As(err, &le) && le.Running:
				limited++
				if !strings.Contains(le.Error(), `the limit "three" allows 3 calls at once for each server, and server "docs" has them running`) {
					t.Error(le.Error())
				}
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if len(held) != 3 || limited != 17 {
		t.Fatalf("%d places taken and %d refused, want 3 and 17", len(held), limited)
	}
	if _, err := replicas[0].Acquire(ctx, call, "late", time.Minute); err == nil {
		t.Fatal("a fourth place taken")
	}
	held[0](ctx)
	release, err := replicas[1].Acquire(ctx, call, "late", 10*time.Second)
	if err != nil {
		t.Fatalf("a place given back is not taken again: %v", err)
	}
	if _, err := replicas[0].Acquire(ctx, call, "late", 10*time.Second); err != nil {
		t.Errorf("a call holding a place (a redelivery) is refused: %v", err)
	}
	now = now.Add(2 * time.Minute) // every hold but "late"'s passed
	for i := range 2 {
		if _, err := replicas[0].Acquire(ctx, call, fmt.Sprint("after-", i), time.Minute); err != nil {
			t.Errorf("a place whose hold passed is not free: %v", err)
		}
	}
	release(ctx)
	// A limit of calls at once counts nothing for Take, and one without it is no bound.
	if err := replicas[0].Take(ctx, call); err != nil {
		t.Error(err)
	}
	var other policy.Limiter
	other.KV = a
	other.Set([]policy.Limit{{Name: "calls", Per: policy.PerTool, Calls: 1, Interval: messages.Duration(time.Minute)}})
	if other.Concurrent() {
		t.Error("a limit of calls bounds calls at once")
	}
}
