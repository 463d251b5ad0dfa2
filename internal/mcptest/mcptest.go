// Package mcptest finds what toolbus's tests run real MCP servers from: the repository
// root and the npm reference servers that scripts/install-mcp-servers installs.
package mcptest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// RepoRoot is the directory of go.mod above the test's working directory.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// NPMPackage returns the directory of an npm package installed in .cache/npm (or
// $TOOLBUS_NPM_DIR). Without it the test is skipped, unless TOOLBUS_REQUIRE_NPM is set
// (scripts/test sets it), where it fails.
func NPMPackage(t testing.TB, name string) string {
	t.Helper()
	root := os.Getenv("TOOLBUS_NPM_DIR")
	if root == "" {
		root = filepath.Join(RepoRoot(t), ".cache", "npm")
	} else if !filepath.IsAbs(root) {
		root = filepath.Join(RepoRoot(t), root)
	}
	dir := filepath.Join(root, "node_modules", filepath.FromSlash(name))
	if _, err := os.Stat(filepath.Join(dir, "package.json")); err != nil {
		msg := name + " is not installed in " + root + "; run scripts/install-mcp-servers"
		if os.Getenv("TOOLBUS_REQUIRE_NPM") != "" {
			t.Fatal(msg + " (TOOLBUS_REQUIRE_NPM is set)")
		}
		t.Skip(msg)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is not on PATH, yet the npm servers are installed")
	}
	return dir
}

// Proc is a live process, as /proc/<pid>/stat gives it.
type Proc struct{ PID, PPID, PGRP int }

// Procs lists the live (not zombie) processes for which keep is true; it skips the test
// where there is no /proc.
func Procs(t testing.TB, keep func(Proc) bool) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skip("no /proc to count processes in")
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
		s := string(stat)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) < 3 || fields[0] == "Z" {
			continue
		}
		p := Proc{PID: pid}
		p.PPID, _ = strconv.Atoi(fields[1])
		p.PGRP, _ = strconv.Atoi(fields[2])
		if keep(p) {
			out = append(out, pid)
		}
	}
	return out
}
