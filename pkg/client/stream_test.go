package client

import (
	"strings"
	"testing"
)

func TestSplitTokens(t *testing.T) {
	for _, text := range []string{
		"",
		`<tool_call>{"name": "clock", "arguments": {}}</tool_call>`,
		"Sure, the weather in Zürich:\n\t café  ok",
	} {
		tokens := SplitTokens(text)
		if got := strings.Join(tokens, ""); got != text {
			t.Errorf("SplitTokens(%q) joins to %q", text, got)
		}
		for _, tok := range tokens {
			if tok == "" {
				t.Errorf("SplitTokens(%q): an empty token", text)
			}
		}
	}
	if got := SplitTokens(`{"name": "clock"}`); len(got) != 9 {
		t.Errorf("SplitTokens: %q, want 9 tokens", got)
	}
}
