package mcpwire_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolbus/toolbus/pkg/mcpwire"
	"github.com/toolbus/toolbus/pkg/messages"
)

// pidOf asks the stdio test server for its process id.
func pidOf(t *testing.T, p *mcpwire.Pool, tool string) int {
	t.Helper()
	out, err := p.Call(ctxT(t), tool, nil)
	if err != nil {
		t.Fatalf("pid: %v", err)
	}
	var r struct{ PID int }
	if err := json.Unmarshal(out, &r); err != nil || r.PID == 0 {
		t.Fatalf("pid = %s, %v", out, err)
	}
	return r.PID
}

func TestStdioRestartsAKilledServer(t *testing.T) {
	p := newPool(t, map[string]mcpwire.ServerConfig{"local": {Command: stdioServer(t)}}, nil)
	first := pidOf(t, p, "pid")
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a second server process", func() bool {
		st := p.Status()[0]
		return st.Connects == 2 && st.Connected
	})
	second := pidOf(t, p, "pid")
	if second == first {
		t.Fatalf("pid %d answered after it was killed", first)
	}
	if out, err := p.Call(ctxT(t), "echo", json.RawMessage(`{"text":"still here"}`)); err != nil || string(out) != `"still here"` {
		t.Fatalf("echo after the restart = %s, %v", out, err)
	}
	// One child: the reaper of the new server, which runs under it.
	if kids := procs(t, os.Getpid(), 0); len(kids) != 1 || !slices.Contains(tree(t, kids[0]), second) {
		t.Errorf("child processes = %v, want only the new server %d's reaper", kids, second)
	}
}

func TestStdioKilledDuringACall(t *testing.T) {
	p := newPool(t, map[string]mcpwire.ServerConfig{"local": {Command: stdioServer(t)}}, nil)
	pid := pidOf(t, p, "pid")
	marker := filepath.Join(t.TempDir(), "sleeping")
	errc := make(chan error, 1)
	go func() {
		_, err := p.Call(ctxT(t), "sleep", json.RawMessage(`{"marker":"`+marker+`"}`))
		errc <- err
	}()
	eventually(t, "the call running", func() bool {
		_, err := os.Stat(marker)
		return err == nil
	})
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The call had reached a tool with side effects: it must not be sent again, and
	// must not wait for its timeout either.
	select {
	case err := <-errc:
		if !errors.Is(err, mcpwire.ErrConnectionLost) {
			t.Fatalf("err = %v, want ErrConnectionLost", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the call outlived its server by 20s")
	}
	if got := pidOf(t, p, "pid"); got == pid {
		t.Fatal("the killed server answered")
	}
}

func TestStdioCloseLeavesNoProcess(t *testing.T) {
	p, err := mcpwire.NewPool(map[string]mcpwire.ServerConfig{
		"a": {Command: stdioServer(t), Env: map[string]string{"STDIOSERVER_GRANDCHILD": "1"}},
		"b": {Command: stdioServer(t)},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Connect(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	pid := pidOf(t, p, "a__pid")
	if n := len(procs(t, os.Getpid(), 0)); n != 2 {
		t.Fatalf("%d child processes while running, want 2 (a reaper each)", n)
	}
	// Server a left a process of its own in a session of its own, out of its group.
	var grandchild int
	eventually(t, "server a's grandchild", func() bool {
		kids := procs(t, pid, 0)
		if len(kids) == 1 {
			grandchild = kids[0]
		}
		return grandchild != 0
	})
	if all := tree(t, os.Getpid()); len(all) != 5 || !slices.Contains(all, grandchild) {
		t.Fatalf("processes under the pool %v, want two reapers, two servers and %d", all, grandchild)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	// Close returns once each reaper has killed and waited for everything under it.
	if left := tree(t, os.Getpid()); len(left) != 0 {
		t.Errorf("processes %v left after Close", left)
	}
}

func TestStdioEnvAndCwd(t *testing.T) {
	dir := t.TempDir()
	p := newPool(t, map[string]mcpwire.ServerConfig{"sh": {
		Command: "sh",
		Args:    []string{"-c", `test "$(pwd)" = "$WANT_DIR" && exec "$SERVER"`},
		Env:     map[string]string{"WANT_DIR": dir, "SERVER": stdioServer(t)},
		Cwd:     dir,
	}}, nil)
	if err := p.Connect(ctxT(t)); err != nil {
		t.Fatalf("the server did not start with the configured env and cwd: %v", err)
	}
}

// A stdio server gets a minimal environment — the few variables every server needs,
// those inheritEnv names, and its configured env — never toolbus's own secrets.
func TestStdioMinimalEnv(t *testing.T) {
	t.Setenv("TOOLBUS_TEST_CANARY", "s3cret-canary")
	t.Setenv("TOOLBUS_TEST_SHARED", "shared-value")
	dir := t.TempDir()
	out := filepath.Join(dir, "env")
	p := newPool(t, map[string]mcpwire.ServerConfig{"sh": {
		Command:    "sh",
		Args:       []string{"-c", `env > "$OUT" && exec "$SERVER"`},
		Env:        map[string]string{"OUT": out, "SERVER": stdioServer(t), "HOME": dir},
		InheritEnv: []string{"TOOLBUS_TEST_SHARED"},
	}}, nil)
	if err := p.Connect(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	env := string(data)
	if strings.Contains(env, "s3cret-canary") {
		t.Errorf("the server saw toolbus's environment:\n%s", env)
	}
	for _, want := range []string{"TOOLBUS_TEST_SHARED=shared-value", "PATH=", "HOME=" + dir} {
		if !strings.Contains(env, want) {
			t.Errorf("the server's environment lacks %s:\n%s", want, env)
		}
	}
}

// A stdio server's message is bounded by maxMessageBytes (default 64 MiB, beyond the
// go-sdk's 16 MiB): within it, a large answer arrives whole; over it, the call fails with
// an error and the server is reconnected.
func TestStdioMessageLimit(t *testing.T) {
	p := newPool(t, map[string]mcpwire.ServerConfig{
		"small": {Command: stdioServer(t), MaxMessageBytes: 4096},
		// The server's own time for a call (default a minute) bounds it too.
		"big": {Command: stdioServer(t), Timeout: messages.Duration(3 * time.Minute)},
	}, nil)
	if err := p.Connect(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	text := strings.Repeat("m", 1<<20)
	// A bound on a hang, not a speed: 24 MiB each way under the race detector, beside
	// the suite's other packages, took over 30 s, and over a minute beside a second suite.
	bigCtx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := p.Call(bigCtx, "big__echo", json.RawMessage(`{"text":"`+text+`", "times": 24}`))
	if err != nil || len(out) != 24*len(text)+2 {
		t.Fatalf("a 24 MiB message: %d bytes, %v", len(out), err)
	}
	if _, err := p.Call(ctxT(t), "small__echo", json.RawMessage(`{"text":"`+text[:1024]+`", "times": 8}`)); err == nil || !strings.Contains(err.Error(), "line length") {
		t.Fatalf("a message over maxMessageBytes: %v, want an error", err)
	}
	// The session that read too much is gone; the pool connects again.
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, err := p.Call(ctxT(t), "small__echo", json.RawMessage(`{"text":"ok"}`))
		if err == nil && string(out) == `"ok"` {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a message over the limit: %s, %v", out, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A stdio server that prints a banner on stdout before its first message (as time-mcp
// does) still works: the line is skipped, as the reference TypeScript client does.
func TestStdioSkipsStrayLines(t *testing.T) {
	p := newPool(t, map[string]mcpwire.ServerConfig{"chatty": {
		Command: "sh",
		Args:    []string{"-c", `echo "Starting Time MCP server..."; echo; echo "   [init] ready"; exec "$SERVER"`},
		Env:     map[string]string{"SERVER": stdioServer(t)},
	}}, nil)
	if err := p.Connect(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	out, err := p.Call(ctxT(t), "chatty__echo", json.RawMessage(`{"text":"after the banner"}`))
	if err != nil || string(out) != `"after the banner"` {
		t.Fatalf("echo = %s, %v", out, err)
	}
}

// jsonLines passes JSON lines of any length through whole and drops the others.
func TestJSONLines(t *testing.T) {
	long := `{"x":"` + strings.Repeat("y", 200<<10) + `"}`
	in := "banner one\n" + `{"a":1}` + "\n  not json\n[INFO] up\n" + long + "\n[{\"b\":2}]\n\ntrailing"
	var stray []string
	got, err := io.ReadAll(mcpwire.JSONLines(strings.NewReader(in), func(l string) { stray = append(stray, l) }))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"a":1}` + "\n" + long + "\n[{\"b\":2}]\n\n"; string(got) != want {
		t.Errorf("passed %d bytes %.80q…, want %d", len(got), got, len(want))
	}
	if strings.Join(stray, "|") != "banner one|not json|[INFO] up|trailing" {
		t.Errorf("stray lines %q", stray)
	}
}

// FuzzJSONLines: the filter passes exactly the lines whose start (what one read of its
// buffer holds) may be JSON-RPC, byte for byte, and reports every other one.
func FuzzJSONLines(f *testing.F) {
	for _, s := range []string{"", "\n", "{}\n", "banner\n{\"a\":1}\n", "[{}]\n[INFO] x\n", "[                    x\n", "no newline", "\r\n{\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var stray int
		got, err := io.ReadAll(mcpwire.JSONLines(strings.NewReader(in), func(string) { stray++ }))
		if err != nil {
			t.Fatal(err)
		}
		var want strings.Builder
		skipped := 0
		for _, line := range strings.SplitAfter(in, "\n") {
			if line == "" {
				continue
			}
			if mcpwire.RPCLine([]byte(line[:min(len(line), 16)])) {
				want.WriteString(line)
			} else {
				skipped++
			}
		}
		if string(got) != want.String() || stray != skipped {
			t.Errorf("passed %q (%d stray), want %q (%d)", got, stray, want.String(), skipped)
		}
	})
}

// A server configured with its command line as a list starts and answers.
func TestStdioCommandAsList(t *testing.T) {
	var cfg mcpwire.ServerConfig
	if err := json.Unmarshal([]byte(`{"command": ["sh", "-c", "exec \"$SERVER\""], "env": {"SERVER": "`+stdioServer(t)+`"}}`), &cfg); err != nil {
		t.Fatal(err)
	}
	p := newPool(t, map[string]mcpwire.ServerConfig{"listed": cfg}, nil)
	if err := p.Connect(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if out, err := p.Call(ctxT(t), "listed__echo", json.RawMessage(`{"text":"from a list"}`)); err != nil || string(out) != `"from a list"` {
		t.Fatalf("echo = %s, %v", out, err)
	}
}
