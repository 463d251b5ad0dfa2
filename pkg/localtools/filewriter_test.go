package localtools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolbus/toolbus/pkg/messages"
)

func TestFileWriter(t *testing.T) {
	base := t.TempDir()
	root, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
	for _, d := range []string{root, outside, filepath.Join(root, "inner")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFiles(t, base, map[string]string{"outside/secret.txt": "secret", "root/existing.txt": "old\n", "root/inner/target.txt": "target\n"})
	links := map[string]string{
		"root/out":              outside,                                 // a folder link leading out
		"root/secret-link.txt":  filepath.Join(outside, "secret.txt"),    // a file link leading out
		"root/relative-out":     "../outside",                            // relative, leading out
		"root/dangling-out.txt": filepath.Join(outside, "new.txt"),       // to a file not there yet
		"root/in-link.txt":      "inner/target.txt",                      // stays inside
		"root/abs-in-link.txt":  filepath.Join(root, "inner/target.txt"), // absolute, stays inside
	}
	for link, target := range links {
		if err := os.Symlink(target, filepath.Join(base, link)); err != nil {
			t.Fatal(err)
		}
	}
	tool, err := FileWriter(root, &FileWriterOptions{MaxWriteBytes: 1000, MaxFileBytes: 1500})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		args     string
		wantErr  messages.ErrorCode
		wantFile string // relative to base
		want     string
	}{
		{name: "new file", args: `{"file_path": "notes.md", "content": "hello"}`, wantFile: "root/notes.md", want: "hello"},
		{name: "new file in new folders", args: `{"file_path": "a/b/c.txt", "content": "deep"}`, wantFile: "root/a/b/c.txt", want: "deep"},
		{name: "overwrite", args: `{"file_path": "existing.txt", "content": "new", "mode": "overwrite"}`, wantFile: "root/existing.txt", want: "new"},
		{name: "append", args: `{"file_path": "existing.txt", "content": "+more", "mode": "append"}`, wantFile: "root/existing.txt", want: "new+more"},
		{name: "append creates", args: `{"file_path": "log.txt", "content": "line\n", "mode": "append"}`, wantFile: "root/log.txt", want: "line\n"},
		{name: "dot segments inside", args: `{"file_path": "./a/./d.txt", "content": "x"}`, wantFile: "root/a/d.txt", want: "x"},
		{name: "unicode name", args: `{"file_path": "Größe/東京.md", "content": "ü"}`, wantFile: "root/Größe/東京.md", want: "ü"},
		{name: "link inside is written through", args: `{"file_path": "in-link.txt", "content": "via link", "mode": "append"}`, wantFile: "root/inner/target.txt", want: "target\nvia link"},
		{name: "absolute link inside is written through", args: `{"file_path": "abs-in-link.txt", "content": "abs"}`, wantFile: "root/inner/target.txt", want: "abs"},

		{name: "dot dot", args: `{"file_path": "../outside/x.txt", "content": "x"}`, wantErr: messages.CodeNotAllowed},
		{name: "dot dot that stays inside lexically", args: `{"file_path": "a/../b.txt", "content": "x"}`, wantErr: messages.CodeNotAllowed},
		{name: "backslash dot dot", args: `{"file_path": "a\\..\\..\\x", "content": "x"}`, wantErr: messages.CodeNotAllowed},
		{name: "absolute path", args: `{"file_path": "` + filepath.Join(root, "abs.txt") + `", "content": "x"}`, wantErr: messages.CodeNotAllowed},
		{name: "absolute path outside", args: `{"file_path": "/etc/passwd", "content": "x"}`, wantErr: messages.CodeNotAllowed},
		{name: "symlinked folder out of the root", args: `{"file_path": "out/x.txt", "content": "x"}`, wantErr: messages.CodeNotAllowed},
		{name: "relative symlinked folder out of the root", args: `{"file_path": "relative-out/x.txt", "content": "x"}`, wantErr: messages.CodeNotAllowed},
		{name: "symlinked file out of the root", args: `{"file_path": "secret-link.txt", "content": "x"}`, wantErr: messages.CodeNotAllowed},
		{name: "dangling symlink out of the root", args: `{"file_path": "dangling-out.txt", "content": "x"}`, wantErr: messages.CodeNotAllowed},
		{name: "huge write", args: `{"file_path": "big.txt", "content": "` + strings.Repeat("x", 1001) + `"}`, wantErr: messages.CodeInvalidArguments},
		{name: "append beyond the file limit", args: `{"file_path": "grow.txt", "content": "` + strings.Repeat("x", 1000) + `"}`, wantFile: "root/grow.txt", want: strings.Repeat("x", 1000)},
		{name: "append beyond the file limit refused", args: `{"file_path": "grow.txt", "mode": "append", "content": "` + strings.Repeat("x", 600) + `"}`, wantErr: messages.CodeInvalidArguments},
		{name: "empty path", args: `{"file_path": "", "content": "x"}`, wantErr: messages.CodeInvalidArguments},
		{name: "root itself", args: `{"file_path": ".", "content": "x"}`, wantErr: messages.CodeInvalidArguments},
		{name: "a folder", args: `{"file_path": "inner", "content": "x"}`, wantErr: messages.CodeInvalidArguments},
		{name: "trailing slash", args: `{"file_path": "new/", "content": "x"}`, wantErr: messages.CodeInvalidArguments},
		{name: "bad mode", args: `{"file_path": "m.txt", "content": "x", "mode": "prepend"}`, wantErr: messages.CodeInvalidArguments},
		{name: "missing content", args: `{"file_path": "m.txt"}`, wantErr: messages.CodeInvalidArguments},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := tool.Run(context.Background(), json.RawMessage(tt.args))
			if tt.wantErr != "" {
				var te *messages.ToolError
				if !errors.As(err, &te) || te.Code != tt.wantErr {
					t.Fatalf("err = %v, want %s", err, tt.wantErr)
				}
				if strings.Contains(te.Message, base) && !strings.Contains(tt.args, base) {
					t.Errorf("message shows the server's path: %s", te.Message)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(base, tt.wantFile))
			if err != nil || string(got) != tt.want {
				t.Errorf("%s = %q, %v; want %q (result %s)", tt.wantFile, got, err, tt.want, out)
			}
		})
	}
	if got, _ := os.ReadFile(filepath.Join(outside, "secret.txt")); string(got) != "secret" {
		t.Errorf("the file outside the root changed: %q", got)
	}
	entries, _ := os.ReadDir(outside)
	if len(entries) != 1 {
		t.Errorf("files appeared outside the root: %v", entries)
	}
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if strings.Contains(d.Name(), ".tmp-") {
			t.Errorf("temporary file left behind: %s", p)
		}
		return nil
	})
	if fi, err := os.Lstat(filepath.Join(root, "in-link.txt")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link inside the root was replaced: %v %v", fi, err)
	}
}

func TestFileWriterKeepsMode(t *testing.T) {
	root := t.TempDir()
	p := filepath.Join(root, "script.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o750); err != nil {
		t.Fatal(err)
	}
	tool, err := FileWriter(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tool.Run(context.Background(), json.RawMessage(`{"file_path": "script.sh", "content": "echo hi\n", "mode": "append"}`)); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o750 {
		t.Errorf("mode = %v, %v; want 0750", fi.Mode(), err)
	}
}

func TestFileWriterRoot(t *testing.T) {
	tests := []struct {
		name    string
		root    string
		wantErr bool
	}{
		{name: "exists", root: t.TempDir()},
		{name: "missing", root: filepath.Join(t.TempDir(), "nope"), wantErr: true},
		{name: "a file", root: "filewriter_test.go", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := FileWriter(tt.root, nil)
			if (err != nil) != tt.wantErr {
				t.Errorf("err = %v, wantErr %v", err, tt.wantErr)
			}
		})
	}
}

func FuzzLocalPath(f *testing.F) {
	for _, s := range []string{"a.txt", "../x", "a/../b", "/etc/passwd", `..\x`, ".", "a//b/", "./a/./b", "C:\\x", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		rel, err := localPath(p)
		if err != nil {
			return
		}
		if !filepath.IsLocal(rel) || filepath.IsAbs(rel) || rel == "." {
			t.Fatalf("localPath(%q) = %q, which is not below the root", p, rel)
		}
		for _, e := range strings.Split(filepath.ToSlash(rel), "/") {
			if e == ".." {
				t.Fatalf("localPath(%q) = %q holds '..'", p, rel)
			}
		}
	})
}

// A file name of 250 bytes is written: the temporary name beside it stays within the
// file system's 255. file_writer's lock file is not the model's to write.
func TestFileWriterLongNameAndLockFile(t *testing.T) {
	root := t.TempDir()
	tool, err := FileWriter(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.Repeat("ж", 123) + ".txt" // 250 bytes
	args, _ := json.Marshal(map[string]string{"file_path": name, "content": "x"})
	if _, err := tool.Run(context.Background(), args); err != nil {
		t.Fatalf("a %d-byte name: %v", len(name), err)
	}
	if data, err := os.ReadFile(filepath.Join(root, name)); err != nil || string(data) != "x" {
		t.Fatalf("read back: %q, %v", data, err)
	}
	_, err = tool.Run(context.Background(), json.RawMessage(`{"file_path": ".file_writer.lock", "content": "x"}`))
	if te := messages.AsToolError(err); te.Code != messages.CodeNotAllowed {
		t.Errorf("writing the lock file: %v, want not_allowed", err)
	}
}

// Three processes (this test binary, started again) append 60 lines each to one file,
// as three executor replicas sharing a folder would: every line arrives.
func TestFileWriterAppendsAcrossProcesses(t *testing.T) {
	const perProcess = 60
	if root := os.Getenv("FILEWRITER_TEST_ROOT"); root != "" {
		tool, err := FileWriter(root, &FileWriterOptions{MaxFileBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		for i := range perProcess {
			args, _ := json.Marshal(map[string]string{"file_path": "log/appends.txt", "mode": "append",
				"content": fmt.Sprintf("%s %d\n", os.Getenv("FILEWRITER_TEST_WHO"), i)})
			if _, err := tool.Run(context.Background(), args); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	root := t.TempDir()
	var cmds []*exec.Cmd
	for who := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestFileWriterAppendsAcrossProcesses$")
		cmd.Env = append(os.Environ(), "FILEWRITER_TEST_ROOT="+root, fmt.Sprintf("FILEWRITER_TEST_WHO=p%d", who))
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("a writer process: %v", err)
		}
	}
	data, err := os.ReadFile(filepath.Join(root, "log", "appends.txt"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 3*perProcess {
		t.Fatalf("%d lines, want %d: appends were lost", len(lines), 3*perProcess)
	}
}
