package backend

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/engineering"
	"github.com/toolbus/toolbus/pkg/engineering/sessiontest"
	"github.com/toolbus/toolbus/pkg/messages"
)

func TestKVSessions(t *testing.T) {
	_, js := bustest.JetStream(t)
	var n atomic.Int32
	sessiontest.Run(t, func(t *testing.T) engineering.SessionStore {
		kv, err := js.CreateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: fmt.Sprintf("sessions_%d", n.Add(1))})
		if err != nil {
			t.Fatal(err)
		}
		return KVSessions{KV: kv}
	})
}

// cachedStore starts a CachedSessions following kv on its own connection.
func cachedStore(t *testing.T, url, bucket string) (*CachedSessions, *nats.Conn) {
	t.Helper()
	nc, js := bustest.Connect(t, url)
	kv, err := js.KeyValue(context.Background(), bucket)
	if err != nil {
		t.Fatal(err)
	}
	s := &CachedSessions{KVSessions: KVSessions{KV: kv}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Follow(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, "the watch to start", func() bool { return s.watching.Load() })
	return s, nc
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestCachedSessions(t *testing.T) {
	url := bustest.Server(t)
	_, js := bustest.Connect(t, url)
	var n atomic.Int32
	sessiontest.Run(t, func(t *testing.T) engineering.SessionStore {
		bucket := fmt.Sprintf("cached_%d", n.Add(1))
		if _, err := js.CreateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: bucket}); err != nil {
			t.Fatal(err)
		}
		s, _ := cachedStore(t, url, bucket)
		return s
	})
}

// A cached session costs no round trip; an update made through another replica reaches
// the cache by the watch, and a calculator is never refused on a stale cache.
func TestCachedSessionsAcrossReplicas(t *testing.T) {
	url := bustest.Server(t)
	_, js := bustest.Connect(t, url)
	ctx := context.Background()
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "sessions"}); err != nil {
		t.Fatal(err)
	}
	a, _ := cachedStore(t, url, "sessions")
	b, bnc := cachedStore(t, url, "sessions")

	if _, err := b.Get(ctx, "conv"); err != nil { // remembered: no session yet
		t.Fatal(err)
	}
	before := bnc.Stats().OutMsgs
	for range 50 {
		if sess, err := b.Get(ctx, "conv"); err != nil || sess.Active("geometry") {
			t.Fatalf("get: %+v, %v", sess, err)
		}
	}
	if sent := bnc.Stats().OutMsgs - before; sent > 2 {
		t.Errorf("50 cached reads sent %d messages; want none", sent)
	}

	// Activation through A; B's cache learns it from the watch.
	if err := a.Update(ctx, "conv", func(s *engineering.Session) error { s.ActiveDomains = append(s.ActiveDomains, "geometry"); return nil }); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "B to see the activation", func() bool {
		sess, err := b.Get(ctx, "conv")
		return err == nil && sess.Active("geometry")
	})

	// B's cache forced stale: the calculator still runs, because the refusal is checked
	// against the bucket.
	b.store(bus.Key("conv"), engineering.Session{}, 1<<62, true)
	suite := engineering.New(&engineering.Options{Sessions: b})
	out, err := suite.Call(ctx, "conv", engineering.ToolExecute, json.RawMessage(`{"tool_name": "geometry.solve_circle_area", "parameters": {"r": 1}}`))
	if err != nil {
		t.Fatalf("execute_tool on a stale cache: %v", err)
	}
	if !strings.Contains(string(out), `"solved_for":"A"`) {
		t.Errorf("result %s", out)
	}
	// And a domain that is not active is refused.
	if _, err := suite.Call(ctx, "conv", engineering.ToolExecute, json.RawMessage(`{"tool_name": "pressure.solve_kesselformel", "parameters": {"p": 10, "d": 100, "sigma": 160}}`)); messages.AsToolError(err).Code != messages.CodeDomainNotActive {
		t.Errorf("inactive domain: %v", err)
	}
}
