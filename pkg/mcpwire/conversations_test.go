package mcpwire_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolbus/toolbus/internal/mcptest"
	"github.com/toolbus/toolbus/pkg/mcpwire"
	"github.com/toolbus/toolbus/pkg/messages"
)

// convPID calls the stdio server's pid tool for a conversation ("" for none).
func convPID(t *testing.T, p *mcpwire.Pool, conv string, report *mcpwire.SessionReport) int {
	t.Helper()
	ctx := ctxT(t)
	if conv != "" {
		ctx = mcpwire.WithConversation(ctx, conv)
	}
	if report != nil {
		ctx = mcpwire.WithReport(ctx, report)
	}
	out, err := p.Call(ctx, "pid", nil)
	if err != nil {
		t.Fatalf("pid in %q: %v", conv, err)
	}
	var r struct{ PID int }
	if err := json.Unmarshal(out, &r); err != nil || r.PID == 0 {
		t.Fatalf("pid = %s, %v", out, err)
	}
	return r.PID
}

// serverProcs counts the live processes of the stdio test server.
func serverProcs(t *testing.T) int {
	t.Helper()
	path := stdioServer(t)
	return len(mcptest.Procs(t, func(p mcptest.Proc) bool {
		cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.PID))
		return err == nil && strings.HasPrefix(string(cmd), path+"\x00")
	}))
}

// A stdio server keeps state in its process: each conversation gets its own, opened on
// its first call and reached by every later one; calls without a conversation share the
// server's own session, and every call's _meta names its conversation.
func TestConversationsHaveTheirOwnSessions(t *testing.T) {
	p := newPool(t, map[string]mcpwire.ServerConfig{"local": {Command: stdioServer(t)}}, nil)
	if !p.Scoped("local") {
		t.Fatal("a stdio server is not conversation-scoped by default")
	}
	shared := convPID(t, p, "", nil)
	var first, second mcpwire.SessionReport
	a := convPID(t, p, "conv-a", &first)
	if again := convPID(t, p, "conv-a", &second); again != a {
		t.Errorf("conversation a's second call ran in process %d, its first in %d", again, a)
	}
	if !first.Opened || first.Ended != "" || second.Opened {
		t.Errorf("reports %+v, %+v: want the first call to open the session, the second not", first, second)
	}
	b := convPID(t, p, "conv-b", nil)
	if a == shared || b == shared || a == b {
		t.Errorf("processes: shared %d, conversation a %d, b %d: want three", shared, a, b)
	}
	out, err := p.Call(mcpwire.WithConversation(ctxT(t), "conv-a"), "conversation", nil)
	if err != nil || string(out) != `"conv-a"` {
		t.Errorf("the server saw _meta %s %q = %s, %v; want \"conv-a\"", messages.MetaConversation, "conv-a", out, err)
	}
	// A tenant's conversation names its tenant too.
	if out, err := p.Call(mcpwire.WithConversation(ctxT(t), "acme.c1"), "conversation", nil); err != nil || string(out) != `"acme.c1 tenant=acme"` {
		t.Errorf("the server saw _meta %s = %s, %v; want acme.c1 of tenant acme", messages.MetaTenant, out, err)
	}
	if got := p.Sessions()["local"]; len(got) != 3 {
		t.Errorf("sessions open: %v, want conv-a, conv-b and acme.c1", got)
	}

	// A shared server keeps one session for all.
	ps := newPool(t, map[string]mcpwire.ServerConfig{"local": {Command: stdioServer(t), Sessions: mcpwire.SessionsShared}}, nil)
	if s, x := convPID(t, ps, "", nil), convPID(t, ps, "conv-x", nil); s != x {
		t.Errorf("a shared server ran conversation x's call in process %d, its own session is %d", x, s)
	}
}

// Memory and processes stay bounded: many conversations against a stdio server with
// maxSessions N never have more than N sessions open (nor processes, besides its own
// session's), the least recently used idle session makes room, and none is left after
// sessionIdle. A conversation whose session was closed is told why on its next call.
func TestConversationSessionsAreBounded(t *testing.T) {
	// 60 conversations and at most 4 sessions in the suite; 500 and 16 with TOOLBUS_LONG.
	max, conversations := 4, 60
	if os.Getenv("TOOLBUS_LONG") != "" {
		max, conversations = 16, 500
	}
	p := newPool(t, map[string]mcpwire.ServerConfig{"local": {Command: stdioServer(t), MaxSessions: max}}, nil)
	convPID(t, p, "", nil) // the server's own session

	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if n := int64(len(p.Sessions()["local"])); n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range conversations {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			convPID(t, p, fmt.Sprintf("conv-%d", i), nil)
		}()
	}
	wg.Wait()
	close(stop)
	<-sampled
	if n := peak.Load(); n > int64(max) {
		t.Errorf("%d conversations' sessions open at once, want at most %d", n, max)
	}
	if n := p.Sessions()["local"]; len(n) > max {
		t.Errorf("%d sessions open after the calls, want at most %d", len(n), max)
	}
	eventually(t, "closed sessions' processes gone", func() bool { return serverProcs(t) <= max+1 })

	// One after another, max+1 more conversations: the first of them makes room for the
	// last, and its next call says so.
	for i := range max + 1 {
		convPID(t, p, fmt.Sprintf("late-%d", i), nil)
	}
	var r mcpwire.SessionReport
	convPID(t, p, "late-0", &r)
	if !r.Opened || !strings.Contains(r.Ended, "make room") {
		t.Errorf("a conversation after eviction: %+v, want a new session and why the old one ended", r)
	}
	p.Close()
	eventually(t, "the closed pool's processes gone", func() bool { return serverProcs(t) == 0 })

	// Idle sessions close after sessionIdle, their processes with them; the next call
	// of such a conversation is told so.
	idle := 300 * time.Millisecond
	q := newPool(t, map[string]mcpwire.ServerConfig{"local": {Command: stdioServer(t), MaxSessions: max,
		SessionIdle: messages.Duration(idle)}}, nil)
	convPID(t, q, "", nil)
	for i := range 3 {
		convPID(t, q, fmt.Sprintf("idle-%d", i), nil)
	}
	eventually(t, "idle sessions closed", func() bool { return len(q.Sessions()["local"]) == 0 })
	eventually(t, "idle sessions' processes gone", func() bool { return serverProcs(t) == 1 })
	r = mcpwire.SessionReport{}
	convPID(t, q, "idle-0", &r)
	if !r.Opened || !strings.Contains(r.Ended, "without a call") {
		t.Errorf("a conversation after idling: %+v, want a new session and why the old one ended", r)
	}
}

// A conversation's session whose process died is replaced on the next call, which is
// told so; other conversations keep theirs.
func TestConversationSessionLost(t *testing.T) {
	p := newPool(t, map[string]mcpwire.ServerConfig{"local": {Command: stdioServer(t)}}, nil)
	a, b := convPID(t, p, "conv-a", nil), convPID(t, p, "conv-b", nil)
	proc, err := os.FindProcess(a)
	if err != nil {
		t.Fatal(err)
	}
	proc.Kill()
	var r mcpwire.SessionReport
	eventually(t, "a new session for conversation a", func() bool {
		ctx, cancel := context.WithTimeout(mcpwire.WithReport(mcpwire.WithConversation(ctxT(t), "conv-a"), &r), 5*time.Second)
		defer cancel()
		out, err := p.Call(ctx, "pid", nil)
		return err == nil && !strings.Contains(string(out), fmt.Sprint(a))
	})
	if !r.Opened || r.Ended == "" {
		t.Errorf("report after the process died: %+v, want a new session and why the old one ended", r)
	}
	if got := convPID(t, p, "conv-b", nil); got != b {
		t.Errorf("conversation b moved from process %d to %d", b, got)
	}
}
