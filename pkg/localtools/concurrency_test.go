package localtools

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestConcurrentUse runs every kind of local tool from many goroutines while their
// folders change, for the race detector.
func TestConcurrentUse(t *testing.T) {
	tools := toolsFolder(t, "sh_echo")
	docs, out := t.TempDir(), t.TempDir()
	writeFiles(t, docs, map[string]string{"a.md": "alpha"})
	f, err := NewFolder(tools, &FolderOptions{RescanInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	kb, err := NewKnowledgeBase(docs, &KnowledgeOptions{RefreshInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	fw, err := FileWriter(out, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := New()
	r.AddFolder(f)
	for _, tool := range []Tool{kb.Tool(), fw} {
		if err := r.Add(tool); err != nil {
			t.Fatal(err)
		}
	}
	// t.Fatal must not be called from these goroutines, so no helpers here.
	run := func(name, args string) {
		tool, ok := r.Lookup(name)
		if !ok {
			t.Errorf("no tool %q", name)
			return
		}
		if _, err := tool.Run(context.Background(), []byte(args)); err != nil {
			t.Error(err)
		}
	}
	const n = 8
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			run("sh_echo", `{"text": "x"}`)
			run("search_knowledge_base", `{"query": "alpha"}`)
			run("file_writer", `{"file_path": "log.txt", "mode": "append", "content": "line\n"}`)
			if err := os.WriteFile(filepath.Join(docs, fmt.Sprintf("d%d.md", i)), []byte("alpha beta"), 0o644); err != nil {
				t.Error(err)
			}
			_ = r.Tools()
		})
	}
	copyTool(t, "testdata/shtools/sh_garbage", tools)
	wg.Wait()
	data, err := os.ReadFile(filepath.Join(out, "log.txt"))
	if err != nil || strings.Count(string(data), "line\n") != n {
		t.Errorf("log.txt = %q, %v; want %d lines: an append was lost", data, err, n)
	}
	hits, _ := kb.Search(context.Background(), "beta", 20)
	if len(hits) != n {
		t.Errorf("%d documents hold beta, want %d", len(hits), n)
	}
	if _, ok := r.Lookup("sh_garbage"); !ok {
		t.Error("sh_garbage not picked up")
	}
}
