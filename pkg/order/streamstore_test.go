package order

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/messages"
)

// The stored state keeps a released call in a key of its own: a redelivered result or
// end releases the same calls again, read from their keys, with the error their release
// gave them (skipped, or the end's), and the state's own key holds no released call.
func TestStreamStoreReleasesAgainFromTheCallsKeys(t *testing.T) {
	ctx, kv := context.Background(), gatherBucket(t)
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
	answer := func(i int, ok bool) func(*Streamed) { return func(st *Streamed) { st.Answer(i, ok, "") } }
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

// The calls a chunk releases get no key: the chunk's redelivery settles them again from
// the text (Derive), with the same bodies; a call a result releases is kept in its key,
// and CallKeys names only those. A call skipped after a failure names the failed call's
// tool, which its answer gave, though that call's body was never stored.
func TestStreamStoreDerivedCallsHaveNoKeys(t *testing.T) {
	ctx, kv := context.Background(), gatherBucket(t)
	s := NewStreamStore(kv)
	calls, together := streamCalls("r1?", "r2?", "w1")
	derive := func(st *Streamed) {
		st.Derive(func(i int) (messages.ToolCall, bool) {
			if i >= len(calls) {
				return messages.ToolCall{}, false
			}
			return calls[i], true
		})
	}
	update := func(by string, prep func(*Streamed) bool) ([]messages.ToolCall, Streamed) {
		t.Helper()
		var rel []messages.ToolCall
		st, err := s.Update(ctx, "c/r", func(st *Streamed) (bool, error) {
			changed := prep(st)
			var r bool
			rel, r = st.Release(by)
			return changed || r, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return rel, st
	}
	chunk := func(st *Streamed) bool { derive(st); st.OnError = Skip; return st.Add(calls, together) }
	first, _ := update(ByChunk(1), chunk)
	again, _ := update(ByChunk(1), chunk)
	if !slices.Equal(tools(first), []string{"r1", "r2"}) || len(again) != 2 {
		t.Fatalf("chunk 1 released %v, then %v", tools(first), tools(again))
	}
	for i := range again {
		if again[i].ID != first[i].ID || !again[i].Stream || again[i].Count != 0 {
			t.Errorf("chunk 1 again released %+v, want %+v", again[i], first[i])
		}
	}
	for i := range 3 {
		if _, err := kv.Get(ctx, StreamCallKey("c/r", i)); !errors.Is(err, jetstream.ErrKeyNotFound) {
			t.Errorf("call %d has a key before a result released it: %v", i, err)
		}
	}
	update(ByResult(1), func(st *Streamed) bool { return st.Answer(1, true, "r2") })
	rel, st := update(ByResult(0), func(st *Streamed) bool { return st.Answer(0, false, "r1") })
	if len(rel) != 1 || rel[0].Tool != "w1" || rel[0].Error == nil || !strings.Contains(rel[0].Error.Message, "call 0 (r1)") {
		t.Fatalf("result 0 released %+v, want w1 skipped after r1", rel)
	}
	if got := st.CallKeys("c/r"); !slices.Equal(got, []string{StreamCallKey("c/r", 2)}) {
		t.Errorf("call keys %v, want w1's alone", got)
	}
	if _, err := kv.Get(ctx, StreamCallKey("c/r", 2)); err != nil {
		t.Errorf("w1, released by a result, has no key: %v", err)
	}
	// The result's redelivery releases w1 again from its key, skipped as before.
	if again, _ := update(ByResult(0), func(st *Streamed) bool { return st.Answer(0, false, "r1") }); len(again) != 1 || again[0].Error == nil || again[0].Error.Message != rel[0].Error.Message {
		t.Fatalf("result 0 again released %+v", again)
	}
}

// A call a chunk released (no key of its own) fails, and its answer names no tool (a
// call nobody could read a name in): the result that releases the next call under
// "skip" names the failed call by its place, without reading a body that was never
// kept, and the state is written.
func TestStreamStoreSkipAfterANamelessFailure(t *testing.T) {
	ctx, kv := context.Background(), gatherBucket(t)
	s := NewStreamStore(kv)
	calls, together := streamCalls("r1?", "w1")
	calls[0].Tool = ""
	calls[0].Error = &messages.ResultError{Code: messages.CodeParseError, Message: "no name"}
	if _, err := s.Update(ctx, "c/r", func(st *Streamed) (bool, error) {
		st.Derive(func(i int) (messages.ToolCall, bool) { return calls[i], i < len(calls) })
		st.OnError = Skip
		c := st.Add(calls, together)
		_, r := st.Release(ByChunk(1))
		return c || r, nil
	}); err != nil {
		t.Fatal(err)
	}
	var rel []messages.ToolCall
	if _, err := s.Update(ctx, "c/r", func(st *Streamed) (bool, error) {
		c := st.Answer(0, false, "")
		var r bool
		rel, r = st.Release(ByResult(0))
		return c || r, nil
	}); err != nil {
		t.Fatalf("the failed call's result: %v", err)
	}
	if len(rel) != 1 || rel[0].Tool != "w1" || rel[0].Error == nil || rel[0].Error.Code != messages.CodeSkipped ||
		!strings.Contains(rel[0].Error.Message, "call 0 of this response failed") {
		t.Fatalf("released %+v, want w1 skipped after call 0", rel)
	}
}

// Updates applied in one turn: one that needs a call's body nobody kept fails alone;
// the turn's others are written.
func TestStreamStoreUnreadableUpdateFailsAlone(t *testing.T) {
	ctx, kv := context.Background(), gatherBucket(t)
	s := NewStreamStore(kv)
	calls, together := streamCalls("r1?", "r2?")
	if _, err := s.Update(ctx, "c/r", func(st *Streamed) (bool, error) {
		st.Derive(func(i int) (messages.ToolCall, bool) { return calls[i], i < len(calls) })
		c := st.Add(calls, together)
		_, r := st.Release(ByChunk(1))
		return c || r, nil
	}); err != nil {
		t.Fatal(err)
	}
	// Hold the key's turn while two updates queue behind it: the next turn applies both.
	entered, release := make(chan struct{}), make(chan struct{})
	go func() {
		_, _ = s.Update(ctx, "c/r", func(st *Streamed) (bool, error) {
			select {
			case <-entered:
			default:
				close(entered)
				<-release
			}
			return false, nil
		})
	}()
	<-entered
	errs := make(chan error, 2)
	go func() { // chunk 1 again, without Derive: its calls' bodies were never kept
		_, err := s.Update(ctx, "c/r", func(st *Streamed) (bool, error) {
			_, r := st.Release(ByChunk(1))
			return r, nil
		})
		errs <- err
	}()
	go func() {
		_, err := s.Update(ctx, "c/r", func(st *Streamed) (bool, error) { return st.Answer(1, true, "r2"), nil })
		errs <- err
	}()
	for s.turns.Waiting(StreamKey("c/r")) != 2 { // both queue behind the turn held
		runtime.Gosched()
	}
	close(release)
	var failed, ok int
	for range 2 {
		if err := <-errs; err != nil {
			failed++
		} else {
			ok++
		}
	}
	st, err := s.Update(ctx, "c/r", func(*Streamed) (bool, error) { return false, nil })
	if err != nil || failed != 1 || ok != 1 || !st.Calls[1].Answered {
		t.Fatalf("%d failed, %d written; call 1 answered: %v (%v)", failed, ok, err == nil && st.Calls[1].Answered, err)
	}
}

// gatherBucket is the gather bucket of a provisioned embedded server.
func gatherBucket(t *testing.T) jetstream.KeyValue {
	t.Helper()
	_, js := bustest.Provisioned(t)
	kv, err := js.KeyValue(context.Background(), messages.BucketGather)
	if err != nil {
		t.Fatal(err)
	}
	return kv
}
