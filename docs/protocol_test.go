package docs

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/toolbus/toolbus/internal/asyncapitest"
	"github.com/toolbus/toolbus/pkg/messages"
)

// section is the part of page from the heading title to the next heading of its level
// or higher.
func section(t *testing.T, page, title string) string {
	t.Helper()
	level := strings.Count(strings.Fields(title)[0], "#")
	i := strings.Index(page, "\n"+title+"\n")
	if i < 0 {
		t.Fatalf("protocol.md has no heading %q", title)
	}
	rest := page[i+len(title)+2:]
	for _, l := range strings.Split(rest, "\n") {
		if h := strings.Fields(l); len(h) > 0 && strings.Trim(h[0], "#") == "" && len(h[0]) <= level && strings.HasPrefix(l, "#") {
			return rest[:strings.Index(rest, "\n"+l)]
		}
	}
	return rest
}

// docs/protocol.md names what pkg/messages defines: every error code, in its table, with
// whether it is final as ErrorCode.Retryable says, and no code pkg/messages lacks; every
// header; every field of the progress body; every subject an orchestrator touches, and the
// stream and bucket names it reads.
func TestProtocolPage(t *testing.T) {
	b, err := os.ReadFile("protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)

	codes := asyncapitest.ErrorCodes(t)
	if len(codes) < 11 {
		t.Fatalf("found the error codes %v in pkg/messages: the source reader misses some", codes)
	}
	row := regexp.MustCompile("^\\| `([^`]+)` \\| (yes|no) \\| (.+) \\|$")
	onPage := map[string]bool{}
	for _, l := range strings.Split(section(t, page, "## Error codes"), "\n") {
		m := row.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		code := messages.ErrorCode(m[1])
		if !slices.ContainsFunc(codes, func(c asyncapitest.Const) bool { return c.Value == m[1] }) {
			t.Errorf("protocol.md lists the error code %q, which pkg/messages does not define", m[1])
			continue
		}
		onPage[m[1]] = true
		if final := m[2] == "yes"; final == code.Retryable() {
			t.Errorf("protocol.md says %s is final: %s; ErrorCode.Retryable says %v", m[1], m[2], code.Retryable())
		}
	}
	for _, c := range codes {
		if !onPage[c.Value] {
			t.Errorf("messages.%s (%q) is not in protocol.md's table of error codes", c.Name, c.Value)
		}
	}

	for _, h := range asyncapitest.Headers(t) {
		if !strings.Contains(section(t, page, "## Headers"), "| `"+h.Value+"` |") {
			t.Errorf("messages.%s (%q) has no row in protocol.md's table of headers", h.Name, h.Value)
		}
	}

	progress := section(t, page, "### Progress")
	for _, f := range asyncapitest.Load(t).Properties("ToolResult") {
		if !strings.Contains(progress, "`"+f+"`") {
			t.Errorf("the progress body's field %q is not in protocol.md's section Progress", f)
		}
	}

	subjects := section(t, page, "## Subjects")
	for _, s := range []string{
		messages.ResponseSubject("<conv>"), messages.StreamSubject("<conv>"), messages.OutputSubject("<conv>"),
		messages.ProgressSubject("<conv>"), messages.ElicitSubject("<conv>"), messages.AnswerSubject("<conv>", "<id>"),
		messages.CallSubject("<conv>"), messages.ResultSubject("<conv>"), messages.HealthSubject("<server>"),
		messages.ProbeSubject("<server>"), messages.ExecSubject("<executor>"), messages.StatusSubject("<service>"),
		strings.Replace(messages.DeadSubject("c"), ".c", ".<conv>", 1), strings.Replace(messages.TenantRejectedSubject("t"), ".t", ".<tenant>", 1),
	} {
		if !strings.Contains(subjects, "| `"+s+"` |") {
			t.Errorf("protocol.md's table of subjects has no row for %s", s)
		}
	}
	for _, name := range []string{messages.StreamOutput, messages.StreamResponses, messages.StreamChunks, messages.StreamDead,
		messages.BucketResults, messages.BucketHealth, messages.TenantRejectedSubject("")} {
		if !strings.Contains(page, "`"+name) {
			t.Errorf("protocol.md does not name %s", name)
		}
	}
}
