// Package docs holds toolbus's documentation pages, and the tests that keep them and
// the READMEs true: every shell block marked runnable in README.md, deploy/README.md,
// docs/*.md and examples/*/README.md runs, as a user would type it, and must succeed;
// every page is reachable from README.md, and every relative link leads to a file.
package docs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolbus/toolbus/internal/testbin"
)

// marker, on the line before a ```sh fence, makes the block runnable. It may name the
// programs the block needs beyond the shell and Go: "<!-- test: run; needs: npx nats -->".
const marker = "<!-- test: run"

// block is one runnable shell block.
type block struct {
	file  string // relative to the repository root
	line  int    // of the fence
	text  string
	needs []string
}

func (b block) String() string { return fmt.Sprintf("%s:%d", b.file, b.line) }

// pages are the Markdown pages whose commands run, relative to the repository root:
// README.md, deploy/README.md, every page of docs/ and every example's README.
func pages(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md", "deploy/README.md"}
	for _, pattern := range []string{"../docs/*.md", "../examples/*/README.md"} {
		more, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range more {
			files = append(files, strings.TrimPrefix(f, "../"))
		}
	}
	return files
}

// blocks reads the runnable blocks of the pages.
func blocks(t *testing.T) []block {
	t.Helper()
	files := pages(t)
	var out []block
	needs := regexp.MustCompile(`needs:\s*([^>]*?)\s*-->`)
	for _, name := range files {
		f, err := os.Open(filepath.Join("..", name))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		var prev string
		var cur *block
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			switch {
			case cur != nil && line == "```":
				out = append(out, *cur)
				cur = nil
			case cur != nil:
				cur.text += line + "\n"
			case strings.HasPrefix(line, "```sh") && strings.HasPrefix(strings.TrimSpace(prev), marker):
				cur = &block{file: name, line: n}
				if m := needs.FindStringSubmatch(prev); m != nil {
					cur.needs = strings.Fields(m[1])
				}
			}
			prev = line
		}
		f.Close()
	}
	return out
}

// freePort returns a TCP port nobody listens on right now.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// copyRepo copies the repository's tracked files into dir, so that what a block builds
// or writes stays out of the checkout (and two runs of the suite do not meet).
func copyRepo(t *testing.T, dir string) {
	t.Helper()
	out, err := exec.Command("git", "-C", "..", "ls-files", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src := filepath.Join("..", name)
		st, err := os.Stat(src)
		if err != nil {
			continue // deleted in the work tree
		}
		dst := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, st.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	// The npm packages scripts/install-mcp-servers installed, for npx.
	if abs, err := filepath.Abs("../.cache"); err == nil {
		_ = os.Symlink(abs, filepath.Join(dir, ".cache"))
	}
}

// substitute gives a block and the copy's configuration files ports of their own, so
// that blocks never meet another program on the machine (or a second run of the suite).
func substitute(t *testing.T, dir, text string) (string, map[string]string) {
	t.Helper()
	ports := map[string]string{}
	for _, p := range []string{"3001", "3002", "8080", "8081", "8088", "8090", "8222"} {
		ports[p] = freePort(t)
	}
	replace := func(s string) string {
		for from, to := range ports {
			s = regexp.MustCompile(`\b`+from+`\b`).ReplaceAllString(s, to)
		}
		return s
	}
	err := filepath.WalkDir(filepath.Join(dir, "examples"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".json") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(path, []byte(replace(string(data))), 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	// The embedded server of `toolbus serve` listens on a port of its own; the clients
	// (toolbus, nats) find it through their environment, which serve must not follow.
	ports["4222"] = freePort(t)
	text = regexp.MustCompile(`toolbus serve\b`).ReplaceAllString(replace(text), "toolbus serve --nats '' --port "+ports["4222"])
	return text, ports
}

func TestREADMEBlocks(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the README's commands")
	}
	all := blocks(t)
	if len(all) < 5 {
		t.Fatalf("%d runnable blocks found; the READMEs mark more", len(all))
	}
	bin := t.TempDir()
	for _, p := range prebuilt {
		if err := os.Symlink(testbin.Path(t, p.pkg), filepath.Join(bin, p.out)); err != nil {
			t.Fatal(err)
		}
	}
	cacheBin, _ := filepath.Abs("../.cache/bin")
	for _, b := range all {
		t.Run(b.String(), func(t *testing.T) {
			// Each block has a copy of the repository and ports of its own; most of a
			// block's time is spent waiting for servers to start, so blocks run side by
			// side (as many as -parallel, GOMAXPROCS by default).
			t.Parallel()
			path := cacheBin + string(os.PathListSeparator) + os.Getenv("PATH")
			for _, need := range b.needs {
				if _, err := exec.LookPath(need); err != nil && !inDir(cacheBin, need) {
					if os.Getenv("TOOLBUS_REQUIRE_TOOLS") != "" || os.Getenv("TOOLBUS_REQUIRE_NPM") != "" {
						t.Fatalf("the block needs %s (scripts/test installs it)", need)
					}
					t.Skipf("the block needs %s", need)
				}
			}
			dir := t.TempDir()
			copyRepo(t, dir)
			text, ports := substitute(t, dir, b.text)
			// `go run` of the two programs the READMEs run is the binary built above: the
			// same code, without compiling it in every block.
			text = strings.ReplaceAll(text, "go run ./cmd/toolbus", filepath.Join(bin, "toolbus"))
			text = strings.ReplaceAll(text, "go run ./examples/ticket-service", filepath.Join(bin, "ticket-service"))
			text = usePrebuilt(text, bin)
			out, err := runBlock(t, dir, text, append(os.Environ(),
				"PATH="+path,
				"NATS_URL=nats://127.0.0.1:"+ports["4222"],
				"TOOLBUS_NATS_URL=nats://127.0.0.1:"+ports["4222"],
				"TOOLBUS_OPS_ADDR=127.0.0.1:0"))
			if err != nil {
				t.Fatalf("%v\n--- block (as run)\n%s--- output\n%s", err, text, out)
			}
			if strings.TrimSpace(out) == "" {
				t.Fatalf("the block printed nothing\n%s", text)
			}
			// The examples' calls all succeed; a failed one means the README no longer
			// tells the truth.
			if strings.Contains(out, `"success": false`) || strings.Contains(out, `"success":false`) || strings.Contains(out, "level=ERROR") {
				t.Fatalf("a call failed or an error was logged\n--- block (as run)\n%s--- output\n%s", text, out)
			}
			t.Logf("output:\n%s", out)
		})
	}
}

// prebuilt are the programs the pages build or run, built before the blocks run (by
// scripts/test for the whole suite, see internal/testbin): built in each block's copy
// of the repository, they would be linked once per block, and a block that builds six
// of them spent minutes on a busy machine.
var prebuilt = []struct{ out, pkg string }{
	{"toolbus", "./cmd/toolbus"}, {"ticket-service", "./examples/ticket-service"},
	{"parser", "./cmd/parser"}, {"executor", "./cmd/executor"}, {"formatter", "./cmd/formatter"},
	{"healthd", "./cmd/healthd"}, {"engineering", "./cmd/engineering"},
	{"nats-server", "github.com/nats-io/nats-server/v2"},
}

// goBuild is a block's line that builds programs: "go build -o OUT PKG...".
var goBuild = regexp.MustCompile(`(?m)^go build -o (\S+) (.+)$`)

// usePrebuilt turns a block's "go build -o OUT PKG..." of prebuilt programs into copies
// of the binaries built before (the same code); a line that builds anything else stays.
func usePrebuilt(text, bin string) string {
	return goBuild.ReplaceAllStringFunc(text, func(line string) string {
		m := goBuild.FindStringSubmatch(line)
		out, pkgs := m[1], strings.Fields(m[2])
		var names []string
		for _, pkg := range pkgs {
			i := slices.IndexFunc(prebuilt, func(p struct{ out, pkg string }) bool { return p.pkg == pkg })
			if i < 0 {
				return line
			}
			names = append(names, filepath.Join(bin, prebuilt[i].out))
		}
		if !strings.HasSuffix(out, "/") && len(names) != 1 {
			return line
		}
		dir := out
		if !strings.HasSuffix(out, "/") {
			dir = filepath.Dir(out)
		}
		return "mkdir -p " + dir + " && cp " + strings.Join(names, " ") + " " + out
	})
}

func inDir(dir, name string) bool {
	_, err := os.Stat(filepath.Join(dir, name))
	return err == nil
}

// runBlock runs text with bash -e in dir, in a process group of its own that is killed
// afterwards (blocks start servers with &), and returns what it printed.
func runBlock(t *testing.T, dir, text string, env []string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", text)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // what it left running
	}
	if errors.Is(err, exec.ErrWaitDelay) {
		err = nil // a server it started kept the output open until killed
	}
	return out.String(), err
}

// skipMarker, on the line before a ```sh fence, says why a block cannot run in the suite:
// "<!-- test: skip; why: needs Docker with Docker Hub -->".
const skipMarker = "<!-- test: skip; why: "

// Every shell block of every page either runs in TestREADMEBlocks or says why it cannot:
// a command added to the docs is tested unless someone wrote down why not.
func TestEveryBlockRunsOrSaysWhyNot(t *testing.T) {
	for _, name := range pages(t) {
		data, err := os.ReadFile(filepath.Join("..", name))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(data), "\n")
		for i, line := range lines {
			if !strings.HasPrefix(line, "```sh") {
				continue
			}
			prev := ""
			if i > 0 {
				prev = strings.TrimSpace(lines[i-1])
			}
			switch {
			case strings.HasPrefix(prev, marker):
			case strings.HasPrefix(prev, skipMarker) && len(prev) > len(skipMarker)+len(" -->")+10:
			default:
				t.Errorf("%s:%d: a shell block neither marked %q nor %q with a reason", name, i+1, marker+" -->", skipMarker+"… -->")
			}
		}
	}
}
