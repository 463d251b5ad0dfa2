package toolbus_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/messages"
)

// A response cut off inside a value of a call's arguments (the model hit its token
// limit) is answered parse_error in every format and the tool never runs; a call that
// lacks only its closers after complete values still runs.
func TestCutOffCallsAreNotRun(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	local := localtools.New()
	local.Add(localtools.Tool{
		Info: messages.ToolInfo{Name: "create_ticket", InputSchema: json.RawMessage(`{"type": "object", "properties": {"issue_summary": {"type": "string"}, "priority": {"type": "integer"}}}`)},
		Run: func(context.Context, json.RawMessage) (json.RawMessage, error) {
			runs.Add(1)
			return json.RawMessage(`{"ticket": "T-1"}`), nil
		},
	})
	p := startMCPPipeline(t, nil, local)
	tests := []struct {
		name, text string
		cut        bool
	}{
		{"tool_call, inside a string", `<tool_call>{"name": "create_ticket", "arguments": {"issue_summary": "Login fails after the pass`, true},
		{"tool_call, inside a number", `<tool_call>{"name": "create_ticket", "arguments": {"issue_summary": "Login", "priority": 1`, true},
		{"tool_call, after a key", `<tool_call>{"name": "create_ticket", "arguments": {"issue_summary": "Login", "priority":`, true},
		{"qwen3-coder xml", "<tool_call>\n<function=create_ticket>\n<parameter=issue_summary>\nLogin fails after the pass", true},
		{"mistral", `[TOOL_CALLS][{"name": "create_ticket", "arguments": {"issue_summary": "Login fails after the pass`, true},
		{"llama json", `<|python_tag|>{"name": "create_ticket", "parameters": {"issue_summary": "Login fails after the pass`, true},
		{"pythonic", `<|python_start|>[create_ticket(issue_summary="Login fails after the pass`, true},
		{"missing closers only", `<tool_call>{"name": "create_ticket", "arguments": {"issue_summary": "Login fails"`, false},
		{"missing closing tag only", `<tool_call>{"name": "create_ticket", "arguments": {"issue_summary": "Login fails"}}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := runs.Load()
			out := p.askText(tt.text)
			if len(out.Results) != 1 {
				t.Fatalf("%d results: %+v", len(out.Results), out)
			}
			r := out.Results[0]
			ran := runs.Load() - before
			if tt.cut {
				if r.Success || r.Error == nil || r.Error.Code != messages.CodeParseError || ran != 0 {
					t.Errorf("cut-off call: success %v, error %+v, the tool ran %d times; want parse_error and no run", r.Success, r.Error, ran)
				}
				return
			}
			if !r.Success || ran != 1 {
				t.Errorf("complete call: success %v, error %+v, the tool ran %d times; want it run once", r.Success, r.Error, ran)
			}
		})
	}
}

// Over max_calls, the calls up to the limit run and each further call is answered with
// an error saying so; none of them runs.
func TestCallsOverTheLimit(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	local := localtools.New()
	local.Add(localtools.Tool{Info: messages.ToolInfo{Name: "count", ReadOnly: true},
		Run: func(context.Context, json.RawMessage) (json.RawMessage, error) { return json.Marshal(runs.Add(1)) }})
	p := startMCPPipeline(t, nil, local)
	const limit, calls = 64, 66 // the default max_calls
	out := p.askText(strings.Repeat(`<tool_call>{"name": "count", "arguments": {}}</tool_call>`, calls))
	if len(out.Results) != calls {
		t.Fatalf("%d results, want one per call (%d)", len(out.Results), calls)
	}
	for i, r := range out.Results {
		if i < limit && !r.Success {
			t.Errorf("call %d: %+v", i, r.Error)
		}
		if i >= limit && (r.Success || r.Error == nil || !strings.Contains(r.Error.Message, "limit")) {
			t.Errorf("call %d beyond the limit: success %v, %+v", i, r.Success, r.Error)
		}
	}
	if n := runs.Load(); n != limit {
		t.Errorf("the tool ran %d times, want %d", n, limit)
	}
}

// A call's timeout is its budget from the first attempt to the answer: an 8 s read-only
// tool with a 2 s budget is answered timeout after the one attempt that fits, and a tool
// that keeps failing transiently is tried only while its budget lasts, across
// deliveries.
func TestTimeoutIsTheCallsBudget(t *testing.T) {
	t.Parallel()
	var slow, flaky atomic.Int32
	local := localtools.New()
	local.Add(localtools.Tool{Info: messages.ToolInfo{Name: "slow_report", ReadOnly: true},
		Run: func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
			slow.Add(1)
			select {
			case <-time.After(8 * time.Second):
				return json.RawMessage(`"done"`), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}})
	local.Add(localtools.Tool{Info: messages.ToolInfo{Name: "flaky_lookup", ReadOnly: true},
		Run: func(context.Context, json.RawMessage) (json.RawMessage, error) {
			flaky.Add(1)
			return nil, &messages.ToolError{Code: messages.CodeServerUnavailable, Message: "connection refused", Unsent: true}
		}})
	p := startMCPPipeline(t, mcpConfig(t, `{"executor": {"timeout": "2s"}}`), local)
	out := p.askText(`<tool_call>{"name": "slow_report", "arguments": {}}</tool_call>`)
	if r := out.Results[0]; r.Success || r.Error.Code != messages.CodeTimeout || slow.Load() != 1 {
		t.Errorf("slow tool: %+v, attempts seen by the tool %d; want timeout after one attempt", r.Error, slow.Load())
	}

	r := p.askText(`<tool_call>{"name": "flaky_lookup", "arguments": {}}</tool_call>`).Results[0]
	if r.Success || (r.Error.Code != messages.CodeTimeout && r.Error.Code != messages.CodeServerUnavailable) {
		t.Errorf("flaky tool: %+v", r.Error)
	}
	// The redelivery delay (2 s) is as long as the budget: the first delivery's attempts
	// are all the call gets; a second delivery finds the budget spent and tries nothing.
	if n := flaky.Load(); int(n) != r.Attempts || n > 3 {
		t.Errorf("the tool saw %d attempts, the result says %d; want the first delivery's (at most 3)", n, r.Attempts)
	}
}

// Results of 600 KB and 3 MB (and 20 MB with TOOLBUS_LONG) from a tools-folder tool, of
// 600 KB, 3 MB and 20 MB from the npm filesystem server (over go-sdk's frame limit),
// alone, and 64 of 100 KB in one response: every response is answered within the
// payload limit, each tool runs once, and the whole of each result is kept, fetched back
// and checked by sha256.
func TestLargeResultsAreKeptWhole(t *testing.T) {
	t.Parallel() // waits mostly (processes starting, acks timing out): beside another test
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	tool := filepath.Join(dir, "tools", "big_report")
	if err := os.MkdirAll(filepath.Dir(tool), 0o755); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\necho run >> " + runs + "\nhead -c \"$(sed 's/[^0-9]//g')\" /dev/zero | tr '\\0' x | sed 's/^/\"/; s/$/\"/'\n"
	if err := os.WriteFile(tool, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tool+".mcp.json", []byte(`{"name": "big_report", "inputSchema": {"type": "object", "properties": {"bytes": {"type": "integer"}}}, "annotations": {"readOnlyHint": true}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	files := t.TempDir()
	// Budgets that bound a hang, not a speed: 20 MB through node under the race detector,
	// beside another test, takes over a minute on a busy machine.
	cfg := mcpConfig(t, `{"local": {"tools": {"folder": "`+filepath.Dir(tool)+`", "timeout": "5m", "max_output_bytes": 32000000}},
		"mcpServers": {"fs": {"command": "node", "args": ["`+mcpNPMScript(t, mcpFilesystemPkg)+`", "`+files+`"], "timeout": "5m"}}}`)
	p := startMCPPipeline(t, cfg, nil)
	report := func(n int) string {
		return fmt.Sprintf(`<tool_call>{"name": "big_report", "arguments": {"bytes": %d}}</tool_call>`, n)
	}
	file := func(n int) string {
		path := filepath.Join(files, fmt.Sprintf("f%d.txt", n))
		if err := os.WriteFile(path, bytes.Repeat([]byte("0123456789"), n/10), 0o644); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf(`<tool_call>{"name": "read_text_file", "arguments": {"path": %q}}</tool_call>`, path)
	}
	// whole checks a fetched result: the tool's x's, or the file's digits.
	whole := func(b []byte, n int) bool {
		if bytes.HasPrefix(b, []byte(`"x`)) {
			return len(b) == n+2 && bytes.Count(b, []byte("x")) == n
		}
		return bytes.Contains(b, bytes.Repeat([]byte("0123456789"), n/10))
	}
	many := strings.Repeat(report(100_000), 64)
	for _, tt := range []struct {
		name  string
		text  string
		sizes []int // what each result holds
		runs  int   // runs of big_report
	}{
		{"tool 600 KB", report(600_000), []int{600_000}, 1},
		{"tool 3 MB", report(3_000_000), []int{3_000_000}, 1},
		{"tool 20 MB", report(20_000_000), []int{20_000_000}, 1},
		{"filesystem 600 KB", file(600_000), []int{600_000}, 0},
		{"filesystem 3 MB", file(3_000_000), []int{3_000_000}, 0},
		// read_text_file's answer holds the text twice (content and structuredContent):
		// a 40 MB message, over go-sdk's default frame limit (16 MiB) and within
		// toolbus's (mcpwire.DefaultMaxMessageBytes).
		{"filesystem 20 MB", file(20_000_000), []int{20_000_000}, 0},
		{"64 of 100 KB", many, slices.Repeat([]int{100_000}, 64), 64},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "tool 20 MB" && !long() {
				t.Skip("TOOLBUS_LONG: the tool's 3 MB result takes the same path, and the filesystem server's 20 MB the frames over 16 MiB")
			}
			os.Remove(runs)
			ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
			defer cancel()
			id, err := p.client.Submit(ctx, "large", tt.text, nil)
			if err != nil {
				t.Fatal(err)
			}
			out, err := p.client.Wait(ctx, "large", id)
			if err != nil {
				t.Fatal(err)
			}
			if len(out.Results) != len(tt.sizes) {
				t.Fatalf("%d results: %.300s", len(out.Results), out.Text)
			}
			if len(out.Text) > 1<<20 {
				t.Errorf("the output's text is %d bytes, over the payload limit", len(out.Text))
			}
			for i, r := range out.Results {
				if !r.Success || r.Stored == nil {
					t.Fatalf("result %d: success %v, error %+v, stored %+v; want a success kept whole", i, r.Success, r.Error, r.Stored)
				}
				var preview struct {
					Truncated bool   `json:"truncated"`
					Size      int    `json:"size"`
					SHA256    string `json:"sha256"`
				}
				if err := json.Unmarshal(r.Result, &preview); err != nil || !preview.Truncated || preview.Size != r.Stored.Size || preview.SHA256 != r.Stored.SHA256 {
					t.Errorf("result %d: preview %+v (%v), stored %+v", i, preview, err, r.Stored)
				}
				b, err := p.client.FetchResult(ctx, r.Stored)
				if err != nil {
					t.Fatalf("result %d: %v", i, err)
				}
				if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != r.Stored.SHA256 || !whole(b, tt.sizes[i]) {
					t.Errorf("result %d: fetched %d bytes that are not the whole result", i, len(b))
				}
			}
			data, _ := os.ReadFile(runs)
			if n := strings.Count(string(data), "run"); n != tt.runs {
				t.Errorf("the tool ran %d times, want %d", n, tt.runs)
			}
		})
	}
}
