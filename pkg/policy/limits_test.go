package policy_test

import (
	"context"
	"errors"
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
		{name: "calls", limit: policy.Limit{Name: "a", Per: "tenant", Interval: messages.Duration(time.Second)}, wantErr: "calls must be at least 1"},
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
