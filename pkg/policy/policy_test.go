package policy_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/policy"
)

func TestCompileErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rules   []policy.Rule
		wantErr string
	}{
		{name: "syntax", rules: []policy.Rule{{Name: "a", Effect: policy.Allow}, {Name: "bad", When: "args.x ==", Effect: policy.Deny}},
			wantErr: `rules[1] ("bad"): when: <input>:1:10: Syntax error`},
		{name: "undeclared", rules: []policy.Rule{{Name: "u", When: "argz.x == 1", Effect: policy.Deny}},
			wantErr: `rules[0] ("u"): when: <input>:1:1: undeclared reference to 'argz'`},
		{name: "not a bool", rules: []policy.Rule{{Name: "s", When: "tool + 'x'", Effect: policy.Deny}},
			wantErr: `the condition is a string, not a bool`},
		{name: "type mismatch", rules: []policy.Rule{{Name: "m", When: "tool == 1", Effect: policy.Deny}},
			wantErr: `rules[0] ("m"): when: <input>:1:6: found no matching overload for '_==_'`},
		{name: "approve", rules: []policy.Rule{{Name: "ask", Effect: policy.Approve, Timeout: messages.Duration(time.Minute)}}},
		{name: "approve timeout", rules: []policy.Rule{{Name: "ask", Effect: policy.Approve, Timeout: messages.Duration(48 * time.Hour)}}, wantErr: `timeout must be more than 0 and at most 24h0m0s`},
		{name: "timeout of deny", rules: []policy.Rule{{Name: "no", Effect: policy.Deny, Timeout: messages.Duration(time.Minute)}}, wantErr: `timeout is for a rule with effect "approve"`},
		{name: "unknown effect", rules: []policy.Rule{{Name: "x", Effect: "maybe"}}, wantErr: `effect "maybe"`},
		{name: "no name", rules: []policy.Rule{{Effect: policy.Deny}}, wantErr: `rules[0]: a rule needs a name`},
		{name: "same name", rules: []policy.Rule{{Name: "x", Effect: policy.Deny}, {Name: "x", Effect: policy.Allow}}, wantErr: `another rule has that name`},
		{name: "bad pattern", rules: []policy.Rule{{Name: "x", Tools: []string{"a["}, Effect: policy.Deny}}, wantErr: `"a[" is not a valid pattern`},
		{name: "valid", rules: []policy.Rule{{Name: "x", Tools: []string{"file_*"}, When: "args.file_path.startsWith('/etc') && now > timestamp('2020-01-01T00:00:00Z')", Effect: policy.Deny}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := policy.Compile(tc.rules)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, policy.ErrInvalid) {
				t.Fatalf("got %v, want one with %q", err, tc.wantErr)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	p, err := policy.Compile([]policy.Rule{
		{Name: "no-etc", Tools: []string{"file_writer"}, When: "args.file_path.startsWith('/etc')", Effect: policy.Deny},
		{Name: "docs-ok", Tools: []string{"docs__*"}, When: "args.page < 10", Effect: policy.Allow},
		{Name: "no-docs", Tools: []string{"docs__*"}, Effect: policy.Deny},
		{Name: "acme-no-shell", When: "tenant == 'acme' && tool == 'shell__run'", Effect: policy.Deny},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		call     policy.Call
		want     policy.Effect
		rule     string
		evalFail bool
	}{
		{name: "denied", call: policy.Call{Tool: "file_writer", Args: []byte(`{"file_path":"/etc/passwd"}`)}, want: policy.Deny, rule: "no-etc"},
		{name: "elsewhere", call: policy.Call{Tool: "file_writer", Args: []byte(`{"file_path":"/tmp/x"}`)}, want: policy.Allow},
		// A deny rule whose condition cannot be evaluated denies: fail closed.
		{name: "deny fails closed", call: policy.Call{Tool: "file_writer", Args: []byte(`{"path":"/etc/x"}`)}, want: policy.Deny, rule: "no-etc", evalFail: true},
		{name: "no arguments", call: policy.Call{Tool: "file_writer"}, want: policy.Deny, rule: "no-etc", evalFail: true},
		{name: "first match wins", call: policy.Call{Tool: "docs__read", Server: "docs", Name: "read", Args: []byte(`{"page":3}`)}, want: policy.Allow, rule: "docs-ok"},
		// An allow rule whose condition cannot be evaluated does not match: the next decides.
		{name: "allow not matched", call: policy.Call{Tool: "docs__read", Server: "docs", Name: "read", Args: []byte(`{}`)}, want: policy.Deny, rule: "no-docs"},
		{name: "by tenant", call: policy.Call{Tool: "shell__run", Server: "shell", Name: "run", Tenant: "acme"}, want: policy.Deny, rule: "acme-no-shell"},
		{name: "other tenant", call: policy.Call{Tool: "shell__run", Server: "shell", Name: "run", Tenant: "globex"}, want: policy.Allow},
		{name: "other tool", call: policy.Call{Tool: "clock"}, want: policy.Allow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := p.Decide(tc.call)
			if d.Effect != tc.want || d.Rule != tc.rule || (d.Failed != nil) != tc.evalFail {
				t.Fatalf("got %+v (%s), want %s by %q (evaluation failed: %v)", d, d.Reason(), tc.want, tc.rule, tc.evalFail)
			}
		})
	}
}

func TestRevision(t *testing.T) {
	rules := []policy.Rule{{Name: "a", When: "true", Effect: policy.Deny}}
	a, _ := policy.Compile(rules)
	b, _ := policy.Compile(rules)
	c, _ := policy.Compile([]policy.Rule{{Name: "a", When: "false", Effect: policy.Deny}})
	if a.Revision() == "" || a.Revision() != b.Revision() || a.Revision() == c.Revision() {
		t.Fatalf("revisions %q %q %q", a.Revision(), b.Revision(), c.Revision())
	}
	var none *policy.Policy
	if none.Revision() != "" || none.Decide(policy.Call{Tool: "x"}).Effect != policy.Allow {
		t.Fatal("no policy must allow")
	}
}

// A tool is left out of what a tenant's model is offered only when the rules deny
// every call of it there, whatever the call's arguments, conversation or time.
func TestOffers(t *testing.T) {
	p, err := policy.Compile([]policy.Rule{
		{Name: "no-shell", Tools: []string{"shell__*"}, Effect: policy.Deny},
		{Name: "acme-no-github", Tools: []string{"github__*"}, When: "tenant == 'acme'", Effect: policy.Deny},
		{Name: "etc", Tools: []string{"file_writer"}, When: "args.file_path.startsWith('/etc')", Effect: policy.Deny},
		{Name: "globex-docs", Tools: []string{"docs__*"}, When: "tenant == 'globex'", Effect: policy.Allow},
		{Name: "docs-nobody-else", Tools: []string{"docs__*"}, Effect: policy.Deny},
		{Name: "night", Tools: []string{"deploy"}, When: "tenant == 'acme' && now.getHours() < 6", Effect: policy.Deny},
		{Name: "ask", Tools: []string{"transfer"}, Effect: policy.Approve},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tool, server, name, tenant string
		want                       bool
	}{
		{"shell__run", "shell", "run", "", false},
		{"shell__run", "shell", "run", "acme", false},
		{"github__issues", "github", "issues", "acme", false},
		{"github__issues", "github", "issues", "globex", true},
		{"file_writer", "", "", "acme", true}, // some of its calls are allowed
		{"docs__read", "docs", "read", "globex", true},
		{"docs__read", "docs", "read", "acme", false},
		{"deploy", "", "", "acme", true}, // depends on the time
		{"deploy", "", "", "globex", true},
		{"transfer", "", "", "", true}, // a person may approve it
		{"clock", "", "", "acme", true},
	} {
		if got := p.Offers(tc.tool, tc.server, tc.name, tc.tenant); got != tc.want {
			t.Errorf("Offers(%s, tenant %q) = %v, want %v", tc.tool, tc.tenant, got, tc.want)
		}
	}
	if !(*policy.Policy)(nil).Offers("x", "", "", "") {
		t.Error("no policy hides a tool")
	}
}
