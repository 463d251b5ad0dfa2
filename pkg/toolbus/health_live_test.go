package toolbus_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolbus"
)

// healthd judges a stdio server by the executor's live session: a server that takes
// seconds to start (as `npx -y` does cold) is not down meanwhile, is up once the
// executor has started it, and its calls run; healthd never starts a process of the
// server's while the executor holds a session with it. A server with "health": false is
// not probed at all.
func TestHealthFromLiveSessions(t *testing.T) {
	t.Parallel()
	everything := mcpNPMScript(t, mcpEverythingPkg)
	dir := t.TempDir()
	starts := filepath.Join(dir, "starts")
	// Every start of the server leaves a line; it answers only after 7 s (healthd's
	// probe timeout below is 1 s).
	script := filepath.Join(dir, "slow-server.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho started >> "+starts+"\nsleep 7\nexec node "+everything+" stdio\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := mcpConfig(t, `{"health": {"interval": "200ms"}, "mcpServers": {
		"slow": {"command": "`+script+`", "sessions": "shared", "probeTimeout": "1s"},
		"quiet": {"command": "`+script+`", "sessions": "shared", "health": false}}}`)

	url := bustest.Server(t)
	nc, js := bustest.Connect(t, url, nats.Name("node"))
	ctx, cancel := context.WithCancel(context.Background())
	n, err := toolbus.Start(ctx, toolbus.Options{Provision: true, Conn: nc, Config: cfg,
		Services: []string{toolbus.Parser, toolbus.Executor, toolbus.Formatter, toolbus.Healthd}})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		if err := n.Wait(); err != nil {
			t.Errorf("services: %v", err)
		}
	})

	// Every status healthd publishes for the slow server.
	var mu sync.Mutex
	var seen []messages.HealthStatus
	sub, err := nc.Subscribe(messages.HealthSubject("slow"), func(m *nats.Msg) {
		var st messages.HealthStatus
		if json.Unmarshal(m.Data, &st) == nil {
			mu.Lock()
			seen = append(seen, st)
			mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })

	kv, err := js.KeyValue(ctx, messages.BucketHealth)
	if err != nil {
		t.Fatal(err)
	}
	status := func(server string) (messages.HealthStatus, bool) {
		e, err := kv.Get(ctx, server)
		if err != nil {
			return messages.HealthStatus{}, false
		}
		var st messages.HealthStatus
		return st, json.Unmarshal(e.Value(), &st) == nil
	}
	deadline := time.Now().Add(2 * time.Minute)
	var up messages.HealthStatus
	for {
		if st, ok := status("slow"); ok && st.State == messages.HealthUp {
			up = st
			break
		}
		if time.Now().After(deadline) {
			st, _ := status("slow")
			t.Fatalf("the slow server is not up after 2 minutes: %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.HasPrefix(up.Via, "executor ") || up.Tools == 0 {
		t.Errorf("up status %+v: want it probed over an executor's session, with its tools", up)
	}

	// Its calls run.
	c, err := client.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	actx, acancel := context.WithTimeout(ctx, time.Minute)
	defer acancel()
	out, err := c.Ask(actx, "health", `<tool_call>{"name": "slow__echo", "arguments": {"message": "still here"}}</tool_call>`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Results) != 1 || !out.Results[0].Success {
		t.Fatalf("the slow server's call: %s", out.Text)
	}

	// Some more probes, each over the live session.
	for probed := up.CheckedAt; ; {
		st, _ := status("slow")
		if st.CheckedAt.After(probed.Add(time.Second)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("healthd stopped probing: %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, st := range seen {
		if st.State == messages.HealthDown {
			t.Errorf("the slow server was marked down while the executor started it: %+v", st)
		}
	}
	lines, _ := os.ReadFile(starts)
	// Two servers run the script, each started once by the executor; healthd started
	// none.
	if got := strings.Count(string(lines), "started"); got != 2 {
		t.Errorf("the server script was started %d times, want 2 (the executor's sessions with slow and quiet; no probe process)", got)
	}
	if st, ok := status("quiet"); ok {
		t.Errorf(`a server with "health": false was probed: %+v`, st)
	}
}
