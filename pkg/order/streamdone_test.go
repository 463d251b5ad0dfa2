package order

import (
	"context"
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
