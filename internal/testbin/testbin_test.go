package testbin

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestName(t *testing.T) {
	for pkg, want := range map[string]string{
		"./cmd/executor":                    "executor",
		"./examples/ticket-service":         "ticket-service",
		"github.com/nats-io/nats-server/v2": "nats-server",
		"example.com/tool":                  "tool",
		"v2":                                "v2",
	} {
		if got := Name(pkg); got != want {
			t.Errorf("Name(%q) = %q, want %q", pkg, got, want)
		}
	}
}

// TestPathPrefersTheFolderBuiltBefore: a program in Env's folder is the one used; one
// missing there is built into it, once per process.
func TestPathPrefersTheFolderBuiltBefore(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(Env, dir)
	prebuilt := filepath.Join(dir, "prebuilt-example")
	if err := os.WriteFile(prebuilt, []byte("#!/bin/sh\necho prebuilt\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := Path(t, "./somewhere/prebuilt-example"); got != prebuilt {
		t.Fatalf("Path = %q, want the program built before, %q", got, prebuilt)
	}

	const pkg = "./pkg/toolbus/testdata/counter"
	got := Path(t, pkg)
	if got != filepath.Join(dir, "counter") {
		t.Fatalf("Path = %q, want it built into %s", got, dir)
	}
	fi, err := os.Stat(got)
	if err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("the built program: %v, %v", fi, err)
	}
	// Once built, the process does not build it again.
	if err := os.Remove(got); err != nil {
		t.Fatal(err)
	}
	if again := Path(t, pkg); again != got {
		t.Fatalf("second Path = %q", again)
	}
	if _, err := os.Stat(got); !os.IsNotExist(err) {
		t.Fatalf("built twice in one process: %v", err)
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "*.tmp"))
	if len(matches) != 0 {
		t.Fatalf("left behind: %v", matches)
	}
}

func TestCopyRuns(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(Env, dir)
	if err := os.WriteFile(filepath.Join(dir, "hello"), []byte("#!/bin/sh\necho hello from the copy\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "renamed")
	Copy(t, "./x/hello", dst)
	out, err := exec.Command(dst).Output()
	if err != nil || !strings.Contains(string(out), "hello from the copy") {
		t.Fatalf("the copy ran: %q, %v", out, err)
	}
}
