package parser

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/catalog"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/order"
	"github.com/toolbus/toolbus/pkg/order/ordertest"
)

func gatherKV(t *testing.T) jetstream.KeyValue {
	t.Helper()
	nc, _ := bustest.Connect(t, bustest.Server(t))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.CreateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: messages.BucketGather})
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// chunk is the delivery of chunk n of response r of conversation c.
func chunk(r string, n int, text string, final bool, h map[string]string) *bus.Delivery {
	hdr := nats.Header{}
	hdr.Set(messages.HeaderChunk, strconv.Itoa(n))
	if final {
		hdr.Set(messages.HeaderFinal, "true")
	}
	for k, v := range h {
		hdr.Set(k, v)
	}
	return &bus.Delivery{Subject: messages.StreamSubject("c"), Data: []byte(text), Header: hdr,
		Meta: bus.Meta{Conversation: "c", ResponseID: r}, Delivered: 1}
}

// The chunks of a response read in any order give the calls in order, each released
// once it is settled and may run (a and b are read-only: both run at once), the end
// last; the headers of the first chunk say how the whole response is read.
func TestChunkAnyOrder(t *testing.T) {
	kv := gatherKV(t)
	cat := NewCatalog()
	cat.Set("local", []catalog.Tool{{Name: "a", ReadOnly: true}, {Name: "b", ReadOnly: true}})
	text := `<tool_call>{"name": "a", "arguments": {}}</tool_call> and <tool_call>{"name": "b", "arguments": {"x": 1}}</tool_call> done`
	var parts []string
	for i := 0; i < len(text); i += 9 {
		parts = append(parts, text[i:min(i+9, len(text))])
	}
	for _, order := range []string{"in order", "reversed", "odd first"} {
		t.Run(order, func(t *testing.T) {
			s := &Stage{Catalog: cat, Texts: TextStore{KV: kv}, Streams: &ordertest.Streams{}, StreamIdle: -1}
			idx := make([]int, len(parts))
			for i := range idx {
				idx[i] = i
			}
			switch order {
			case "reversed":
				slices.Reverse(idx)
			case "odd first":
				slices.SortStableFunc(idx, func(a, b int) int { return a%2 - b%2 })
			}
			var calls []string
			ended := 0
			for _, i := range idx {
				h := map[string]string{}
				if i == 0 {
					h[messages.HeaderReasoning] = "tagged" // only the first chunk says so
				}
				out, err := s.Chunk(context.Background(), chunk("r-"+order, i+1, parts[i], i == len(parts)-1, h))
				if err != nil {
					t.Fatal(err)
				}
				for _, o := range out {
					var c messages.ToolCall
					if err := messages.DecodeCall(o.Body, &c); err != nil || o.Subject != messages.CallSubject("c") {
						t.Fatalf("%s: %s %v", o.Subject, o.Body, err)
					}
					if c.End {
						ended++
						if c.Index != 2 || ended != 1 || len(calls) != 2 {
							t.Errorf("end %+v after calls %v", c, calls)
						}
						continue
					}
					if !c.Stream || c.Count != 0 || c.ID != messages.CallID("c", "r-"+order, len(calls)) {
						t.Errorf("call %+v", c)
					}
					calls = append(calls, c.Tool)
				}
			}
			if !slices.Equal(calls, []string{"a", "b"}) || ended != 1 {
				t.Errorf("released %v, ended %d", calls, ended)
			}
		})
	}
}

// Under reasoning "auto", a call before any think tag waits for the last chunk; a
// chunk that names no number, or a spoofed conversation, is answered at once.
func TestChunkAnswers(t *testing.T) {
	kv := gatherKV(t)
	s := &Stage{Texts: TextStore{KV: kv}, Streams: &ordertest.Streams{}, StreamIdle: -1}
	ctx := context.Background()
	out, err := s.Chunk(ctx, chunk("auto", 1, `<tool_call>{"name": "a", "arguments": {}}</tool_call> more`, false, nil))
	if err != nil || len(out) != 0 {
		t.Fatalf("auto reasoning, before the end: %d messages, %v", len(out), err)
	}
	out, err = s.Chunk(ctx, chunk("auto", 2, ``, true, nil))
	if err != nil || len(out) != 2 {
		t.Fatalf("auto reasoning, the end: %d messages, %v", len(out), err)
	}
	// A tool the catalog does not know runs alone: the second waits for the first.
	out, err = s.Chunk(ctx, chunk("alone", 1, `<tool_call>{"name": "a", "arguments": {}}</tool_call><tool_call>{"name": "b", "arguments": {}}</tool_call>`, true, nil))
	if err != nil || len(out) != 2 || !strings.Contains(string(out[0].Body), `"tool":"a"`) || !strings.Contains(string(out[1].Body), `"end":true`) {
		t.Fatalf("unknown tools: %d messages, %v", len(out), err)
	}
	for name, d := range map[string]*bus.Delivery{
		"no number": chunk("bad", 0, "x", false, nil),
		"spoofed":   chunk("spoof", 1, "x", false, map[string]string{messages.HeaderConversation: "other"}),
	} {
		d.Meta.Spoofed = d.Header.Get(messages.HeaderConversation)
		out, err := s.Chunk(ctx, d)
		if err != nil || len(out) != 1 || out[0].Subject != messages.OutputSubject("c") {
			t.Fatalf("%s: %v, %v", name, out, err)
		}
		var o messages.Output
		if err := messages.DecodeOutput(out[0].Body, &o); err != nil || len(o.Results) != 1 || o.Results[0].Error == nil {
			t.Errorf("%s: %+v", name, o)
		}
	}
	if _, err := s.Chunk(ctx, chunk("", 1, "x", false, nil)); err == nil {
		t.Error("a chunk without a response id was not refused")
	}
	out, err = s.Chunk(ctx, chunk("none", 1, "No tools today.", true, nil))
	if err != nil || len(out) != 1 || out[0].Subject != messages.OutputSubject("c") {
		t.Errorf("a response without calls: %v, %v", out, err)
	}
}

// A chunk's calls are kept in the text, not in keys of their own: a redelivered chunk
// settles them again from the text, checked against their schemas as the first time
// (defaults applied), and releases the same calls, byte for byte.
func TestChunkRedeliveredSettlesAgain(t *testing.T) {
	kv := gatherKV(t)
	cat := NewCatalog()
	cat.Set("local", []catalog.Tool{{Name: "a", ReadOnly: true,
		InputSchema: []byte(`{"type":"object","properties":{"x":{"type":"integer"},"unit":{"type":"string","default":"m"}}}`)}})
	s := &Stage{Catalog: cat, Texts: NewTextStore(kv), Streams: order.NewStreamStore(kv), StreamIdle: -1}
	ctx := context.Background()
	texts := []string{`<tool_call>{"name": "a", "arguments": {"x": 1}}</tool_call> then `, `<tool_call>{"name": "a", "arguments": {"x": 2}}</tool_call> done`}
	tagged := map[string]string{messages.HeaderReasoning: "tagged"} // calls run as they come
	var first [][]byte
	for i, text := range texts {
		out, err := s.Chunk(ctx, chunk("again", i+1, text, false, tagged))
		if err != nil || len(out) != 1 {
			t.Fatalf("chunk %d: %d messages, %v", i+1, len(out), err)
		}
		first = append(first, out[0].Body)
	}
	if !strings.Contains(string(first[0]), `"unit":"m"`) {
		t.Fatalf("chunk 1's call without its default: %s", first[0])
	}
	for i := range texts {
		d := chunk("again", i+1, texts[i], false, tagged)
		d.Delivered = 2
		out, err := s.Chunk(ctx, d)
		if err != nil || len(out) != 1 || string(out[0].Body) != string(first[i]) {
			t.Fatalf("chunk %d again: %v %v, want %s", i+1, out, err, first[i])
		}
	}
	for i := range texts {
		if _, err := kv.Get(ctx, order.StreamCallKey(messages.ScopedID("c", "again"), i)); err == nil {
			t.Errorf("call %d has a key of its own", i)
		}
	}
}

// countingStreams counts the updates of the stream state.
type countingStreams struct {
	ordertest.Streams
	updates int
}

func (c *countingStreams) Update(ctx context.Context, response string, fn func(*order.Streamed) (bool, error)) (order.Streamed, error) {
	c.updates++
	return c.Streams.Update(ctx, response, fn)
}

// A chunk that settles no call the state does not hold already leaves the state alone
// (most chunks of a model's answer complete no call); one that settles a new call, a
// redelivery and the last chunk update it.
func TestChunkWithoutNewCallsKeepsTheState(t *testing.T) {
	kv := gatherKV(t)
	streams := &countingStreams{}
	s := &Stage{Texts: NewTextStore(kv), Streams: streams, StreamIdle: -1}
	ctx := context.Background()
	tagged := map[string]string{messages.HeaderReasoning: "tagged"}
	n := 0
	send := func(text string, final bool, delivered int) []bus.Outgoing {
		t.Helper()
		if delivered == 1 {
			n++
		}
		d := chunk("quiet", n, text, final, tagged)
		d.Delivered = delivered
		out, err := s.Chunk(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if out := send(`<tool_call>{"name": "a", "arguments": {}}</tool_call> `, false, 1); len(out) != 1 || streams.updates != 1 {
		t.Fatalf("chunk 1: %d messages, %d updates", len(out), streams.updates)
	}
	for _, text := range []string{"Now ", "the ", "second", " one: "} {
		if out := send(text, false, 1); len(out) != 0 {
			t.Fatalf("%q: %d messages", text, len(out))
		}
	}
	if streams.updates != 1 {
		t.Fatalf("%d updates after four chunks without calls, want 1", streams.updates)
	}
	if out := send(" ", false, 2); len(out) != 0 || streams.updates != 2 { // chunk 5 again
		t.Fatalf("a redelivery: %d messages, %d updates", len(out), streams.updates)
	}
	// b waits for a (neither is known to be read-only): added, not released.
	if out := send(`<tool_call>{"name": "b", "arguments": {}}</tool_call> `, false, 1); len(out) != 0 || streams.updates != 3 {
		t.Fatalf("a chunk with a call: %d messages, %d updates", len(out), streams.updates)
	}
	if out := send("done", true, 1); len(out) != 1 || streams.updates != 4 { // the end
		t.Fatalf("the last chunk: %d messages, %d updates", len(out), streams.updates)
	}
}

// The first chunk to come may be one whose final mark cannot be read, waiting for the
// chunks before it (EndAt): it publishes the watch, so the response ends by the idle
// timeout if they never come.
func TestChunkEndingEarlyPublishesTheWatch(t *testing.T) {
	kv := gatherKV(t)
	s := &Stage{Texts: NewTextStore(kv), Streams: order.NewStreamStore(kv), StreamIdle: time.Minute}
	out, err := s.Chunk(context.Background(), chunk("lost1", 2, "tail", false, map[string]string{messages.HeaderFinal: "maybe"}))
	if err != nil {
		t.Fatal(err)
	}
	watches := 0
	for _, o := range out {
		if strings.Contains(o.Meta.MsgID, "/watch/") {
			watches++
		}
	}
	if watches != 1 {
		t.Fatalf("chunk 2, waiting for chunk 1 with its end, published %d watches, want 1: %+v", watches, out)
	}
}
