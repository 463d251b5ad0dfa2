package toolbus_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/policy"
	"github.com/toolbus/toolbus/pkg/toolbus"
)

// askResponse submits one response of calls in conversation conv and returns their results.
func askResponse(t *testing.T, c *client.Client, conv string, calls ...mcpCall) []messages.OutputResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a bound on a hang
	defer cancel()
	var text strings.Builder
	for _, call := range calls {
		b, _ := json.Marshal(call)
		text.WriteString("<tool_call>" + string(b) + "</tool_call>\n")
	}
	out, err := c.Ask(ctx, conv, text.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Results) != len(calls) {
		t.Fatalf("%d results for %d calls: %s", len(out.Results), len(calls), out.Text)
	}
	return out.Results
}

// A deny rule on file_writer with a path under /etc refuses that call, naming the rule
// and its condition, and the other calls of the same response run.
func TestPolicyDenyRule(t *testing.T) {
	t.Parallel()
	local := localToolsConfig(t)
	cfg := mcpConfig(t, `{"policy": {"rules": [
		{"name": "no-etc", "tools": ["file_writer"], "when": "args.file_path.startsWith('/etc')", "effect": "deny"}
	]}, `+local+`}`)
	_, c := startWithLists(t, cfg, nil)
	res := askResponse(t, c, "policy",
		mcpCall{Name: "file_writer", Arguments: map[string]any{"file_path": "/etc/toolbus-policy-test", "content": "x"}},
		mcpCall{Name: "clock"},
		mcpCall{Name: "file_writer", Arguments: map[string]any{"file_path": "kept.txt", "content": "y"}})
	refused(t, "under /etc", res[0], `not allowed by the policy: the rule "no-etc" (when args.file_path.startsWith('/etc')) says deny`)
	ran(t, "clock", res[1])
	ran(t, "elsewhere", res[2])
	// Each result says which policy it was answered under.
	rules, err := policy.Compile(cfg.Policy.Rules)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Policy == "" || r.Policy != rules.Revision() {
			t.Errorf("result %d answered under policy %q, want %q", i, r.Policy, rules.Revision())
		}
	}
	if _, err := os.Stat("/etc/toolbus-policy-test"); err == nil {
		t.Error("the denied call ran")
	}
	root := strings.Split(strings.SplitAfter(local, `"root": "`)[1], `"`)[0]
	if b, err := os.ReadFile(filepath.Join(root, "kept.txt")); err != nil || string(b) != "y" {
		t.Errorf("the allowed call did not write: %q %v", b, err)
	}
}

// noteTool is a Go tool whose one argument may be left out.
func noteTool(t *testing.T) *localtools.Registry {
	t.Helper()
	reg := localtools.New()
	type args struct {
		Path string `json:"path,omitempty"`
	}
	if err := localtools.AddFunc(reg, messages.ToolInfo{Name: "note"}, func(_ context.Context, a args) (string, error) { return "noted " + a.Path, nil }); err != nil {
		t.Fatal(err)
	}
	return reg
}

// A rule whose condition cannot be evaluated for a call (it reads an argument the call
// left out) does not match, except a deny rule, which denies: it fails closed.
func TestPolicyConditionNotEvaluated(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, rules, refusal string
	}{
		{name: "deny fails closed", rules: `{"name": "no-etc", "tools": ["note"], "when": "args.path.startsWith('/etc')", "effect": "deny"}`,
			refusal: `the rule "no-etc" (when args.path.startsWith('/etc')) could not be evaluated for this call (no such key: path), and a deny rule refuses what it cannot judge`},
		{name: "allow does not match", rules: `{"name": "tmp-ok", "tools": ["note"], "when": "args.path.startsWith('/tmp')", "effect": "allow"},
			{"name": "notes-otherwise", "tools": ["note"], "effect": "deny"}`,
			refusal: `the rule "notes-otherwise" says deny`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, c := startWithLists(t, mcpConfig(t, `{"policy": {"rules": [`+tc.rules+`]}}`), noteTool(t))
			res := askResponse(t, c, "policy2", mcpCall{Name: "note", Arguments: map[string]any{}}, mcpCall{Name: "note", Arguments: map[string]any{"path": "/tmp/a"}})
			refused(t, "no path", res[0], tc.refusal)
			if tc.name == "allow does not match" {
				ran(t, "path given", res[1])
			}
		})
	}
}

// A limit of 5 calls a minute per tenant holds across two executors on one NATS: of six
// calls run at once, spread over both, one is answered rate_limited with when to try
// again, and a later call too.
func TestLimitAcrossExecutors(t *testing.T) {
	t.Parallel()
	reg := localtools.New()
	if err := localtools.AddFunc(reg, messages.ToolInfo{Name: "lookup", ReadOnly: true},
		func(context.Context, struct{}) (string, error) {
			time.Sleep(20 * time.Millisecond)
			return "found", nil
		}); err != nil {
		t.Fatal(err)
	}
	cfg := mcpConfig(t, `{"limits": [{"name": "five-a-minute", "per": "tenant", "calls": 5, "interval": "1m"}], "executor": {"parallel": "all"}}`)
	connect := startBus(t)
	startEach(t, connect, toolbus.Options{Config: cfg, Tools: reg}, toolbus.Parser, toolbus.Executor, toolbus.Executor, toolbus.Formatter)
	c, err := client.New(connect("orchestrator"))
	if err != nil {
		t.Fatal(err)
	}
	calls := make([]mcpCall, 6)
	for i := range calls {
		calls[i] = mcpCall{Name: "lookup"}
	}
	ok, limited := 0, 0
	for i, r := range askResponse(t, c, "quota", calls...) {
		if r.Policy != "" {
			t.Errorf("call %d answered under policy %q, and there is none", i, r.Policy)
		}
		switch {
		case r.Success:
			ok++
		case r.Error != nil && r.Error.Code == messages.CodeRateLimited:
			limited++
			if !strings.Contains(r.Error.Message, `the limit "five-a-minute" allows 5 calls per 1m0s for each tenant`) || !strings.Contains(r.Error.Message, "try again in ") {
				t.Errorf("call %d: %s", i, r.Error.Message)
			}
		default:
			t.Errorf("call %d: %+v", i, r.Error)
		}
	}
	if ok != 5 || limited != 1 {
		t.Fatalf("%d ran and %d were rate_limited, want 5 and 1", ok, limited)
	}
	if r := askResponse(t, c, "quota-later", mcpCall{Name: "lookup"})[0]; r.Error == nil || r.Error.Code != messages.CodeRateLimited {
		t.Errorf("a seventh call of the tenant: %+v", r)
	}
}

// A limit of 2 calls at once per conversation holds across two executors: while two
// calls of a conversation run, a third is answered rate_limited, saying so; another
// conversation's call runs; once the two have finished, the conversation's next call
// runs — the places were given back.
func TestConcurrentLimitAcrossExecutors(t *testing.T) {
	t.Parallel()
	var running atomic.Int32
	gate := make(chan struct{})
	reg := localtools.New()
	if err := localtools.AddFunc(reg, messages.ToolInfo{Name: "crawl", ReadOnly: true},
		func(ctx context.Context, a struct {
			Wait bool `json:"wait,omitempty"`
		}) (string, error) {
			running.Add(1)
			defer running.Add(-1)
			if a.Wait {
				select {
				case <-gate:
				case <-ctx.Done():
					return "", ctx.Err()
				}
			}
			return "crawled", nil
		}); err != nil {
		t.Fatal(err)
	}
	cfg := mcpConfig(t, `{"limits": [{"name": "two-at-once", "per": "conversation", "tools": ["crawl"], "concurrent": 2}], "executor": {"parallel": "all"}}`)
	connect := startBus(t)
	startEach(t, connect, toolbus.Options{Config: cfg, Tools: reg}, toolbus.Parser, toolbus.Executor, toolbus.Executor, toolbus.Formatter)
	c, err := client.New(connect("orchestrator"))
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan []messages.OutputResult, 1)
	go func() {
		first <- askResponse(t, c, "crawler", mcpCall{Name: "crawl", Arguments: map[string]any{"wait": true}}, mcpCall{Name: "crawl", Arguments: map[string]any{"wait": true}})
	}()
	for deadline := time.Now().Add(time.Minute); running.Load() < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls running, want 2", running.Load())
		}
	}
	r := askResponse(t, c, "crawler", mcpCall{Name: "crawl"})[0]
	if r.Success || r.Error == nil || r.Error.Code != messages.CodeRateLimited ||
		!strings.Contains(r.Error.Message, `the limit "two-at-once" allows 2 calls at once for each conversation, and conversation "crawler" has them running`) {
		t.Errorf("a third call at once: %+v", r)
	}
	ran(t, "another conversation's", askResponse(t, c, "other", mcpCall{Name: "crawl"})[0])
	close(gate)
	for i, r := range <-first {
		ran(t, fmt.Sprint("waiting call ", i), r)
	}
	ran(t, "after the two finished", askResponse(t, c, "crawler", mcpCall{Name: "crawl"})[0])
}

// A tool the policy denies outright for a tenant is not offered there: the parser does
// not know it for that tenant's responses, so a call of it is refused by the policy,
// never answered with the tool's argument errors (which would show its schema); the
// default tenant, for whom it is offered, has its arguments checked as usual.
func TestDeniedToolNotOfferedToTheTenant(t *testing.T) {
	t.Parallel()
	reg := localtools.New()
	type args struct {
		Query string `json:"query"`
	}
	if err := localtools.AddFunc(reg, messages.ToolInfo{Name: "search", ReadOnly: true}, func(_ context.Context, a args) (string, error) { return "found " + a.Query, nil }); err != nil {
		t.Fatal(err)
	}
	cfg := mcpConfig(t, `{"tenants": {"acme": {}}, "policy": {"rules": [
		{"name": "acme-no-search", "tools": ["search"], "when": "tenant == 'acme'", "effect": "deny"}
	]}}`)
	_, c := startWithLists(t, cfg, reg)
	bad := mcpCall{Name: "search", Arguments: map[string]any{"limit": 3}} // no query
	refused(t, "acme's call", askResponse(t, c, "acme.c1", bad)[0], `the rule "acme-no-search" (when tenant == 'acme') says deny`)
	if r := askResponse(t, c, "c1", bad)[0]; r.Error == nil || r.Error.Code != messages.CodeInvalidArguments {
		t.Errorf("the default tenant's call with a wrong argument: %+v", r.Error)
	}
	ran(t, "the default tenant's", askResponse(t, c, "c1", mcpCall{Name: "search", Arguments: map[string]any{"query": "x"}})[0])
}
