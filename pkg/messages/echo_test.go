package messages

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCut(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		max      int
		want     string
		wantLen  int // when want is not given: the length of what Cut returns
		wantHead string
	}{
		{name: "within", in: "clock", max: 256, want: "clock"},
		{name: "exactly", in: strings.Repeat("a", 256), max: 256, want: strings.Repeat("a", 256)},
		{name: "bytes", in: strings.Repeat("a", 300), max: 256, wantLen: 256, wantHead: "aaaa"},
		{name: "kilobytes", in: strings.Repeat("x", 490<<10), max: 256, wantLen: 256, wantHead: "xxxx"},
		{name: "marker does not fit", in: strings.Repeat("a", 300), max: 4, want: "aaaa"},
		{name: "at a rune boundary", in: strings.Repeat("é", 200), max: 101, wantHead: "éé"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Cut(tt.in, tt.max)
			if tt.want != "" && got != tt.want {
				t.Fatalf("Cut = %q, want %q", got, tt.want)
			}
			if len(got) > tt.max || !utf8.ValidString(got) || !strings.HasPrefix(got, tt.wantHead) {
				t.Fatalf("Cut = %q (%d bytes), want at most %d, valid UTF-8, starting %q", got, len(got), tt.max, tt.wantHead)
			}
			if tt.wantLen != 0 && len(got) != tt.wantLen {
				t.Errorf("Cut is %d bytes, want %d", len(got), tt.wantLen)
			}
			if Cut(got, tt.max) != got {
				t.Errorf("cutting again changed %q", got)
			}
		})
	}
	if got := EchoName(strings.Repeat("x", 490<<10)); !strings.HasSuffix(got, "…(490 KB cut)") || len(got) != MaxEchoedName {
		t.Errorf("EchoName = %q", got)
	}
}

func TestCutMiddleKeepsBothEnds(t *testing.T) {
	msg := `argument "city": pattern: "` + strings.Repeat("x", 100<<10) + `" does not match "^[A-Z][a-z]+$"`
	got := EchoError(msg)
	if len(got) > MaxEchoedError || !strings.HasPrefix(got, `argument "city": pattern: "xxx`) ||
		!strings.HasSuffix(got, `xxx" does not match "^[A-Z][a-z]+$"`) || !strings.Contains(got, "xxx…(96 KB cut)xxx") {
		t.Errorf("EchoError = %.80q … %q (%d bytes)", got, got[len(got)-80:], len(got))
	}
	if EchoError(got) != got {
		t.Error("cutting again changed it")
	}
	if got := CutMiddle(strings.Repeat("ü", 5000), 1001); len(got) > 1001 || !utf8.ValidString(got) {
		t.Errorf("CutMiddle = %d bytes, valid UTF-8 %v", len(got), utf8.ValidString(got))
	}
}

// What a result repeats of a call — its tool's name, its error message — stays bounded
// in every shape it travels in: the result, its block, the output.
func TestResultsEchoBounded(t *testing.T) {
	huge := strings.Repeat("x", 490<<10)
	call := ToolCall{ID: "c/r/0", ResponseID: "r", Conversation: "c", Count: 1, Tool: huge}
	res := ResultFor(call).Fail(Errorf(CodeUnknownTool, "there is no tool called %q", huge))
	if len(res.Tool) > MaxEchoedName || len(res.Error.Message) > MaxEchoedError {
		t.Errorf("result: tool of %d bytes, error of %d", len(res.Tool), len(res.Error.Message))
	}
	// A result made elsewhere (a message read back, another version's) is bounded when
	// rendered too.
	raw := ToolResult{Tool: huge, Error: &ResultError{Code: CodeToolError, Message: huge}}
	out := RenderOutput("r", "c", []ToolResult{raw})
	if body := AppendOutput(nil, &out); len(body) > 3*MaxEchoedError {
		t.Errorf("output of %d bytes", len(body))
	}
	if raw.Error.Message != huge {
		t.Error("rendering changed the result it was given")
	}
	capped := CapResult(raw, 1000)
	if len(capped.Error.Message) > 500 || capped.Error.Code != CodeToolError {
		t.Errorf("CapResult: error of %d bytes, code %s", len(capped.Error.Message), capped.Error.Code)
	}
}
