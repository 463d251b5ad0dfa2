package order

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/messages"
)

// The first message to claim a response id is recorded in the response's key; a
// redelivery of it finds itself, another message finds the first. The record stays
// through the formatter's progress and in the answered mark, which says when the output
// was stored (the first mark's time), so that a message using the id after the output
// is still told from a redelivery of the first.
func TestClaimKeepsTheOrigin(t *testing.T) {
	_, js := bustest.Provisioned(t)
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, messages.BucketGather)
	if err != nil {
		t.Fatal(err)
	}
	first := Origin{Seq: 5, At: time.Now().UTC().Truncate(time.Millisecond)}
	use, err := Claim(ctx, kv, "c/r", first)
	if err != nil || !use.Origin.Same(first) || use.Answered {
		t.Fatalf("the first claim: %+v, %v", use, err)
	}
	again := first
	again.At = again.At.Add(time.Second) // read again later: the same message
	if use, err := Claim(ctx, kv, "c/r", again); err != nil || !use.Origin.Same(again) || !use.Origin.At.Equal(first.At) {
		t.Fatalf("a redelivery: %+v, %v", use, err)
	}
	for _, other := range []Origin{{Seq: 9, At: time.Now()}, {Seq: 5, Chunk: true, At: time.Now()}} {
		if use, err := Claim(ctx, kv, "c/r", other); err != nil || use.Origin.Same(other) || !use.Origin.Same(first) || use.Answered {
			t.Fatalf("another message %+v: %+v, %v", other, use, err)
		}
	}

	// The formatter's progress, written over the claim, keeps it (pkg/formatter keeps
	// the field as it reads it); Finish keeps it in the mark.
	var v map[string]any
	e, err := kv.Get(ctx, "c/r")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(e.Value(), &v); err != nil {
		t.Fatal(err)
	}
	v["got"] = "Aw=="
	body, _ := json.Marshal(v)
	if _, err := kv.Put(ctx, "c/r", body); err != nil {
		t.Fatal(err)
	}
	if err := Finish(ctx, kv, "c/r"); err != nil {
		t.Fatal(err)
	}
	use, err = Claim(ctx, kv, "c/r", Origin{Seq: 12, At: time.Now()})
	if err != nil || !use.Origin.Same(first) || !use.Answered || use.AnsweredAt.IsZero() {
		t.Fatalf("after the output: %+v, %v", use, err)
	}
	answeredAt := use.AnsweredAt
	if ok, err := Answered(ctx, kv, "c/r"); !ok || err != nil {
		t.Fatalf("answered %v %v", ok, err)
	}
	// A second Finish (a redelivery that stored the output again) keeps the first time.
	if err := Finish(ctx, kv, "c/r"); err != nil {
		t.Fatal(err)
	}
	if use, err := Claim(ctx, kv, "c/r", first); err != nil || !use.Origin.Same(first) || !use.AnsweredAt.Equal(answeredAt) {
		t.Fatalf("after a second Finish: %+v, %v; want answered at %v", use, err, answeredAt)
	}

	// The parser's own outputs: marked with the origin it knows, without a read.
	o := Origin{Seq: 20, At: time.Now()}
	if _, err := (Store{KV: kv}).Claim(ctx, "c/n", o); err != nil {
		t.Fatal(err)
	}
	if err := (Store{KV: kv}).Answered(ctx, "c/n", o); err != nil {
		t.Fatal(err)
	}
	if use, err := Claim(ctx, kv, "c/n", Origin{Seq: 21, At: time.Now()}); err != nil || !use.Origin.Same(o) || !use.Answered {
		t.Fatalf("a response the parser answered: %+v, %v", use, err)
	}
	// A key deleted since it was created is claimed again.
	if err := kv.Delete(ctx, "c/n"); err != nil {
		t.Fatal(err)
	}
	if use, err := Claim(ctx, kv, "c/n", Origin{Seq: 22, At: time.Now()}); err != nil || use.Origin.Seq != 22 || use.Answered {
		t.Fatalf("a deleted key: %+v, %v", use, err)
	}
}
