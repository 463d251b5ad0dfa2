package order

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/messages"
)

// The stored state keeps a released call in a key of its own: a redelivered result or
// end releases the same calls again, read from their keys, with the error their release
// gave them (skipped, or the end's), and the state's own key holds no released call.
func TestStreamStoreReleasesAgainFromTheCallsKeys(t *testing.T) {
	_, js := bustest.Provisioned(t)
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, messages.BucketGather)
	if err != nil {
		t.Fatal(err)
	}
	s := StreamStore{KV: kv}
	calls, together := streamCalls("r1?", "w1", "w2", "w3")
	calls[3].Arguments = []byte(`{"big":"` + strings.Repeat("x", 4000) + `"}`)
	release := func(by string, prep func(*Streamed)) []messages.ToolCall {
		t.Helper()
		var rel []messages.ToolCall
		if _, err := s.Update(ctx, "c/r", func(st *Streamed) (bool, error) {
			if prep != nil {
				prep(st)
			}
			var changed bool
			rel, changed = st.Release(by)
			return changed || prep != nil, nil
		}); err != nil {
			t.Fatal(err)
		}
		return rel
	}
	add := func(st *Streamed) { st.OnError = Skip; st.Add(calls, together) }
	if got := tools(release(ByChunk(1), add)); !slices.Equal(got, []string{"r1"}) {
		t.Fatalf("chunk 1 released %v", got)
	}
	if got := tools(release(ByChunk(1), add)); !slices.Equal(got, []string{"r1"}) {
		t.Fatalf("chunk 1 again released %v", got)
	}
	answer := func(i int, ok bool) func(*Streamed) { return func(st *Streamed) { st.Answer(i, ok) } }
	rel := release(ByResult(0), answer(0, false))
	if len(rel) != 1 || rel[0].Tool != "w1" || rel[0].Error == nil || rel[0].Error.Code != messages.CodeSkipped {
		t.Fatalf("result 0 released %+v", rel)
	}
	again := release(ByResult(0), answer(0, false))
	if len(again) != 1 || again[0].Tool != "w1" || again[0].Error == nil || again[0].Error.Message != rel[0].Error.Message || again[0].ID != rel[0].ID {
		t.Fatalf("result 0 again released %+v, want %+v", again, rel)
	}
	end := &messages.ResultError{Code: messages.CodeTimeout, Message: "never finished"}
	// w2 waits for w1; the end releases it and w3 with its error.
	rel = release(ByEnd, func(st *Streamed) { st.Final, st.End = true, end })
	again = release(ByEnd, func(st *Streamed) {})
	for _, r := range [][]messages.ToolCall{rel, again} {
		if !slices.Equal(tools(r), []string{"w2", "w3"}) || r[0].Error == nil || r[0].Error.Code != messages.CodeTimeout || string(r[1].Arguments) != string(calls[3].Arguments) {
			t.Fatalf("the end released %+v", r)
		}
	}
	e, err := kv.Get(ctx, StreamKey("c/r"))
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Value()) > 300 {
		t.Errorf("the state's key holds %d bytes once every call is released: %s", len(e.Value()), e.Value())
	}
	for i := range calls {
		if _, err := kv.Get(ctx, StreamCallKey("c/r", i)); err != nil {
			t.Errorf("call %d: %v", i, err)
		}
	}
}
