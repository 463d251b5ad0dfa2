package messages

import (
	"strings"
	"testing"
)

// A conversation is one subject token, or a tenant's "<tenant>.<token>": the tenant is
// then the first token of every pipeline subject, and nothing else may be.
func TestConversations(t *testing.T) {
	for id, tenant := range map[string]string{"c1": "", "conv-7_x=": "", "acme.c1": "acme", "acme-2.c_1": "acme-2"} {
		if err := ValidateConversation(id); err != nil {
			t.Errorf("%q: %v", id, err)
		}
		if got := Tenant(id); got != tenant {
			t.Errorf("Tenant(%q) = %q, want %q", id, got, tenant)
		}
		if got := ConversationFromSubject(OutputSubject(id)); got != id {
			t.Errorf("the conversation of %s is %q", OutputSubject(id), got)
		}
	}
	for _, id := range []string{"", "a.b.c", ".c1", "acme.", "Acme.c1", "1acme.c1", "acme.c*", "acme.>", "a b", "parser.c1",
		"executor.c1", strings.Repeat("a", MaxTenantLen+1) + ".c1", strings.Repeat("c", MaxConversationLen+1)} {
		if err := ValidateConversation(id); err == nil {
			t.Errorf("%q is accepted", id)
		}
	}
}

// The subjects of a tenant are exactly those of its conversations; the default tenant's
// pattern takes no tenant's conversation.
func TestTenantSubjects(t *testing.T) {
	for _, tc := range []struct {
		tenant, pattern string
		in, out         []string
	}{
		{"", "toolbus.output.*", []string{"toolbus.output.c1"}, []string{"toolbus.output.acme.c1"}},
		{"acme", "toolbus.output.acme.*", []string{"toolbus.output.acme.c1"}, []string{"toolbus.output.c1", "toolbus.output.globex.c1", "toolbus.output.acme"}},
	} {
		if got := TenantSubjects(OutputSubject, tc.tenant); got != tc.pattern {
			t.Errorf("tenant %q: %s, want %s", tc.tenant, got, tc.pattern)
		}
		for _, s := range tc.in {
			if !match(tc.pattern, s) {
				t.Errorf("%s does not take %s", tc.pattern, s)
			}
		}
		for _, s := range tc.out {
			if match(tc.pattern, s) {
				t.Errorf("%s takes %s", tc.pattern, s)
			}
		}
	}
	if OutputStream("") != StreamOutput || ResultsBucket("") != BucketResults || OutputStream("acme") != "TOOLBUS_OUTPUT_acme" || ResultsBucket("acme") != "toolbus_results_acme" {
		t.Error("the streams and buckets of the default tenant and of acme")
	}
	if InboxPrefix("") != "_INBOX" || InboxPrefix("acme") != "_INBOX.acme" {
		t.Error("inbox prefixes")
	}
}

// match reports whether a NATS subject pattern (with * and >) matches a literal subject.
func match(pattern, subject string) bool {
	p, s := strings.Split(pattern, "."), strings.Split(subject, ".")
	for i, tok := range p {
		if tok == ">" {
			return len(s) > i
		}
		if i >= len(s) || tok != "*" && tok != s[i] {
			return false
		}
	}
	return len(p) == len(s)
}
