package toolbus_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/parser"
	"github.com/toolbus/toolbus/pkg/toolbus"
)

// streamEndBus is every stage on a fresh embedded NATS with the journal's tools and
// parser settings (JSON), a client, and a connection to publish chunks by hand.
type streamEndBus struct {
	c      *client.Client
	js     jetstream.JetStream
	gather jetstream.KeyValue
}

func startStreamEnd(t *testing.T, parser string) *streamEndBus {
	t.Helper()
	var j journal
	cfg := mcpConfig(t, `{"engineering": {"enabled": false}, "parser": `+parser+`}`)
	url := bustest.Server(t)
	connect := func(name string) *nats.Conn {
		nc, _ := bustest.Connect(t, url, nats.Name(name))
		return nc
	}
	startEach(t, connect, toolbus.Options{Config: cfg, Tools: journalTools(t, &j)}, toolbus.Parser, toolbus.Executor, toolbus.Formatter)
	c, err := client.New(connect("orchestrator"))
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(connect("chunks"))
	if err != nil {
		t.Fatal(err)
	}
	gather, err := js.KeyValue(context.Background(), messages.BucketGather)
	if err != nil {
		t.Fatal(err)
	}
	return &streamEndBus{c: c, js: js, gather: gather}
}

// chunk is one chunk as an orchestrator without toolbus's client might publish it:
// header values exactly as given ("" leaves a header out).
type rawChunk struct{ n, final, text string }

func (b *streamEndBus) publish(ctx context.Context, t *testing.T, conv, id string, chunks ...rawChunk) {
	t.Helper()
	for i, ch := range chunks {
		msg := nats.NewMsg(messages.StreamSubject(conv))
		msg.Header.Set(messages.HeaderResponseID, id)
		msg.Header.Set(messages.HeaderReasoning, "tagged")
		msg.Header.Set(messages.HeaderMsgID, fmt.Sprintf("%s/%s/raw/%d", conv, id, i))
		if ch.n != "" {
			msg.Header.Set(messages.HeaderChunk, ch.n)
		}
		if ch.final != "" {
			msg.Header.Set(messages.HeaderFinal, ch.final)
		}
		msg.Data = []byte(ch.text)
		if _, err := b.js.PublishMsg(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
}

// outputsOf counts the outputs the output stream holds for each response of conv.
func (b *streamEndBus) outputsOf(ctx context.Context, t *testing.T, conv string) map[string]int {
	t.Helper()
	cons, err := b.js.OrderedConsumer(ctx, messages.StreamOutput, jetstream.OrderedConsumerConfig{FilterSubjects: []string{messages.OutputSubject(conv)}})
	if err != nil {
		t.Fatal(err)
	}
	info, err := b.js.Stream(ctx, messages.StreamOutput)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for pending := info.CachedInfo().State.Msgs; pending > 0; {
		batch, err := cons.Fetch(int(min(pending, 256)), jetstream.FetchMaxWait(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for m := range batch.Messages() {
			counts[m.Headers().Get(messages.HeaderResponseID)]++
			got++
		}
		if got == 0 {
			break
		}
		pending -= uint64(min(uint64(got), pending))
	}
	return counts
}

// keysLeft waits until the gather bucket holds no key of the responses but their
// answered marks (a response's keys go once its output is stored, which the client may
// see a moment earlier), and fails naming what stayed.
func (b *streamEndBus) keysLeft(ctx context.Context, t *testing.T, conv string, ids []string) {
	t.Helper()
	want := map[string]bool{}
	for _, id := range ids {
		want[messages.ScopedID(conv, id)] = true
	}
	var extra []string
	for {
		extra = extra[:0]
		marks := 0
		keys, err := b.gather.ListKeys(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for k := range keys.Keys() {
			if !strings.HasPrefix(k, conv+"/") {
				continue
			}
			if want[k] {
				marks++
				continue
			}
			extra = append(extra, k)
		}
		if len(extra) == 0 && marks == len(want) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the gather bucket holds %d answered marks of %d responses and %d other keys: %v", marks, len(want), len(extra), extra[:min(len(extra), 20)])
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Every streamed response ends: one without its final chunk, or with only a later
// chunk, is answered once the idle timeout passed without a chunk, saying it never
// finished; one whose chunk cannot be taken (an unreadable final mark or number, a
// number past the limit) is answered with that error at once; "Toolbus-Final: 1" ends
// a response as "true" does. The calls released before the end ran; every response
// has one output, and leaves nothing in the gather bucket but the mark that it is
// answered.
func TestStreamsAlwaysEnd(t *testing.T) {
	t.Parallel() // waits mostly (the idle timeout)
	b := startStreamEnd(t, `{"reasoning": "tagged", "stream_idle_timeout": "1s", "stream_max_chunks": 1000}`)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	read := func(text string) string {
		return `<tool_call>{"name": "note_read", "arguments": {"conv": "se", "text": "` + text + `"}}</tool_call> `
	}
	type want struct {
		code    messages.ErrorCode // the last result's error; "" for none
		says    string
		results int
	}
	cases := []struct {
		name   string
		chunks []rawChunk
		want   want
	}{
		{"no final chunk", []rawChunk{{n: "1", text: read("a") + "and then"}, {n: "2", text: " some more"}},
			want{messages.CodeTimeout, "no chunk came for 1s after chunk 2", 2}},
		{"lone chunk 2^63-1 marked final", []rawChunk{{n: "9223372036854775807", final: "true", text: read("b")}},
			want{messages.CodeParseError, "past the limit of 1000 chunks", 1}},
		{"Toolbus-Final 1", []rawChunk{{n: "1", text: read("c")}, {n: "2", final: "1", text: "done"}},
			want{"", "", 1}},
		{"final YES", []rawChunk{{n: "1", final: "YES", text: read("d")}},
			want{"", "", 1}},
		{"final garbage", []rawChunk{{n: "1", text: read("e")}, {n: "2", final: "sure", text: read("not-read")}},
			want{messages.CodeParseError, `Toolbus-Final "sure"`, 2}},
		{"chunk 2 alone", []rawChunk{{n: "2", final: "true", text: read("f")}},
			want{messages.CodeTimeout, "chunk 1 never came", 1}},
		{"chunk number garbage", []rawChunk{{n: "second", text: read("g")}},
			want{messages.CodeParseError, `Toolbus-Chunk "second"`, 1}},
		{"final garbage before its predecessor", []rawChunk{{n: "3", final: "no way", text: read("not-read")}, {n: "2", text: " then "}, {n: "1", text: read("i")}},
			want{messages.CodeParseError, `Toolbus-Final "no way"`, 2}},
		{"no chunk number", []rawChunk{{text: read("h")}},
			want{messages.CodeParseError, "no Toolbus-Chunk header", 1}},
	}
	var ids []string
	var wg sync.WaitGroup
	for i, tc := range cases {
		id := "se-" + strconv.Itoa(i)
		ids = append(ids, id)
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.publish(ctx, t, "se", id, tc.chunks...)
			out, err := b.c.Wait(ctx, "se", id)
			if err != nil {
				t.Errorf("%s: no output: %v", tc.name, err)
				return
			}
			if len(out.Results) != tc.want.results {
				t.Errorf("%s: %d results, want %d: %s", tc.name, len(out.Results), tc.want.results, out.Text)
				return
			}
			last := out.Results[len(out.Results)-1]
			switch {
			case tc.want.code == "" && !last.Success:
				t.Errorf("%s: %+v", tc.name, last.Error)
			case tc.want.code != "" && (last.Success || last.Error.Code != tc.want.code || !strings.Contains(last.Error.Message, tc.want.says)):
				t.Errorf("%s: last result %+v, want %s saying %q", tc.name, last.Error, tc.want.code, tc.want.says)
			}
			for _, r := range out.Results[:len(out.Results)-1] {
				if !r.Success || r.Tool != "note_read" {
					t.Errorf("%s: a call released before the end: %+v", tc.name, r)
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	// Chunks after the end change nothing.
	b.publish(ctx, t, "se", ids[0], rawChunk{n: "3", final: "true", text: read("late")})
	b.keysLeft(ctx, t, "se", ids)
	for id, n := range b.outputsOf(ctx, t, "se") {
		if n != 1 {
			t.Errorf("%s has %d outputs", id, n)
		}
	}
}

// A response of many one-byte chunks, published as fast as they go so that the parser
// takes them out of order, is read whole under the chunk limit and ended with a
// parse_error past it; either way it has exactly one output, and leaves nothing in the
// gather bucket but its answered mark, however many chunks waited for a predecessor.
//
// TOOLBUS_LONG=1 sends 100,000 chunks against the default limit.
func TestStreamManyChunks(t *testing.T) {
	t.Parallel()
	limit, over, settings := 500, 700, `, "stream_max_chunks": 500`
	if os.Getenv("TOOLBUS_LONG") != "" {
		limit, over, settings = parser.DefaultMaxChunks, 100_000, ""
	}
	b := startStreamEnd(t, `{"reasoning": "tagged", "stream_idle_timeout": "5s"`+settings+`}`)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	call := `<tool_call>{"name": "note_read", "arguments": {"conv": "many", "text": "m"}}</tool_call>`
	for _, tc := range []struct {
		id     string
		chunks int
		over   bool
	}{{"under", limit - 50, false}, {"over", over, true}} {
		text := call + strings.Repeat(" ", tc.chunks-len(call))
		futures := make([]jetstream.PubAckFuture, 0, tc.chunks)
		for i := range tc.chunks {
			msg := nats.NewMsg(messages.StreamSubject("many"))
			msg.Header.Set(messages.HeaderResponseID, tc.id)
			msg.Header.Set(messages.HeaderReasoning, "tagged")
			msg.Header.Set(messages.HeaderChunk, strconv.Itoa(i+1))
			if i == tc.chunks-1 {
				msg.Header.Set(messages.HeaderFinal, "true")
			}
			msg.Data = []byte{text[i]}
			f, err := b.js.PublishMsgAsync(msg)
			if err != nil {
				t.Fatal(err)
			}
			futures = append(futures, f)
		}
		for _, f := range futures {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				t.Fatal(err)
			case <-ctx.Done():
				t.Fatal("chunks not stored")
			}
		}
		out, err := b.c.Wait(ctx, "many", tc.id)
		if err != nil {
			t.Fatalf("%s: %v", tc.id, err)
		}
		if tc.over {
			if len(out.Results) != 2 || !out.Results[0].Success || out.Results[1].Error == nil ||
				!strings.Contains(out.Results[1].Error.Message, fmt.Sprintf("past the limit of %d chunks", limit)) {
				t.Errorf("%s: %s", tc.id, out.Text)
			}
		} else if len(out.Results) != 1 || !out.Results[0].Success {
			t.Errorf("%s: %s", tc.id, out.Text)
		}
	}
	b.keysLeft(ctx, t, "many", []string{"under", "over"})
	if counts := b.outputsOf(ctx, t, "many"); counts["under"] != 1 || counts["over"] != 1 || len(counts) != 2 {
		t.Errorf("outputs %v, want one each", counts)
	}
}
