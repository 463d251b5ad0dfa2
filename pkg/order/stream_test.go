package order

import (
	"slices"
	"strings"
	"testing"

	"github.com/toolbus/toolbus/pkg/messages"
)

func streamCalls(tools ...string) ([]messages.ToolCall, []bool) {
	var calls []messages.ToolCall
	var together []bool
	for i, t := range tools {
		name, ro := strings.CutSuffix(t, "?") // "x?": read-only
		calls = append(calls, messages.ToolCall{ID: "r/" + string(rune('0'+i)), Index: i, Tool: name, Count: 9, Next: 4})
		together = append(together, ro)
	}
	return calls, together
}

func tools(calls []messages.ToolCall) []string {
	var names []string
	for _, c := range calls {
		names = append(names, c.Tool)
	}
	return names
}

// The segments' rule as calls arrive: reads at the start run as written; a write waits
// for every call before it; reads after a write wait for it; each call is released
// once, and a redelivered message releases the same calls again.
func TestStreamedRelease(t *testing.T) {
	var st Streamed
	calls, together := streamCalls("r1?", "r2?", "w1", "r3?", "r4?")
	st.Add(calls[:2], together[:2])
	rel, changed := st.Release(ByChunk(1))
	if got := tools(rel); !slices.Equal(got, []string{"r1", "r2"}) || !changed {
		t.Fatalf("chunk 1 released %v", got)
	}
	if rel[0].Count != 0 || rel[0].Next != 0 || !rel[0].Stream {
		t.Errorf("a released call keeps its count or next: %+v", rel[0])
	}
	st.Add(calls, together)
	if rel, _ := st.Release(ByChunk(2)); len(rel) != 0 {
		t.Fatalf("chunk 2 released %v before r1 and r2 were answered", tools(rel))
	}
	if rel, changed := st.Release(ByChunk(1)); !slices.Equal(tools(rel), []string{"r1", "r2"}) || changed {
		t.Errorf("chunk 1 again: %v, changed %v", tools(rel), changed)
	}
	st.Answer(1, true, "")
	if rel, _ := st.Release(ByResult(1)); len(rel) != 0 {
		t.Fatalf("released %v with r1 unanswered", tools(rel))
	}
	st.Answer(0, true, "")
	if rel, _ := st.Release(ByResult(0)); !slices.Equal(tools(rel), []string{"w1"}) {
		t.Fatalf("after r1 and r2: %v, want w1", tools(rel))
	}
	st.Answer(2, true, "")
	if rel, _ := st.Release(ByResult(2)); !slices.Equal(tools(rel), []string{"r3", "r4"}) {
		t.Fatalf("after w1: %v, want r3 r4", tools(rel))
	}
	if st.Complete() {
		t.Error("complete before the end")
	}
	st.Final = true
	st.Answer(3, true, "")
	st.Answer(4, true, "")
	if !st.Complete() {
		t.Error("not complete")
	}
}

func TestStreamedSkip(t *testing.T) {
	st := Streamed{OnError: Skip}
	calls, together := streamCalls("w1", "w2", "r1?")
	st.Add(calls, together)
	st.Release(ByChunk(1))
	st.Answer(0, false, "")
	rel, _ := st.Release(ByResult(0))
	if len(rel) != 1 || rel[0].Error == nil || rel[0].Error.Code != messages.CodeSkipped || !strings.Contains(rel[0].Error.Message, "call 0 (w1)") {
		t.Fatalf("after a failure under skip: %+v", rel)
	}
	st.Answer(1, false, "")
	if rel, _ := st.Release(ByResult(1)); len(rel) != 1 || rel[0].Error == nil {
		t.Fatalf("the read after: %+v", rel)
	}
}
