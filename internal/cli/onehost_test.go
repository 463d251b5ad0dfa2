package cli

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/telemetry/telemetrytest"
)

// The services start side by side on one host with no flag but --nats — parser,
// formatter, healthd and three executors — and answer a response. Their default ops
// ports differ per service, and a taken default gives way to a free port. An address
// given explicitly that is taken is an error naming the flag.
func TestServicesOnOneHost(t *testing.T) {
	url := bustest.Server(t)
	// Provisioning is a step of its own; the services only check it was done.
	if stdout, stderr, code := runMain(t, "", "provision", "--nats", url); code != 0 || !strings.Contains(stdout, "provisioned 7 streams, 5 consumers") {
		t.Fatalf("toolbus provision: exit %d, %q %q", code, stdout, stderr)
	}
	// A server that cannot start, probed often: healthd judges it down, and a call to
	// it fails, as does a call to a tool nobody offers.
	cfgPath := filepath.Join(t.TempDir(), "toolbus.json")
	if err := os.WriteFile(cfgPath, []byte(`{"mcpServers": {"ghost": {"command": "/nonexistent/ghost-server", "probeTimeout": "1s"}},
		"health": {"interval": "300ms"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	// Hold the executor's default port, as a fourth program on the host might.
	if l, err := net.Listen("tcp", ":8082"); err == nil {
		t.Cleanup(func() { l.Close() })
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	logs := make([]*bustest.LogBuffer, 0, 6)
	codes := make(chan string, 6)
	for _, name := range []string{"parser", "formatter", "healthd", "executor", "executor", "executor"} {
		out := &bustest.LogBuffer{}
		logs = append(logs, out)
		wg.Go(func() {
			env := Env{Stdin: strings.NewReader(""), Stdout: out, Stderr: out, Getenv: func(string) string { return "" }}
			if code := Service(ctx, name, []string{"--nats", url, "--config", cfgPath}, env); code != 0 {
				codes <- name + ": " + out.String()
			}
		})
	}
	t.Cleanup(func() { cancel(); wg.Wait() })

	nc, _ := bustest.Connect(t, url)
	c, err := client.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	actx, acancel := context.WithTimeout(ctx, time.Minute)
	defer acancel()
	done := make(chan error, 1)
	go func() {
		out, err := c.Ask(actx, "one-host", `<tool_call>{"name": "clock", "arguments": {}}</tool_call>`, nil)
		if err == nil && (len(out.Results) != 1 || !out.Results[0].Success) {
			err = errorString("output " + out.Text)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case failed := <-codes:
		t.Fatalf("a service exited: %s", failed)
	}

	// A failed call: the parser's verdict on a tool nobody offers, and a call to the
	// server that cannot start.
	for _, text := range []string{`<tool_call>{"name": "no_such_tool", "arguments": {}}</tool_call>`,
		`<tool_call>{"name": "ghost::anything", "arguments": {}}</tool_call>`} {
		out, err := c.Ask(actx, "one-host", text, nil)
		if err != nil || len(out.Results) != 1 || out.Results[0].Success {
			t.Fatalf("%s: %v %+v", text, err, out)
		}
	}
	// Every line of every service is JSON with each key once; a failed call is a
	// warning with its code and reason; healthd warns that the server went down.
	var failed, down bool
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline) && !(failed && down); time.Sleep(200 * time.Millisecond) {
		failed, down = false, false
		for i, l := range logs {
			for _, line := range strings.Split(strings.TrimSpace(l.String()), "\n") {
				keys, err := telemetrytest.StrictKeys([]byte(line))
				if err != nil {
					t.Fatalf("service %d: a line a strict JSON reader refuses (%v):\n%s", i, err, line)
				}
				switch {
				case keys["msg"] == "call" && keys["level"] == "WARN" && keys["outcome"] != "" && keys["reason"] != "":
					failed = true
				case keys["msg"] == "health: state changed" && keys["level"] == "WARN" && keys["server"] == "ghost" && keys["to"] == "down":
					down = true
				}
			}
		}
	}
	if !failed || !down {
		t.Errorf("a failed call logged as a warning with its reason: %v; ghost's state change to down a warning: %v", failed, down)
	}

	// An explicit address that is taken is an error naming the flag.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var out bustest.LogBuffer
	env := Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &out, Getenv: func(string) string { return "" }}
	if code := Service(ctx, "parser", []string{"--nats", url, "--ops-addr", l.Addr().String()}, env); code == 0 || !strings.Contains(out.String(), "--ops-addr") {
		t.Errorf("a taken --ops-addr: exit %d, output %q; want an error naming the flag", code, out.String())
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }
