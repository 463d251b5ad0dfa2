// Package testbin gives tests the module's programs that they run as processes (the
// services, the CLI, the example servers, test tools): built once for the whole suite
// by scripts/test, or once per test process by the first test that asks for one.
package testbin

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sync"
	"testing"

	"github.com/toolbus/toolbus/internal/mcptest"
)

// Env names the folder of the programs built before the tests: scripts/test runs `go
// build -o $TOOLBUS_TEST_BIN/ PKG...` from the same tree with the same flags, so that
// the suite's packages do not each link the same programs again. Each program has the
// name go build gives it ([Name]).
const Env = "TOOLBUS_TEST_BIN"

var (
	majorVersion = regexp.MustCompile(`^v[0-9]+$`)
	mu           sync.Mutex
	built        = map[string]bool{} // the programs this process has built or found
)

// Name is the file name go build gives the program of the main package pkg: the last
// element of its path, less a major version suffix.
func Name(pkg string) string {
	name := path.Base(pkg)
	if dir := path.Dir(pkg); majorVersion.MatchString(name) && dir != "." {
		name = path.Base(dir)
	}
	return name
}

// Path returns the program of the main package pkg: a path from the module's root
// ("./cmd/executor") or an import path the module requires. It is the one in [Env]'s
// folder when that holds it. Otherwise this process builds it, once, into that folder
// or, without [Env], into the module's .cache/testbin (a build replaces the file in one
// rename, so a process running the one before is not disturbed). Tests only run it:
// other tests share the file.
func Path(t testing.TB, pkg string) string {
	t.Helper()
	dir, prebuilt := os.LookupEnv(Env)
	if !prebuilt || dir == "" {
		dir = filepath.Join(mcptest.RepoRoot(t), ".cache", "testbin")
	}
	p := filepath.Join(dir, Name(pkg))
	mu.Lock()
	defer mu.Unlock()
	if built[p] {
		return p
	}
	if fi, err := os.Stat(p); prebuilt && err == nil && fi.Mode().IsRegular() {
		built[p] = true
		return p
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := fmt.Sprintf("%s.%d.tmp", p, os.Getpid())
	cmd := exec.Command("go", "build", "-o", tmp, pkg)
	cmd.Dir = mcptest.RepoRoot(t)
	if b, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
	built[p] = true
	return p
}

// Copy puts a copy of pkg's program at dst (executable), for a test that needs it under
// a name or in a folder of its own, such as a tools folder.
func Copy(t testing.TB, pkg, dst string) {
	t.Helper()
	src, err := os.Open(Path(t, pkg))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, src); err != nil {
		out.Close()
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
