package parser

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/catalog"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/order"
	"github.com/toolbus/toolbus/pkg/order/ordertest"
)

// refusalOf returns the reason of out when it is one output refusing response c/id with
// not_allowed, and fails the test otherwise.
func refusalOf(t *testing.T, what string, out []bus.Outgoing, err error, id string) string {
	t.Helper()
	if err != nil || len(out) != 1 {
		t.Fatalf("%s: %d messages, %v; want the output refusing it", what, len(out), err)
	}
	if out[0].Subject != messages.OutputSubject("c") || out[0].Meta.MsgID != "c/"+id {
		t.Fatalf("%s: %s, message id %q; want the output of c/%s", what, out[0].Subject, out[0].Meta.MsgID, id)
	}
	var o messages.Output
	if err := messages.DecodeOutput(out[0].Body, &o); err != nil || o.ResponseID != id || len(o.Results) != 1 || o.Results[0].Error == nil ||
		o.Results[0].Error.Code != messages.CodeNotAllowed {
		t.Fatalf("%s: %s %v; want one not_allowed result", what, out[0].Body, err)
	}
	return o.Results[0].Error.Message
}

// A response id is the response's: a message that uses the id of a response answered
// already — published again after the duplicate window — runs nothing and is answered
// with an output refusing it, saying why; one that uses the id of a response not
// answered yet is rejected (an error: the runner dead-letters it and tells its sender).
// Redeliveries of the first message (its stream sequence) are that response, before its
// output and after, and are never refused.
func TestParseRefusesAReusedID(t *testing.T) {
	kv := gatherKV(t)
	ctx := context.Background()
	cat := NewCatalog()
	cat.Set("local", []catalog.Tool{{Name: "a", ReadOnly: true}, {Name: "b", ReadOnly: true}})
	// As deployed: the parser records ids where it keeps its plans.
	s := &Stage{Catalog: cat, Plans: order.Store{KV: kv}}
	text := `<tool_call>{"name": "a", "arguments": {}}</tool_call><tool_call>{"name": "b", "arguments": {}}</tool_call>`
	response := func(seq uint64, delivered int, text string) *bus.Delivery {
		return &bus.Delivery{Subject: messages.ResponseSubject("c"), Data: []byte(text),
			Meta: bus.Meta{Conversation: "c", ResponseID: "r", MsgID: "c/r"}, Sequence: seq, Delivered: delivered}
	}
	calls := func(what string, out []bus.Outgoing, err error) {
		t.Helper()
		if err != nil || len(out) != 2 || out[0].Meta.MsgID != "c/r/0" || out[1].Meta.MsgID != "c/r/1" {
			t.Fatalf("%s: %+v, %v; want its two calls", what, out, err)
		}
	}

	out, err := s.Parse(ctx, response(5, 1, text))
	calls("the response", out, err)
	out, err = s.Parse(ctx, response(5, 2, text))
	calls("its redelivery before its output", out, err)

	// The formatter stores the output and marks the response answered.
	if err := order.Finish(ctx, kv, "c/r"); err != nil {
		t.Fatal(err)
	}
	// The id sent again after the duplicate window: refused, nothing run. Its own
	// redelivery (its publish lost) is refused again, under the same message id.
	for _, delivered := range []int{1, 2} {
		out, err = s.Parse(ctx, response(12, delivered, text))
		why := refusalOf(t, "the id used again", out, err, "r")
		if delivered == 1 {
			t.Logf("refused: %s", why)
		}
		for _, want := range []string{`response id "r" was answered already`, "answered at", "new Toolbus-Response-Id", "stream sequence 12"} {
			if !strings.Contains(why, want) {
				t.Errorf("the refusal %q does not say %q", why, want)
			}
		}
	}

	// Redeliveries of the first message after its output: nothing left to do.
	for _, delivered := range []int{1, 3} {
		if out, err := s.Parse(ctx, response(5, delivered, text)); err != nil || len(out) != 0 {
			t.Fatalf("a redelivery (%d) after the output: %+v, %v; want nothing", delivered, out, err)
		}
	}

	// Held for the duplicate window after the earlier output, where its message id
	// would be dropped as a duplicate; published on the last delivery anyway.
	var retry *bus.RetryError
	s.DuplicateWindow = time.Hour
	out, err = s.Parse(ctx, response(13, 1, text))
	if !errors.As(err, &retry) || len(out) != 0 || retry.Delay < 59*time.Minute || retry.Delay > time.Hour {
		t.Fatalf("within the duplicate window of the earlier output: %+v, %v; want it held for about an hour", out, err)
	}
	d := response(13, 5, text)
	d.Last = true
	out, err = s.Parse(ctx, d)
	refusalOf(t, "the last delivery within the window", out, err, "r")
	s.DuplicateWindow = 0

	// Another message with the id of a response not answered yet: its output will be
	// the first's, so the second is rejected, not answered in its place.
	other := func(seq uint64, text string) *bus.Delivery {
		d := response(seq, 1, text)
		d.Meta.ResponseID, d.Meta.MsgID = "f", "c/f"
		return d
	}
	out, err = s.Parse(ctx, other(8, text))
	if err != nil || len(out) != 2 {
		t.Fatalf("response f: %+v, %v", out, err)
	}
	out, err = s.Parse(ctx, other(9, `<tool_call>{"name": "a", "arguments": {"other": 1}}</tool_call>`))
	if err == nil || errors.As(err, &retry) || len(out) != 0 || !strings.Contains(err.Error(), "is in use") || !strings.Contains(err.Error(), "new Toolbus-Response-Id") {
		t.Fatalf("the id used again before the first is answered: %+v, %v; want it rejected", out, err)
	}
	t.Logf("rejected: %v", err)

	// A response the parser answers itself (no call) is recorded too; marked answered
	// (by the runner, once its output is stored), its id used again is refused.
	out, err = s.Parse(ctx, &bus.Delivery{Data: []byte("Paris."), Meta: bus.Meta{Conversation: "c", ResponseID: "n"}, Sequence: 20, Delivered: 1})
	if err != nil || len(out) != 1 || out[0].Meta.MsgID != "c/n" {
		t.Fatalf("no call: %+v, %v", out, err)
	}
	if err := (order.Store{KV: kv}).Answered(ctx, "c/n", order.Origin{Seq: 20, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	out, err = s.Parse(ctx, &bus.Delivery{Data: []byte(text), Meta: bus.Meta{Conversation: "c", ResponseID: "n"}, Sequence: 21, Delivered: 1})
	refusalOf(t, "a no-call response's id used again", out, err, "n")
	if out, err := s.Parse(ctx, &bus.Delivery{Data: []byte("Paris."), Meta: bus.Meta{Conversation: "c", ResponseID: "n"}, Sequence: 20, Delivered: 2}); err != nil || len(out) != 0 {
		t.Fatalf("the no-call response redelivered after its output: %+v, %v; want nothing", out, err)
	}
}

// A streamed response's id is claimed by its chunk 1: a stream that uses the id of one
// answered already is refused by its chunk 1, its other chunks changing nothing; the
// chunk 1 of the first stream redelivered is that response's.
func TestChunkRefusesAReusedID(t *testing.T) {
	kv := gatherKV(t)
	ctx := context.Background()
	s := &Stage{Texts: TextStore{KV: kv}, Streams: &ordertest.Streams{}, Plans: order.Store{KV: kv}, StreamIdle: -1}
	at := func(d *bus.Delivery, seq uint64, delivered int) *bus.Delivery {
		d.Sequence, d.Delivered = seq, delivered
		return d
	}
	call := `<tool_call>{"name": "a", "arguments": {}}</tool_call>`
	out, err := s.Chunk(ctx, at(chunk("s", 1, call, false, nil), 3, 1))
	if err != nil {
		t.Fatal(err)
	}
	if out, err = s.Chunk(ctx, at(chunk("s", 2, "", true, nil), 4, 1)); err != nil || len(out) != 2 {
		t.Fatalf("the last chunk: %+v, %v; want the call and the end", out, err)
	}
	// The formatter stores the output and marks the response answered.
	if err := order.Finish(ctx, kv, "c/s", order.StreamKeys("c/s")...); err != nil {
		t.Fatal(err)
	}
	if out, err := s.Chunk(ctx, at(chunk("s", 1, call, false, nil), 3, 2)); err != nil || len(out) != 0 {
		t.Fatalf("chunk 1 redelivered after the output: %+v, %v; want nothing", out, err)
	}
	// The id streamed again: its chunk 2 first (nothing), then its chunk 1 (refused).
	if out, err := s.Chunk(ctx, at(chunk("s", 2, "", true, nil), 30, 1)); err != nil || len(out) != 0 {
		t.Fatalf("chunk 2 of the id streamed again: %+v, %v; want nothing", out, err)
	}
	out, err = s.Chunk(ctx, at(chunk("s", 1, call, false, nil), 29, 1))
	why := refusalOf(t, "the id streamed again", out, err, "s")
	if !strings.Contains(why, "answered already") || !strings.Contains(why, "chunk 1 of a streamed response") {
		t.Errorf("the refusal %q", why)
	}
	// Chunk 1 of another stream with the id of one not answered yet: rejected.
	if out, err := s.Chunk(ctx, at(chunk("f", 1, call, true, nil), 40, 1)); err != nil || len(out) != 2 {
		t.Fatalf("stream f: %+v, %v", out, err)
	}
	if out, err := s.Chunk(ctx, at(chunk("f", 1, call, false, nil), 41, 1)); err == nil || len(out) != 0 || !strings.Contains(err.Error(), "is in use") {
		t.Fatalf("the id streamed again before the first is answered: %+v, %v; want it rejected", out, err)
	}
	// A whole response with a streamed response's id is refused too.
	out, err = s.Parse(ctx, &bus.Delivery{Data: []byte(call), Meta: bus.Meta{Conversation: "c", ResponseID: "s"}, Sequence: 3, Delivered: 1})
	refusalOf(t, "a whole response with the id", out, err, "s")
}
