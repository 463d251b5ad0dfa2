package localtools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolbus/toolbus/internal/testbin"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/reaper"
)

// toolsFolder copies the named tools of testdata/shtools (each executable and its
// manifest) into a new folder.
func toolsFolder(t *testing.T, names ...string) string {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("the test tools are shell scripts")
	}
	dir := t.TempDir()
	for _, n := range names {
		copyTool(t, filepath.Join("testdata/shtools", n), dir)
	}
	return dir
}

func copyTool(t testing.TB, exe, dir string) {
	t.Helper()
	name := filepath.Base(exe)
	for _, f := range []struct {
		from, to string
		mode     os.FileMode
	}{{exe, name, 0o755}, {exe + ManifestSuffix, name + ManifestSuffix, 0o644}} {
		data, err := os.ReadFile(f.from)
		if err != nil {
			t.Fatal(err)
		}
		// Write then rename, as a deploy would: the folder never holds half a tool.
		tmp := filepath.Join(dir, ".tmp-"+f.to)
		if err := os.WriteFile(tmp, data, f.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, f.to)); err != nil {
			t.Fatal(err)
		}
	}
}

// buildGoTool puts testdata/gotool's program into dir with its manifest.
func buildGoTool(t *testing.T, dir string) {
	t.Helper()
	testbin.Copy(t, "./pkg/localtools/testdata/gotool", filepath.Join(dir, "gotool"))
	data, err := os.ReadFile("testdata/gotool.mcp.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "gotool.mcp.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func call(t *testing.T, r *Registry, name, args string) (json.RawMessage, error) {
	t.Helper()
	tool, ok := r.Lookup(name)
	if !ok {
		t.Fatalf("no tool %q; have %v", name, toolNames(r))
	}
	return tool.Run(context.Background(), json.RawMessage(args))
}

func toolNames(r *Registry) []string {
	var names []string
	for _, t := range r.Tools() {
		names = append(names, t.Name)
	}
	return names
}

type folderCase struct {
	name     string
	tool     string
	args     string
	want     string             // the result, compacted
	wantErr  messages.ErrorCode // "" for success
	wantText []string           // in the error message
}

func runFolderCases(t *testing.T, r *Registry, tests []folderCase) {
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := call(t, r, tt.tool, tt.args)
			if tt.wantErr == "" {
				if err != nil || string(out) != tt.want {
					t.Fatalf("got %s, %v; want %s", out, err, tt.want)
				}
				return
			}
			var te *messages.ToolError
			if !errors.As(err, &te) || te.Code != tt.wantErr {
				t.Fatalf("err = %v, want %s", err, tt.wantErr)
			}
			for _, s := range tt.wantText {
				if !strings.Contains(te.Message, s) {
					t.Errorf("message %q does not say %q", te.Message, s)
				}
			}
		})
	}
}

func TestFolderShellTools(t *testing.T) {
	dir := toolsFolder(t, "sh_echo", "sh_fail", "sh_garbage")
	f, err := NewFolder(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Rescan(); err != nil {
		t.Fatal(err)
	}
	r := New()
	r.AddFolder(f)
	if got, want := toolNames(r), []string{"sh_echo", "sh_fail", "sh_garbage"}; !slices.Equal(got, want) {
		t.Fatalf("tools = %v, want %v", got, want)
	}
	echo, _ := r.Lookup("sh_echo")
	if !echo.Info.ReadOnly || echo.Info.Idempotent || len(echo.Info.OutputSchema) == 0 || echo.Info.Description != "Returns its arguments." {
		t.Errorf("sh_echo info = %+v", echo.Info)
	}
	runFolderCases(t, r, []folderCase{
		{name: "success", tool: "sh_echo", args: `{"text": "grüß dich"}`, want: `{"text":"grüß dich"}`},
		{name: "arguments checked before running", tool: "sh_echo", args: `{"text": 5}`, wantErr: messages.CodeInvalidArguments, wantText: []string{`argument "text"`}},
		{name: "non-zero exit", tool: "sh_fail", args: `{}`, wantErr: messages.CodeToolError, wantText: []string{"exit status 3", "error: no such customer", "starting"}},
		{name: "garbage on stdout", tool: "sh_garbage", args: `{}`, wantErr: messages.CodeToolError, wantText: []string{"not JSON", "Hello! I am not JSON."}},
	})
}

func TestFolderGoTool(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("process groups")
	}
	dir := t.TempDir()
	buildGoTool(t, dir)
	t.Setenv("TOOLBUS_TEST_SECRET", "must not leak")
	t.Setenv("TOOLBUS_TEST_ALLOWED", "passed")
	f, err := NewFolder(dir, &FolderOptions{
		Env:            []string{"TOOLBUS_TEST_ALLOWED", "TOOLBUS_TEST_UNSET", "FIXED=1"},
		MaxOutputBytes: 1000,
	})
	if err != nil {
		t.Fatal(err)
	}
	r := New()
	r.AddFolder(f)
	runFolderCases(t, r, []folderCase{
		{name: "success", tool: "gotool", args: `{"action": "echo", "n": 7}`, want: `{"action":"echo","n":7}`},
		{name: "only the allowed environment", tool: "gotool", args: `{"action": "env"}`, want: `{"env":["TOOLBUS_TEST_ALLOWED=passed","FIXED=1"]}`},
		{name: "non-zero exit shows the last lines of stderr", tool: "gotool", args: `{"action": "fail"}`, wantErr: messages.CodeToolError, wantText: []string{"exit status 3", "error: the widget is broken", "log line 19", "log line 11"}},
		{name: "garbage on stdout", tool: "gotool", args: `{"action": "garbage"}`, wantErr: messages.CodeToolError, wantText: []string{"not JSON"}},
		{name: "two values on stdout", tool: "gotool", args: `{"action": "two"}`, wantErr: messages.CodeToolError, wantText: []string{"more than one JSON value"}},
		{name: "output within the limit", tool: "gotool", args: `{"action": "big", "n": 900}`, want: `"` + strings.Repeat("x", 900) + `"`},
		{name: "output over the limit", tool: "gotool", args: `{"action": "big", "n": 100000}`, wantErr: messages.CodeToolError, wantText: []string{"more than 1000 bytes"}},
		{name: "invalid arguments", tool: "gotool", args: `{"action": "dance"}`, wantErr: messages.CodeInvalidArguments, wantText: []string{`argument "action"`}},
	})
	out, err := call(t, r, "gotool", `{"action": "fail"}`)
	if err == nil || strings.Contains(err.Error(), "log line 5\n") {
		t.Errorf("stderr not cut to its last lines: %s %v", out, err)
	}
}

// processGone reports whether pid has exited: it no longer exists or is a zombie
// waiting for a parent that is not us.
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	// The state follows the command name, which is in parentheses.
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] == 'Z' || s[i+2] == 'X'
	}
	return false
}

func waitGone(t *testing.T, pids []int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for !processGone(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d is still running after the timeout", pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func readPids(t *testing.T, file string, want int) []int {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("the tool wrote no pid file: %v", err)
	}
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("pid file %q: %v", data, err)
		}
		pids = append(pids, pid)
	}
	if len(pids) != want {
		t.Fatalf("pid file %q: want %d pids", data, want)
	}
	return pids
}

func TestFolderTimeoutKillsEverything(t *testing.T) {
	dir := toolsFolder(t, "sh_sleep")
	buildGoTool(t, dir)
	pidFile := filepath.Join(t.TempDir(), "pids")
	f, err := NewFolder(dir, &FolderOptions{Env: []string{"PIDFILE=" + pidFile}})
	if err != nil {
		t.Fatal(err)
	}
	r := New()
	r.AddFolder(f)

	t.Run("shell script and its child", func(t *testing.T) {
		_, err := call(t, r, "sh_sleep", `{}`) // its manifest's timeout: 1s
		if te := messages.AsToolError(err); te.Code != messages.CodeTimeout || !strings.Contains(te.Message, "1s") {
			t.Fatalf("err = %v, want a timeout after 1s", err)
		}
		waitGone(t, readPids(t, pidFile, 2))
	})
	t.Run("go tool stopped by the caller's deadline", func(t *testing.T) {
		os.Remove(pidFile)
		tool, _ := r.Lookup("gotool")
		// Long enough for the tool to start and write its pid on a busy machine; it
		// sleeps far longer.
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err := tool.Run(ctx, json.RawMessage(`{"action": "sleep"}`))
		if te := messages.AsToolError(err); te.Code != messages.CodeTimeout {
			t.Fatalf("err = %v, want a timeout", err)
		}
		waitGone(t, readPids(t, pidFile, 1))
	})
	t.Run("cancelled", func(t *testing.T) {
		tool, _ := r.Lookup("gotool")
		ctx, cancel := context.WithCancel(context.Background())
		go func() { time.Sleep(200 * time.Millisecond); cancel() }()
		if _, err := tool.Run(ctx, json.RawMessage(`{"action": "sleep"}`)); !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	})
}

// TestFolderToolLeavesNothingBehind runs, 16 at once, a tool that leaves processes
// of every kind a process-group kill misses (setsid, double fork, a daemon's child):
// when each call has answered, none of them runs.
func TestFolderToolLeavesNothingBehind(t *testing.T) {
	dir := toolsFolder(t, "sh_daemon")
	pidFile := filepath.Join(t.TempDir(), "pids")
	f, err := NewFolder(dir, &FolderOptions{Env: []string{"PIDFILE=" + pidFile}})
	if err != nil {
		t.Fatal(err)
	}
	r := New()
	r.AddFolder(f)
	tool, ok := r.Lookup("sh_daemon")
	if !ok {
		t.Fatal("no tool sh_daemon")
	}
	const calls = 16
	errs := make(chan error, calls)
	for range calls {
		go func() {
			out, err := tool.Run(context.Background(), json.RawMessage(`{}`))
			if err == nil && string(out) != `{"started":4}` {
				err = fmt.Errorf("answer %s", out)
			}
			errs <- err
		}()
	}
	for range calls {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, pid := range readPids(t, pidFile, 4*calls) {
		if !processGone(pid) {
			t.Errorf("process %d outlived its call", pid)
		}
	}
}

func TestFolderPicksUpChanges(t *testing.T) {
	dir := toolsFolder(t, "sh_echo")
	f, err := NewFolder(dir, &FolderOptions{RescanInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	r := New()
	r.AddFolder(f)
	if _, ok := r.Lookup("sh_garbage"); ok {
		t.Fatal("sh_garbage there before it was added")
	}

	copyTool(t, "testdata/shtools/sh_garbage", dir) // added while running
	if _, err := call(t, r, "sh_garbage", `{}`); messages.AsToolError(err).Code != messages.CodeToolError {
		t.Errorf("new tool: err = %v", err)
	}

	// A changed manifest is reloaded: the size differs, so no mtime granularity matters.
	manifest := filepath.Join(dir, "sh_echo.mcp.json")
	if err := os.WriteFile(manifest, []byte(`{"description": "Echo, version 2.", "inputSchema": {"type": "object"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if echo, _ := r.Lookup("sh_echo"); echo.Info.Description != "Echo, version 2." {
		t.Errorf("changed manifest not reloaded: %+v", echo.Info)
	}
	if out, err := call(t, r, "sh_echo", `{"any": 1}`); err != nil || string(out) != `{"any":1}` {
		t.Errorf("changed tool: %s, %v", out, err)
	}

	// A broken manifest removes the tool and says why; fixing it brings it back.
	if err := os.WriteFile(manifest, []byte(`{"description": `), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.Rescan(); err == nil || !strings.Contains(err.Error(), "sh_echo.mcp.json") {
		t.Errorf("Rescan = %v, want the broken manifest named", err)
	}
	if _, ok := r.Lookup("sh_echo"); ok {
		t.Error("tool with a broken manifest still listed")
	}

	if err := os.Remove(filepath.Join(dir, "sh_garbage.mcp.json")); err != nil {
		t.Fatal(err)
	}
	if got := toolNames(r); len(got) != 0 {
		t.Errorf("tools after removal = %v", got)
	}
}

func TestFolderRescanInterval(t *testing.T) {
	dir := toolsFolder(t, "sh_echo")
	f, err := NewFolder(dir, &FolderOptions{RescanInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	copyTool(t, "testdata/shtools/sh_garbage", dir)
	if len(f.Tools()) != 1 {
		t.Error("rescanned before the interval")
	}
	if err := f.Rescan(); err != nil || len(f.Tools()) != 2 {
		t.Errorf("after Rescan: %v, %d tools", err, len(f.Tools()))
	}
}

func TestFolderProblems(t *testing.T) {
	tests := []struct {
		name     string
		files    map[string]string // name → content; names without a dot are made executable
		noExec   bool
		wantErr  string
		wantTool bool
	}{
		{name: "good", files: map[string]string{"ok": "#!/bin/sh\necho 1", "ok.mcp.json": `{}`}, wantTool: true},
		{name: "no executable", files: map[string]string{"ok.mcp.json": `{}`}, wantErr: "no executable"},
		{name: "not executable", files: map[string]string{"ok": "#!/bin/sh\necho 1", "ok.mcp.json": `{}`}, noExec: true, wantErr: "not executable"},
		{name: "name differs", files: map[string]string{"ok": "#!/bin/sh\necho 1", "ok.mcp.json": `{"name": "other"}`}, wantErr: "differs from the file name"},
		{name: "not JSON", files: map[string]string{"ok": "#!/bin/sh\necho 1", "ok.mcp.json": `{name: "ok"}`}, wantErr: "not a valid tool manifest"},
		{name: "schema not an object", files: map[string]string{"ok": "#!/bin/sh\necho 1", "ok.mcp.json": `{"inputSchema": {"type": "string"}}`}, wantErr: "inputSchema"},
		{name: "an executable without manifest is ignored", files: map[string]string{"helper": "#!/bin/sh\necho 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tt.files {
				mode := os.FileMode(0o644)
				if !strings.Contains(name, ".") && !tt.noExec {
					mode = 0o755
				}
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), mode); err != nil {
					t.Fatal(err)
				}
			}
			f, err := NewFolder(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = f.Rescan()
			if (err != nil) != (tt.wantErr != "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("Rescan = %v, want %q", err, tt.wantErr)
			}
			if _, ok := f.Lookup("ok"); ok != tt.wantTool {
				t.Errorf("tool listed = %v, want %v", ok, tt.wantTool)
			}
		})
	}
}

func TestNewFolder(t *testing.T) {
	tests := []struct {
		name    string
		dir     string
		opts    *FolderOptions
		wantErr bool
	}{
		{name: "exists", dir: t.TempDir()},
		{name: "missing", dir: filepath.Join(t.TempDir(), "nope"), wantErr: true},
		{name: "a file", dir: "folder_test.go", wantErr: true},
		{name: "bad env entry", dir: t.TempDir(), opts: &FolderOptions{Env: []string{"=x"}}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewFolder(tt.dir, tt.opts); (err != nil) != tt.wantErr {
				t.Errorf("err = %v, wantErr %v", err, tt.wantErr)
			}
		})
	}
}

func TestEnvironment(t *testing.T) {
	lookup := func(name string) (string, bool) {
		v, ok := map[string]string{"PATH": "/bin", "EMPTY": ""}[name]
		return v, ok
	}
	got, err := environment([]string{"PATH", "EMPTY", "MISSING", "X=a=b"}, lookup)
	if want := []string{"PATH=/bin", "EMPTY=", "X=a=b"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("environment = %q, %v; want %q", got, err, want)
	}
	if got, _ := environment(nil, lookup); got == nil || len(got) != 0 {
		t.Errorf("environment(nil) = %#v, want an empty, non-nil list", got)
	}
}

func TestOneJSONValue(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    string
		wantErr string
	}{
		{name: "object", in: "{\"a\": [1, 2]}\n", want: `{"a":[1,2]}`},
		{name: "string", in: ` "x" `, want: `"x"`},
		{name: "number", in: `42`, want: `42`},
		{name: "empty", in: "\n", wantErr: "printed nothing"},
		{name: "text", in: "hello", wantErr: "not JSON"},
		{name: "truncated", in: `{"a": `, wantErr: "not JSON"},
		{name: "two values", in: `{} {}`, wantErr: "more than one"},
		{name: "trailing text", in: `{} done`, wantErr: "more than one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := oneJSONValue([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Errorf("got %s, %v; want %s", got, err, tt.want)
			}
		})
	}
}

func FuzzOneJSONValue(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1} `, `[1,2`, `"x" "y"`, "", "  \n", `nul`, `1e999`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := oneJSONValue(b)
		if err == nil && !json.Valid(v) {
			t.Fatalf("oneJSONValue(%q) = %q, not valid JSON", b, v)
		}
	})
}

func TestTailBuffer(t *testing.T) {
	tb := &tailBuffer{max: 16}
	for i := range 100 {
		fmt.Fprintf(tb, "line %d\n", i)
	}
	if got := tb.lastLines(2); got != "stderr: line 98\nline 99" {
		t.Errorf("lastLines = %q", got)
	}
	if got := (&tailBuffer{max: 16}).lastLines(3); got != "nothing on stderr" {
		t.Errorf("empty lastLines = %q", got)
	}
	io.WriteString(tb, "")
}

// BenchmarkFolderTool runs a shell tool of a tools folder: the cost of starting a
// process (and its reaper) per call.
func BenchmarkFolderTool(b *testing.B) {
	dir := b.TempDir()
	copyTool(b, "testdata/shtools/sh_echo", dir)
	f, err := NewFolder(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	r := New()
	r.AddFolder(f)
	tool, _ := r.Lookup("sh_echo")
	args := json.RawMessage(`{"text": "hi"}`)
	for b.Loop() {
		if _, err := tool.Run(context.Background(), args); err != nil {
			b.Fatal(err)
		}
	}
}

// A tool reading its parent's /proc/<ppid>/cmdline and environ finds none of the
// secrets its caller has there: its parent is its reaper, started with the tool's own
// allow-listed environment. The caller is a real process (this test binary, started
// again) with a canary in its environment and on its command line, as an executor has
// its NATS password.
func TestToolCannotReadItsCallersSecrets(t *testing.T) {
	const canary = "s3cret-canary-7f1d"
	if os.Getenv("LOCALTOOLS_TEST_CALLER") != "" {
		dir := toolsFolder(t, "sh_parent")
		f, err := NewFolder(dir, &FolderOptions{Env: []string{"TOOL_SETTING=on"}})
		if err != nil {
			t.Fatal(err)
		}
		r := New()
		r.AddFolder(f)
		out, err := call(t, r, "sh_parent", `{}`)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("RESULT %s\n", out)
		return
	}
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestToolCannotReadItsCallersSecrets$", "-test.v", "nats://executor:"+canary+"@localhost:4222")
	cmd.Env = append(os.Environ(), "LOCALTOOLS_TEST_CALLER=1", "TOOLBUS_EXECUTOR_PASSWORD="+canary)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("caller: %v\n%s", err, out)
	}
	_, result, ok := strings.Cut(string(out), "RESULT ")
	if !ok {
		t.Fatalf("no result:\n%s", out)
	}
	var seen struct{ Cmdline, Environ string }
	if err := json.Unmarshal([]byte(strings.SplitN(result, "\n", 2)[0]), &seen); err != nil {
		t.Fatalf("%v: %s", err, result)
	}
	if strings.Contains(seen.Cmdline+seen.Environ, canary) {
		t.Fatalf("the tool read the caller's secret from /proc/$PPID: %+v", seen)
	}
	if seen.Cmdline == "" || !strings.Contains(seen.Environ, "TOOL_SETTING=on") {
		t.Fatalf("the tool read nothing of its parent (its reaper, with the tool's environment): %+v", seen)
	}
}

// lollms-style Python tools: NAME.py defining execute(params) beside NAME.mcp.json, or
// both in a folder NAME/ (importing a module beside it). The manifest's schema is
// enforced whichever way it is spelled; what the tool prints does not spoil its result;
// an exception is a tool_error with its message.
func TestFolderPythonTools(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatal("python3 is needed (scripts/test installs it)")
	}
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("testdata/pytools")); err != nil {
		t.Fatal(err)
	}
	f, err := NewFolder(dir, &FolderOptions{Env: []string{"LANG=C.UTF-8"}})
	if err != nil {
		t.Fatal(err)
	}
	r := New()
	r.AddFolder(f)
	if names := toolNames(r); !slices.Contains(names, "greet") || !slices.Contains(names, "word_stats") || !slices.Contains(names, "fails") {
		t.Fatalf("tools %v", names)
	}
	for _, tc := range []struct {
		tool, args, want string
		code             messages.ErrorCode
	}{
		{tool: "greet", args: `{"name": "Ада"}`, want: `{"greeting":"Hello, Ада!"}`},
		{tool: "word_stats", args: `{"text": "one two three"}`, want: `{"words":3}`},
		{tool: "greet", args: `{}`, code: messages.CodeInvalidArguments, want: "name"},
		{tool: "fails", args: `{}`, code: messages.CodeToolError, want: "ValueError: the ticket system is read-only today"},
	} {
		out, err := call(t, r, tc.tool, tc.args)
		if tc.code == "" {
			if err != nil || string(out) != tc.want {
				t.Errorf("%s %s = %s, %v; want %s", tc.tool, tc.args, out, err, tc.want)
			}
			continue
		}
		if te := messages.AsToolError(err); te.Code != tc.code || !strings.Contains(te.Message, tc.want) {
			t.Errorf("%s %s: err = %v, want %s mentioning %q", tc.tool, tc.args, err, tc.code, tc.want)
		}
	}
}

// A tool runs under limits: past its memory limit (its manifest's, here) it is stopped
// with a tool_error that says so, past its file size limit (the folder's) too; the
// folder's defaults apply to a tool without limits of its own.
func TestFolderToolLimits(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("the test needs python3: %v", err)
	}
	dir := t.TempDir()
	write := func(name, body, manifest string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!"+python+"\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+ManifestSuffix), []byte(manifest), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("hog", "b = bytearray(600 << 20)\nprint(len(b))\n", `{"name": "hog", "limits": {"memoryBytes": 268435456}}`)
	write("writer", "import os\nwith open(os.path.join(os.environ.get('TMPDIR', '/tmp'), 'big-%d' % os.getpid()), 'wb') as f:\n    f.write(b'x' * (8 << 20))\nprint(1)\n",
		`{"name": "writer"}`)
	write("modest", "b = bytearray(64 << 20)\nprint(len(b))\n", `{"name": "modest"}`)
	f, err := NewFolder(dir, &FolderOptions{Env: []string{"TMPDIR=" + t.TempDir()}, Limits: reaper.Limits{FileSizeBytes: 1 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	r := New()
	r.AddFolder(f)
	for tool, want := range map[string]string{"hog": "memory limit", "writer": "file size limit"} {
		_, err := call(t, r, tool, `{}`)
		if te := messages.AsToolError(err); te == nil || te.Code != messages.CodeToolError || !strings.Contains(te.Message, want) {
			t.Errorf("%s: %v, want a tool_error naming its %s", tool, err, want)
		}
	}
	if out, err := call(t, r, "modest", `{}`); err != nil || string(out) != "67108864" {
		t.Errorf("modest: %s, %v; want it to run within the default limits", out, err)
	}
}
