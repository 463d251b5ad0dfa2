package parser

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/catalog"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/order"
	"github.com/toolbus/toolbus/pkg/order/ordertest"
)

func TestReadChunkHeaders(t *testing.T) {
	for _, tt := range []struct {
		name, chunk, final string
		want               ChunkHeaders
		wantErr, wantEnd   string // the error returned; the error that ends the response at the chunk
	}{
		{name: "first", chunk: "1", want: ChunkHeaders{N: 1}},
		{name: "final true", chunk: "3", final: "true", want: ChunkHeaders{N: 3, Final: true}},
		{name: "final 1", chunk: "3", final: "1", want: ChunkHeaders{N: 3, Final: true}},
		{name: "final YES", chunk: "3", final: "YES", want: ChunkHeaders{N: 3, Final: true}},
		{name: "final on", chunk: "3", final: " On ", want: ChunkHeaders{N: 3, Final: true}},
		{name: "final False", chunk: "3", final: "False", want: ChunkHeaders{N: 3}},
		{name: "final 0", chunk: "3", final: "0", want: ChunkHeaders{N: 3}},
		{name: "final off", chunk: "3", final: "off", want: ChunkHeaders{N: 3}},
		{name: "spaces around the number", chunk: " 7 ", want: ChunkHeaders{N: 7}},
		{name: "the limit", chunk: "100", want: ChunkHeaders{N: 100}},
		{name: "final garbage", chunk: "3", final: "yes please", wantEnd: `Toolbus-Final "yes please"`},
		{name: "final 2", chunk: "3", final: "2", wantEnd: `Toolbus-Final "2"`},
		{name: "no number", wantErr: "no Toolbus-Chunk header"},
		{name: "zero", chunk: "0", wantErr: `Toolbus-Chunk "0"`},
		{name: "negative", chunk: "-4", wantErr: `Toolbus-Chunk "-4"`},
		{name: "words", chunk: "two", wantErr: `Toolbus-Chunk "two"`},
		{name: "past the limit", chunk: "101", wantErr: "past the limit of 100 chunks"},
		{name: "huge", chunk: "9223372036854775807", final: "true", wantErr: "past the limit of 100 chunks"},
		{name: "past int64", chunk: "9223372036854775808", wantErr: `Toolbus-Chunk "9223372036854775808"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := nats.Header{}
			if tt.chunk != "" {
				h.Set(messages.HeaderChunk, tt.chunk)
			}
			if tt.final != "" {
				h.Set(messages.HeaderFinal, tt.final)
			}
			got, err := ReadChunkHeaders(h, 100)
			if tt.wantErr != "" {
				if err == nil || err.Code != messages.CodeParseError || !strings.Contains(err.Message, tt.wantErr) {
					t.Fatalf("got %+v, %v; want a parse_error saying %q", got, err, tt.wantErr)
				}
				return
			}
			if tt.wantEnd != "" {
				if err != nil || got.N != 3 || got.End == nil || got.End.Code != messages.CodeParseError || !strings.Contains(got.End.Message, tt.wantEnd) {
					t.Fatalf("got %+v, %v; want chunk 3 ending the response with a parse_error saying %q", got, err, tt.wantEnd)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// FuzzReadChunkHeaders: any header values give a chunk number within the limit or a
// parse_error, never a panic.
func FuzzReadChunkHeaders(f *testing.F) {
	for _, s := range [][2]string{{"1", ""}, {"2", "true"}, {"3", "1"}, {"9223372036854775807", "true"}, {"x", "y"}, {"", ""}, {" 4", "NO"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, chunk, final string) {
		h := nats.Header{messages.HeaderChunk: {chunk}, messages.HeaderFinal: {final}}
		got, err := ReadChunkHeaders(h, 1000)
		if err != nil {
			if err.Code != messages.CodeParseError || err.Message == "" {
				t.Fatalf("error %+v", err)
			}
			return
		}
		if got.N < 1 || got.N > 1000 {
			t.Fatalf("chunk number %d", got.N)
		}
		if f, ok := ParseFlag(final); ok != (got.End == nil) || f != got.Final {
			t.Fatalf("final %v, end %v for %q", got.Final, got.End, final)
		}
	})
}

// FuzzStreamText: decoding any value never panics, and what decodes encodes back to
// itself.
func FuzzStreamText(f *testing.F) {
	var t streamText
	t.Reading = Reading{Format: "tool_call"}
	t.add(1, []byte("hello "), false, nil)
	t.add(3, []byte("!"), true, nil)
	t.add(5, nil, false, &messages.ResultError{Code: messages.CodeParseError, Message: "Toolbus-Final \"?\""})
	f.Add(t.encode())
	t.add(2, []byte("world"), false, nil)
	f.Add(t.encode())
	var ended streamText
	ended.add(2, []byte("x"), false, nil)
	ended.end(ByWatch, &messages.ResultError{Code: messages.CodeTimeout, Message: "never\nfinished"})
	f.Add(ended.encode())
	f.Add([]byte("{}\n"))
	f.Add([]byte(`{"read":1,"size":2,"pieces":[{"n":3,"size":1}]}` + "\nabc"))
	f.Fuzz(func(tt *testing.T, v []byte) {
		var t streamText
		if t.decode(v) != nil {
			return
		}
		again := t.encode()
		var u streamText
		if err := u.decode(again); err != nil {
			tt.Fatalf("%q encodes to %q, which does not decode: %v", v, again, err)
		}
		if !bytes.Equal(u.encode(), again) {
			tt.Fatalf("%q: encodes differently after a round trip", v)
		}
	})
}

// Chunks in any order wait in the one key of the response's text, whatever their
// order, and their predecessor takes them in; the text never holds a key per chunk.
func TestTextStoreOneKey(t *testing.T) {
	kv := gatherKV(t)
	ts := TextStore{KV: kv}
	ctx := context.Background()
	for _, n := range []int{4, 2, 6, 5} {
		read, err := ts.Append(ctx, "c/r", n, []byte{byte('0' + n)}, n == 6, 1000, Reading{})
		if err != nil || read.Read != 0 || read.Ended() || !read.Changed {
			t.Fatalf("chunk %d: %+v %v", n, read, err)
		}
	}
	if read, err := ts.Append(ctx, "c/r", 5, []byte("5"), false, 1000, Reading{}); err != nil || read.Changed {
		t.Fatalf("a waiting chunk again: %+v %v", read, err)
	}
	read, err := ts.Append(ctx, "c/r", 1, []byte("1"), false, 1000, Reading{Format: "tool_call"})
	if err != nil || read.Text != "12" || read.Read != 2 || read.Reading.Format != "tool_call" {
		t.Fatalf("chunk 1: %+v %v", read, err)
	}
	read, err = ts.Append(ctx, "c/r", 3, []byte("3"), false, 1000, Reading{})
	if err != nil || read.Text != "123456" || !read.Final {
		t.Fatalf("chunk 3: %+v %v", read, err)
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for k := range keys.Keys() {
		all = append(all, k)
	}
	if !slices.Equal(all, []string{TextKey("c/r")}) {
		t.Errorf("keys %v, want the text's only", all)
	}
	// What waits counts against the limit.
	if _, err := ts.Append(ctx, "c/big", 3, make([]byte, 900), false, 1000, Reading{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.Append(ctx, "c/big", 2, make([]byte, 90), false, 1000, Reading{}); !errors.Is(err, ErrTooLong) {
		t.Errorf("over the limit with what waits: %v", err)
	}
	// Once answered, the text is gone and a late chunk starts nothing.
	if err := ts.Finish(ctx, "c/r"); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.Append(ctx, "c/r", 7, []byte("7"), false, 1000, Reading{}); !errors.Is(err, order.ErrAnswered) {
		t.Errorf("a chunk after the output: %v", err)
	}
	if _, err := kv.Get(ctx, TextKey("c/r")); err == nil {
		t.Error("the text was kept after the output")
	}
}

// outputs sorts what a chunk produced.
type produced struct {
	calls   []messages.ToolCall
	end     bool
	outputs []messages.Output
	watches []bus.Outgoing
}

func sortOut(t *testing.T, out []bus.Outgoing) produced {
	t.Helper()
	var p produced
	for _, o := range out {
		switch o.Subject {
		case messages.CallSubject("c"):
			var c messages.ToolCall
			if err := messages.DecodeCall(o.Body, &c); err != nil {
				t.Fatal(err)
			}
			if c.End {
				p.end = true
				continue
			}
			p.calls = append(p.calls, c)
		case messages.OutputSubject("c"):
			var o2 messages.Output
			if err := messages.DecodeOutput(o.Body, &o2); err != nil {
				t.Fatal(err)
			}
			p.outputs = append(p.outputs, o2)
		case messages.StreamSubject("c"):
			p.watches = append(p.watches, o)
		default:
			t.Fatalf("a message on %s", o.Subject)
		}
	}
	return p
}

// A chunk that cannot be taken ends its response there: the calls released before
// it stand, the calls settled but not released are released with its error (answered
// without running), and the formatter is sent the end; a response without calls is
// answered at once.
func TestChunkEndsResponse(t *testing.T) {
	kv := gatherKV(t)
	cat := NewCatalog()
	cat.Set("local", []catalog.Tool{{Name: "read", ReadOnly: true}, {Name: "write"}})
	ctx := context.Background()
	two := `<tool_call>{"name": "read", "arguments": {}}</tool_call><tool_call>{"name": "write", "arguments": {}}</tool_call> and `
	for _, tt := range []struct {
		name       string
		chunk      string // the second chunk's number
		final      string
		wantErr    string
		wantCalled int // calls released by chunk 1
	}{
		{name: "final garbage", chunk: "2", final: "maybe", wantErr: `Toolbus-Final "maybe"`},
		{name: "no number", chunk: "", wantErr: "no Toolbus-Chunk"},
		{name: "huge number", chunk: "9223372036854775807", final: "true", wantErr: "past the limit of 50 chunks"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &Stage{Catalog: cat, Texts: TextStore{KV: kv}, Streams: &ordertest.Streams{}, StreamIdle: time.Hour, MaxChunks: 50}
			r := "end-" + tt.name
			first := chunk(r, 1, two, false, map[string]string{messages.HeaderReasoning: "tagged"})
			out, err := s.Chunk(ctx, first)
			if err != nil {
				t.Fatal(err)
			}
			p := sortOut(t, out)
			if len(p.calls) != 1 || p.calls[0].Tool != "read" || len(p.watches) != 1 || p.watches[0].Meta.MsgID != "c/"+r+"/watch/1" {
				t.Fatalf("chunk 1: %+v", p)
			}
			d := chunk(r, 2, "more", false, nil)
			d.Header.Del(messages.HeaderChunk)
			if tt.chunk != "" {
				d.Header.Set(messages.HeaderChunk, tt.chunk)
			}
			if tt.final != "" {
				d.Header.Set(messages.HeaderFinal, tt.final)
			}
			for range 2 { // a redelivery releases the same again
				out, err = s.Chunk(ctx, d)
				if err != nil {
					t.Fatal(err)
				}
				p = sortOut(t, out)
				if !p.end || len(p.calls) != 1 || p.calls[0].Tool != "write" || p.calls[0].Error == nil ||
					!strings.Contains(p.calls[0].Error.Message, tt.wantErr) || len(p.outputs) != 0 || len(p.watches) != 0 {
					t.Fatalf("the bad chunk: %+v", p)
				}
			}
			// Chunks after the end change nothing.
			out, err = s.Chunk(ctx, chunk(r, 3, "<tool_call>", true, nil))
			if err != nil || len(out) != 0 {
				t.Fatalf("a chunk after the end: %v %v", out, err)
			}
		})
	}
	// Without calls, the output at once.
	s := &Stage{Catalog: cat, Texts: TextStore{KV: kv}, Streams: &ordertest.Streams{}, StreamIdle: time.Hour, MaxChunks: 50}
	d := chunk("lone", 1, "hello", false, map[string]string{messages.HeaderFinal: "perhaps"})
	out, err := s.Chunk(ctx, d)
	p := sortOut(t, out)
	if err != nil || len(p.outputs) != 1 || len(p.outputs[0].Results) != 1 || p.outputs[0].Results[0].Error == nil ||
		!strings.Contains(p.outputs[0].Results[0].Error.Message, `"perhaps"`) {
		t.Fatalf("a lone bad chunk: %+v %v", p, err)
	}
	// Toolbus-Final: 1 is the last chunk.
	out, err = s.Chunk(ctx, chunk("one", 1, "hello", false, map[string]string{messages.HeaderFinal: "1"}))
	if p := sortOut(t, out); err != nil || len(p.outputs) != 1 || p.outputs[0].Kind != messages.KindNoToolCall {
		t.Fatalf("Toolbus-Final 1: %+v %v", p, err)
	}
}

// The watch of a response is handed back while chunks come; once none came for the
// idle timeout, it ends the response with a timeout error that says so, and answers it
// as a chunk would; its last delivery passes it on to its next generation.
func TestWatchEndsIdleResponse(t *testing.T) {
	kv := gatherKV(t)
	cat := NewCatalog()
	cat.Set("local", []catalog.Tool{{Name: "read", ReadOnly: true}, {Name: "write"}})
	ctx := context.Background()
	const idle = 300 * time.Millisecond
	s := &Stage{Catalog: cat, Texts: TextStore{KV: kv}, Streams: &ordertest.Streams{}, StreamIdle: idle}
	text := `<tool_call>{"name": "read", "arguments": {}}</tool_call><tool_call>{"name": "write", "arguments": {}}</tool_call> and `
	out, err := s.Chunk(ctx, chunk("w", 1, text, false, map[string]string{messages.HeaderReasoning: "tagged"}))
	p := sortOut(t, out)
	if err != nil || len(p.watches) != 1 {
		t.Fatalf("chunk 1: %+v %v", p, err)
	}
	// Its redelivery publishes the watch again (its first publish may have failed).
	again := chunk("w", 1, text, false, map[string]string{messages.HeaderReasoning: "tagged"})
	again.Delivered = 2
	if out, err := s.Chunk(ctx, again); err != nil || len(sortOut(t, out).watches) != 1 {
		t.Fatalf("chunk 1 again: %+v %v", sortOut(t, out), err)
	}
	watch := &bus.Delivery{Subject: p.watches[0].Subject, Header: p.watches[0].Meta.Header(), Meta: p.watches[0].Meta, Delivered: 1}
	watch.Meta.Conversation = "c"
	out, err = s.Chunk(ctx, watch)
	var retry *bus.RetryError
	if !errors.As(err, &retry) || retry.Delay <= 0 || retry.Delay > idle || len(out) != 0 {
		t.Fatalf("the watch of a live response: %v %v", out, err)
	}
	// Chunks go on arriving: no watch again.
	out, err = s.Chunk(ctx, chunk("w", 2, "x", false, nil))
	if p := sortOut(t, out); err != nil || len(p.watches) != 0 {
		t.Fatalf("chunk 2: %+v %v", p, err)
	}
	// Its last delivery: the next generation.
	last := *watch
	last.Last = true
	out, err = s.Chunk(ctx, &last)
	if err != nil || len(out) != 1 || out[0].Meta.MsgID != "c/w/watch/2" || out[0].Subject != messages.StreamSubject("c") {
		t.Fatalf("the last delivery of the watch: %+v %v", out, err)
	}
	time.Sleep(idle) // no chunk for the idle timeout
	for {
		out, err = s.Chunk(ctx, watch)
		if errors.As(err, &retry) {
			time.Sleep(retry.Delay) // a write may have refreshed it
			continue
		}
		break
	}
	p = sortOut(t, out)
	if err != nil || !p.end || len(p.calls) != 1 || p.calls[0].Tool != "write" || p.calls[0].Error == nil || p.calls[0].Error.Code != messages.CodeTimeout ||
		!strings.Contains(p.calls[0].Error.Message, "never finished") || !strings.Contains(p.calls[0].Error.Message, "after chunk 2") {
		t.Fatalf("the watch of an idle response: %+v %v", p, err)
	}
	// A chunk after the timeout changes nothing; the watch is done.
	if out, err := s.Chunk(ctx, chunk("w", 3, "y", true, nil)); err != nil || len(out) != 0 {
		t.Fatalf("a chunk after the timeout: %v %v", out, err)
	}
	// Chunk 2 alone: answered after the timeout, saying chunk 1 never came.
	out, err = s.Chunk(ctx, chunk("two", 2, "x", true, nil))
	p = sortOut(t, out)
	if err != nil || len(p.watches) != 1 {
		t.Fatalf("chunk 2 alone: %+v %v", p, err)
	}
	watch = &bus.Delivery{Subject: p.watches[0].Subject, Header: p.watches[0].Meta.Header(), Meta: p.watches[0].Meta, Delivered: 1}
	watch.Meta.Conversation = "c"
	time.Sleep(idle)
	for {
		out, err = s.Chunk(ctx, watch)
		if errors.As(err, &retry) {
			time.Sleep(retry.Delay)
			continue
		}
		break
	}
	p = sortOut(t, out)
	if err != nil || len(p.outputs) != 1 || len(p.outputs[0].Results) != 1 || p.outputs[0].Results[0].Error == nil ||
		p.outputs[0].Results[0].Error.Code != messages.CodeTimeout || !strings.Contains(p.outputs[0].Results[0].Error.Message, "chunk 1 never came") {
		t.Fatalf("the watch of chunk 2 alone: %+v %v", p, err)
	}
}
