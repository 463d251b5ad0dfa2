package toolbus_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolbus/toolbus/internal/testbin"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolbus"
)

// startWithLists runs the parser, executor and formatter with cfg and the Go tools of
// reg until the test ends, and returns the toolbus and a client.
func startWithLists(t *testing.T, cfg *config.Config, reg *localtools.Registry) (*toolbus.Toolbus, *client.Client) {
	t.Helper()
	connect := startBus(t)
	ctx, cancel := context.WithCancel(context.Background())
	tb, err := toolbus.Start(ctx, toolbus.Options{Provision: true, Conn: connect("node"), Config: cfg, Tools: reg,
		Services: []string{toolbus.Parser, toolbus.Executor, toolbus.Formatter}})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); tb.Wait() })
	c, err := client.New(connect("orchestrator"))
	if err != nil {
		t.Fatal(err)
	}
	return tb, c
}

// askOne submits one call and returns its result.
func askOne(t *testing.T, c *client.Client, name string, args any) messages.OutputResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a bound on a hang
	defer cancel()
	b, _ := json.Marshal(map[string]any{"name": name, "arguments": args})
	out, err := c.Ask(ctx, "lists", "<tool_call>"+string(b)+"</tool_call>", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Results) != 1 {
		t.Fatalf("%s: %d results: %s", name, len(out.Results), out.Text)
	}
	return out.Results[0]
}

// refused fails the test unless r was answered not_allowed by the list named.
func refused(t *testing.T, name string, r messages.OutputResult, reason string) {
	t.Helper()
	if r.Success || r.Error == nil || r.Error.Code != messages.CodeNotAllowed || !strings.Contains(r.Error.Message, reason) {
		t.Errorf("%s: success=%v %.100s error=%+v; want not_allowed, %q", name, r.Success, r.Result, r.Error, reason)
	}
}

// ran fails the test unless r succeeded.
func ran(t *testing.T, name string, r messages.OutputResult) {
	t.Helper()
	if !r.Success {
		t.Errorf("%s: %+v, want it run", name, r.Error)
	}
}

// localToolsConfig writes a tools folder holding the tool "greet" and a file_writer root
// and returns the configuration's "local" section using them.
func localToolsConfig(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	tools, out := filepath.Join(dir, "tools"), filepath.Join(dir, "out")
	for _, d := range []string{tools, out} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(tools, "greet"), []byte("#!/bin/sh\necho '\"hello\"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tools, "greet.mcp.json"), []byte(`{"name": "greet", "inputSchema": {"type": "object"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return `"local": {"tools": {"folder": "` + tools + `", "env": ["PATH"]}, "file_writer": {"root": "` + out + `"}}`
}

// The top-level allowedTools covers every backend, not the MCP servers alone: a list
// that names none of the built-ins, the tools folder's, the program's Go tools or the
// engineering suite refuses them all, saying which list did.
func TestTopLevelAllowListCoversEveryBackend(t *testing.T) {
	t.Parallel()
	reg := localtools.New()
	if err := localtools.AddFunc(reg, messages.ToolInfo{Name: "lookup", ReadOnly: true},
		func(context.Context, struct{}) (string, error) { return "found", nil }); err != nil {
		t.Fatal(err)
	}
	cfg := mcpConfig(t, `{"allowedTools": ["nothing__echo"], `+localToolsConfig(t)+`}`)
	_, c := startWithLists(t, cfg, reg)
	for _, call := range []struct {
		name string
		args any
	}{
		{"clock", nil},
		{"file_writer", map[string]any{"file_path": "a.txt", "content": "x"}},
		{"greet", nil},
		{"lookup", nil},
		{"dispatch_engineering", map[string]any{"action": "info"}},
		{"execute_tool", map[string]any{"tool_name": "geometry.circle_area", "parameters": map[string]any{"d": 1}}},
	} {
		refused(t, call.name, askOne(t, c, call.name, call.args), "allowedTools does not list it")
	}
}

// A top-level blockedTools refuses what it names, whichever backend offers it, while
// the other tools run.
func TestTopLevelBlockList(t *testing.T) {
	t.Parallel()
	cfg := mcpConfig(t, `{"blockedTools": ["file_writer", "gr*"], `+localToolsConfig(t)+`}`)
	if len(cfg.Ignored) != 0 {
		t.Fatalf("blockedTools was ignored: %v", cfg.Ignored)
	}
	_, c := startWithLists(t, cfg, nil)
	refused(t, "file_writer", askOne(t, c, "file_writer", map[string]any{"file_path": "a.txt", "content": "x"}), `blockedTools lists it ("file_writer")`)
	refused(t, "greet", askOne(t, c, "greet", nil), `blockedTools lists it ("gr*")`)
	ran(t, "clock", askOne(t, c, "clock", nil))
	ran(t, "dispatch_engineering", askOne(t, c, "dispatch_engineering", map[string]any{"action": "info"}))
}

// The shape of a program that registers an in-process server's tool and allows it by
// its MCP name: a Go tool "add" of the server "calc", AllowedTools ["mcp__calc__add"].
// mcp__calc__add (and calc__add, calc::add) runs, and everything else is refused.
func TestGoToolsOfAServer(t *testing.T) {
	t.Parallel()
	type addIn struct {
		A float64 `json:"a"`
		B float64 `json:"b"`
	}
	reg := localtools.New()
	calc := reg.Server("calc")
	if err := localtools.AddFunc(calc, messages.ToolInfo{Name: "add", Description: "Add two numbers"},
		func(_ context.Context, in addIn) (float64, error) { return in.A + in.B, nil }); err != nil {
		t.Fatal(err)
	}
	if err := localtools.AddFunc(calc, messages.ToolInfo{Name: "sub"},
		func(_ context.Context, in addIn) (float64, error) { return in.A - in.B, nil }); err != nil {
		t.Fatal(err)
	}
	tb, c := startWithLists(t, &config.Config{AllowedTools: []string{"mcp__calc__add"}}, reg)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a bound on a hang
	defer cancel()
	if err := tb.WaitForTools(ctx); err != nil {
		t.Fatalf("WaitForTools: %v", err)
	}
	for _, name := range []string{"mcp__calc__add", "calc__add", "calc::add"} {
		r := askOne(t, c, name, map[string]any{"a": 2, "b": 3})
		if !r.Success || string(r.Result) != "5" {
			t.Errorf("%s: %s %+v, want 5", name, r.Result, r.Error)
		}
	}
	refused(t, "mcp__calc__sub", askOne(t, c, "mcp__calc__sub", map[string]any{"a": 2, "b": 3}), "allowedTools does not list it")
	for _, name := range []string{"clock", "dispatch_engineering"} {
		refused(t, name, askOne(t, c, name, nil), "allowedTools does not list it")
	}
}

// WaitForTools waits for every backend to list its tools, not for a tool the lists
// let through: a server whose tools they all refuse has listed them all the same, and
// WaitForTools returns (an MCP server's catalog was left out of the bucket, and
// WaitForTools waited for it until its context ended).
func TestWaitForToolsWhenTheListsRefuseEverything(t *testing.T) {
	t.Parallel()
	server := testbin.Path(t, "./pkg/mcpwire/testdata/stdioserver")
	cfg := mcpConfig(t, `{"allowedTools": ["nothing__echo"], "mcpServers": {"external": {"command": "`+server+`"}}}`)
	tb, c := startWithLists(t, cfg, nil)
	// A bound on a hang, not a speed: the server starts in well under a second.
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := tb.WaitForTools(ctx); err != nil {
		t.Fatalf("WaitForTools: %v", err)
	}
	refused(t, "external__pid", askOne(t, c, "external__pid", nil), "allowedTools does not list it")
	refused(t, "clock", askOne(t, c, "clock", nil), "allowedTools does not list it")
}

// The top-level lists follow the configuration file: a reload that blocks a built-in
// refuses it from then on, and one that lifts the block lets it run again.
func TestTopLevelListsReload(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "toolbus.json")
	write := func(body string) {
		if err := os.WriteFile(path+".tmp", []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"blockedTools": ["clock"]}`)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	tb, c := startWithLists(t, cfg, nil)
	refused(t, "clock", askOne(t, c, "clock", nil), `blockedTools lists it ("clock")`)
	write(`{"allowedTools": ["clock"]}`)
	tb.Reload()
	// A bound on a hang: the reload is applied within a poll or two.
	deadline := time.Now().Add(45 * time.Second)
	for !askOne(t, c, "clock", nil).Success {
		if time.Now().After(deadline) {
			t.Fatal("clock still refused after the block was lifted")
		}
		time.Sleep(50 * time.Millisecond)
	}
	refused(t, "dispatch_engineering", askOne(t, c, "dispatch_engineering", map[string]any{"action": "info"}), "allowedTools does not list it")
}
