package toolbus_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolbus/toolbus/internal/cli"
	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/messages"
)

// The commands of examples/mcp/README.md and examples/ticket-service/README.md, through
// `toolbus run`: the configurations with npx servers run the installed copies instead;
// the remote one is used as it is, against server-everything over streamable HTTP and
// SSE.
func TestMCPExamples(t *testing.T) {
	dir := filepath.Join(mcpRepoRoot(t), "examples", "mcp")
	example := func(name string) string { return filepath.Join(dir, name) }

	t.Run("stdio", func(t *testing.T) {
		memoryFile := filepath.Join(t.TempDir(), "memory.jsonl")
		cfg := mcpInstalled(t, example("toolbus.json"), map[string]string{"MEMORY_FILE_PATH": memoryFile})
		outs := mcpRun(t, cfg, example("1-everything.txt"), example("2-remember.txt"), example("3-recall.txt"))
		mcpOK(t, outs[0].Results[0], `"Echo: hello from toolbus"`)
		mcpOK(t, outs[0].Results[1], "42")
		mcpOK(t, outs[1].Results[0], `"toolbus"`)
		mcpOK(t, outs[2].Results[0], `"runs the tool calls of LLM responses over NATS"`)
		if b, err := os.ReadFile(memoryFile); err != nil || !bytes.Contains(b, []byte("toolbus")) {
			t.Errorf("the memory server did not write %s: %v", memoryFile, err)
		}
	})

	t.Run("ticket-service", func(t *testing.T) {
		tickets := filepath.Join(mcpRepoRoot(t), "examples", "ticket-service")
		cfg := mcpInstalled(t, filepath.Join(tickets, "toolbus.json"), map[string]string{"TICKETS_URL": mcpStartTicketService(t)})
		outs := mcpRun(t, cfg, filepath.Join(tickets, "1-create.txt"), filepath.Join(tickets, "2-status.txt"))
		mcpOK(t, outs[0].Results[0], `"id":"T-1"`, `"priority":"high"`)
		mcpOK(t, outs[1].Results[0], `"status":"open"`)
		mcpOK(t, outs[1].Results[1], `"Echo: ticket T-1 is being handled"`)
	})

	t.Run("remote", func(t *testing.T) {
		_, httpURL := mcpStartEverything(t, "streamableHttp", 0)
		_, sseURL := mcpStartEverything(t, "sse", 0)
		t.Setenv("EVERYTHING_URL", httpURL+"/mcp")
		t.Setenv("EVERYTHING_SSE_URL", sseURL+"/sse")
		outs := mcpRun(t, example("remote.json"), example("1-everything.txt"), example("4-remote.txt"))
		mcpOK(t, outs[0].Results[0], `"Echo: hello from toolbus"`)
		mcpOK(t, outs[0].Results[1], "42")
		mcpOK(t, outs[1].Results[0], `"Echo: over streamable HTTP"`)
		mcpOK(t, outs[1].Results[1], `"Echo: over SSE"`)
		mcpOK(t, outs[1].Results[2], "42")
	})
}

// mcpInstalled writes a copy of a configuration whose npx servers run the installed
// copies instead (tests do not download), with env for its ${VAR}s, and returns its path.
func mcpInstalled(t *testing.T, path string, env map[string]string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(data, path, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range cfg.MCPServers {
		if s.Command != "npx" {
			continue
		}
		if len(s.Args) != 2 || s.Args[0] != "-y" {
			t.Fatalf("%s: %+v, want npx -y PACKAGE@VERSION", name, s)
		}
		pkg := s.Args[1][:strings.LastIndexByte(s.Args[1], '@')]
		s.Command, s.Args = "node", []string{mcpNPMScript(t, pkg)}
		cfg.MCPServers[name] = s
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), filepath.Base(path))
	if err := os.WriteFile(out, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// mcpRun runs `toolbus run --json --config cfg files...` and returns its outputs, each
// with every call answered.
func mcpRun(t *testing.T, cfg string, files ...string) []messages.Output {
	t.Helper()
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := append([]string{"run", "--json", "--config", cfg}, files...)
	if code := cli.Main(ctx, args, cli.Env{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr,
		Getenv: func(string) string { return "" }}); code != 0 {
		t.Fatalf("toolbus %s: exit %d\n%s", strings.Join(args, " "), code, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != len(files) {
		t.Fatalf("%d outputs for %d responses:\n%s", len(lines), len(files), stdout.String())
	}
	outs := make([]messages.Output, len(lines))
	for i, l := range lines {
		if err := json.Unmarshal([]byte(l), &outs[i]); err != nil {
			t.Fatalf("output %d: %v", i, err)
		}
		if outs[i].Kind != messages.KindToolResults {
			t.Fatalf("%s: kind %s", files[i], outs[i].Kind)
		}
	}
	return outs
}
