package order

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/messages"
)

// Finish leaves the mark, naming the keys it deleted; Refinish deletes those that are
// there again (a delivery that died between the mark and the deletes), and leaves a
// response that is not answered alone.
func TestFinishAndRefinish(t *testing.T) {
	_, js := bustest.Provisioned(t)
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, messages.BucketGather)
	if err != nil {
		t.Fatal(err)
	}
	keys := func() []string {
		t.Helper()
		l, err := kv.ListKeys(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var all []string
		for k := range l.Keys() {
			all = append(all, k)
		}
		slices.Sort(all)
		return all
	}
	for _, k := range append(StreamKeys("c/r"), "c/r", TextKey("c/other")) {
		if _, err := kv.Put(ctx, k, []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	if err := Refinish(ctx, kv, "c/r"); err != nil || len(keys()) != 4 {
		t.Fatalf("refinish before the output: %v, keys %v", err, keys())
	}
	if err := Finish(ctx, kv, "c/r", StreamKeys("c/r")...); err != nil {
		t.Fatal(err)
	}
	if got := keys(); !slices.Equal(got, []string{"c/other.text", "c/r"}) {
		t.Fatalf("keys after the output %v", got)
	}
	if ok, err := Answered(ctx, kv, "c/r"); !ok || err != nil {
		t.Fatalf("answered %v %v", ok, err)
	}
	// A late write put the state back: Refinish deletes it.
	if _, err := kv.Put(ctx, StreamKey("c/r"), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if err := Refinish(ctx, kv, "c/r"); err != nil {
		t.Fatal(err)
	}
	if got := keys(); !slices.Equal(got, []string{"c/other.text", "c/r"}) {
		t.Errorf("keys after refinish %v", got)
	}
}

// What a delivery that began before the output was stored writes after Finish deleted
// the response's keys — a plan saved again, a stream state started again — is deleted
// again, and the writer is told the response is answered. Before the output, the same
// writes stand.
func TestNothingStartsAgainAfterFinish(t *testing.T) {
	_, js := bustest.Provisioned(t)
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, messages.BucketGather)
	if err != nil {
		t.Fatal(err)
	}
	keys := func() []string {
		t.Helper()
		l, err := kv.ListKeys(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var all []string
		for k := range l.Keys() {
			all = append(all, k)
		}
		slices.Sort(all)
		return all
	}
	plan := []messages.ToolCall{{ID: "c/r/0", Index: 0, Count: 2, Next: 1}, {ID: "c/r/1", Index: 1, Count: 2}}
	segs := Segments(plan, []int{0, 1}, Continue)
	streams := StreamStore{KV: kv}
	start := func(st *Streamed) (bool, error) { return st.Add(plan, []bool{false, false}), nil }

	// Before the output: the plan and the state are kept.
	if _, err := (Store{KV: kv}).Save(ctx, "c/r", segs); err != nil {
		t.Fatal(err)
	}
	if _, err := streams.Update(ctx, "c/r", start); err != nil {
		t.Fatal(err)
	}
	want := []string{"c/r.segment.0", "c/r.segment.1", "c/r.stream"}
	if got := keys(); !slices.Equal(got, want) {
		t.Fatalf("keys before the output %v, want %v", got, want)
	}
	if err := Finish(ctx, kv, "c/r", want...); err != nil {
		t.Fatal(err)
	}

	// After it: the writes are taken back.
	if _, err := (Store{KV: kv}).Save(ctx, "c/r", segs); !errors.Is(err, ErrAnswered) {
		t.Errorf("Save after the output: %v, want ErrAnswered", err)
	}
	if _, err := streams.Update(ctx, "c/r", start); !errors.Is(err, ErrAnswered) {
		t.Errorf("stream state started after the output: %v, want ErrAnswered", err)
	}
	if got := keys(); !slices.Equal(got, []string{"c/r"}) {
		t.Errorf("keys after late writes %v, want only the mark", got)
	}
	// A response not answered is not touched by Created.
	if _, err := kv.Put(ctx, TextKey("c/s"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := Created(ctx, kv, "c/s", TextKey("c/s")); err != nil {
		t.Fatal(err)
	}
	if got := keys(); !slices.Equal(got, []string{"c/r", "c/s.text"}) {
		t.Errorf("keys %v, want the mark and c/s's text", got)
	}
}
