package order

import (
	"slices"
	"testing"

	"github.com/toolbus/toolbus/pkg/messages"
)

// A response that ended without its last chunk releases what still waits with its
// end's error (answered without running), and is complete once every call is answered.
func TestStreamedEndReleasesTheRestWithItsError(t *testing.T) {
	var st Streamed
	calls, together := streamCalls("r1?", "w1", "w2")
	st.Add(calls, together)
	if rel, _ := st.Release(ByChunk(1)); !slices.Equal(tools(rel), []string{"r1"}) {
		t.Fatalf("chunk 1 released %v", tools(rel))
	}
	st.Final, st.End = true, &messages.ResultError{Code: messages.CodeTimeout, Message: "the streamed response never finished"}
	rel, changed := st.Release(ByEnd)
	if !changed || !slices.Equal(tools(rel), []string{"w1", "w2"}) {
		t.Fatalf("the end released %v", tools(rel))
	}
	for _, c := range rel {
		if c.Error == nil || c.Error.Code != messages.CodeTimeout || c.Error.Message != "not run: the streamed response never finished" {
			t.Errorf("%s released with %+v", c.Tool, c.Error)
		}
	}
	if again, changed := st.Release(ByEnd); changed || len(again) != 2 {
		t.Errorf("the end again: %v, changed %v", tools(again), changed)
	}
	for i := range st.Calls {
		if st.Complete() {
			t.Fatal("complete before every call is answered")
		}
		st.Answer(i, i == 0, "")
	}
	if !st.Complete() {
		t.Error("not complete")
	}
}
