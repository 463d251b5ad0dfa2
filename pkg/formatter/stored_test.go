package formatter

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/results"
)

// storedBus starts an embedded JetStream with toolbus's buckets and returns the results
// object store, the gather bucket and the stream's last sequence of the results (every
// write moves it on).
func storedBus(t *testing.T) (*results.Store, KVGatherer, jetstream.JetStream, func() uint64) {
	t.Helper()
	_, js := bustest.Provisioned(t)
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, messages.BucketGather)
	if err != nil {
		t.Fatal(err)
	}
	writes := func() uint64 {
		t.Helper()
		s, err := js.Stream(ctx, "OBJ_"+messages.BucketResults)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.LastSeq
	}
	return results.NewStore(js), NewKVGatherer(kv), js, writes
}

// sized is result i of n of response id in conversation, of size bytes of JSON string.
func sized(conversation, id string, i, n, size int) messages.ToolResult {
	return messages.ToolResult{CallID: messages.CallID(conversation, id, i), ResponseID: id, Conversation: conversation, Index: i, Count: n,
		Tool: "report", Success: true, Result: json.RawMessage(`"` + strings.Repeat(string(rune('a'+i%26)), size-2) + `"`)}
}

// output formats rs, in order, and returns the output the last one completes, its
// results filled from its text.
func output(t *testing.T, s *Stage, rs ...messages.ToolResult) (messages.Output, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out []bus.Outgoing
	for i, r := range rs {
		var err error
		if out, err = s.Format(ctx, r, &bus.Delivery{Delivered: 1}); err != nil {
			t.Fatalf("result %d: %v", i, err)
		}
	}
	if len(out) != 1 {
		t.Fatalf("%d outputs, want 1", len(out))
	}
	var o messages.Output
	if err := messages.DecodeOutput(out[0].Body, &o); err != nil {
		t.Fatal(err)
	}
	if err := o.FillResults(); err != nil {
		t.Fatal(err)
	}
	return o, out[0].Body
}

// A response whose results together would not fit one output message is answered with
// every result that does not fit its share stored whole, named by its call id, and a
// preview naming it in the output; the output fits the limit, and each stored result is
// fetched back whole. Results that fit travel inline.
func TestFormatStoresWhatItCuts(t *testing.T) {
	const limit = 256 << 10
	tests := []struct {
		name  string
		sizes []int
		// wantStored[i]: result i is stored (it is over its share).
		wantStored []bool
	}{
		{name: "one result over the limit", sizes: []int{600_000}, wantStored: []bool{true}},
		{name: "three results over the limit together", sizes: []int{200_000, 200_000, 200_000}, wantStored: []bool{true, true, true}},
		{name: "gathered results that would not fit one bucket value together", sizes: []int{900_000, 900_000, 900_000}, wantStored: []bool{true, true, true}},
		{name: "a small result among large ones travels inline", sizes: []int{300, 500_000, 900_000}, wantStored: []bool{false, true, true}},
		{name: "within the limit together: nothing stored", sizes: []int{40_000, 40_000}, wantStored: []bool{false, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store, gather, js, writes := storedBus(t)
			s := &Stage{Gather: gather, Results: store, MaxOutputBytes: limit}
			var in []messages.ToolResult
			for i, size := range tt.sizes {
				in = append(in, sized("c1", "turn-3", i, len(tt.sizes), size))
			}
			o, body := output(t, s, in...)
			if len(body) > limit {
				t.Errorf("the output is %d bytes, over the limit %d", len(body), limit)
			}
			if len(o.Results) != len(in) {
				t.Fatalf("%d results, want %d", len(o.Results), len(in))
			}
			stored := 0
			for i, r := range o.Results {
				if !tt.wantStored[i] {
					if r.Stored != nil || !bytes.Equal(r.Result, in[i].Result) {
						t.Errorf("result %d: stored %+v, %d bytes; want the whole %d inline", i, r.Stored, len(r.Result), len(in[i].Result))
					}
					continue
				}
				stored++
				if r.Stored == nil || r.Stored.Name != in[i].CallID || r.Stored.Bucket != messages.BucketResults || r.Stored.Size != len(in[i].Result) {
					t.Fatalf("result %d: stored %+v, want it named %q", i, r.Stored, in[i].CallID)
				}
				var p struct {
					Truncated bool   `json:"truncated"`
					Size      int    `json:"size"`
					SHA256    string `json:"sha256"`
				}
				if err := json.Unmarshal(r.Result, &p); err != nil || !p.Truncated || p.Size != r.Stored.Size || p.SHA256 != r.Stored.SHA256 {
					t.Errorf("result %d: preview %+v (%v) does not name %+v", i, p, err, r.Stored)
				}
				whole, err := results.Fetch(context.Background(), js, r.Stored)
				if err != nil || !bytes.Equal(whole, in[i].Result) {
					t.Errorf("result %d: fetched %d bytes (%v), want the whole %d", i, len(whole), err, len(in[i].Result))
				}
			}
			if stored == 0 && writes() != 0 {
				t.Errorf("nothing was cut, but the results bucket was written %d times", writes())
			}
		})
	}
}

// A result the executor stored already travels as its preview, cut shorter when its
// share is smaller, and is not stored again; a redelivered result stores nothing new and
// gives the same output.
func TestFormatStoresOnce(t *testing.T) {
	store, gather, js, writes := storedBus(t)
	ctx := context.Background()
	// As the executor stores a result over its inline limit (64 KiB).
	kept, err := store.Fit(ctx, sized("c1", "turn-3", 0, 8, 300_000), 64<<10)
	if err != nil || kept.Stored == nil {
		t.Fatalf("the executor's store: %+v, %v", kept.Stored, err)
	}
	afterExecutor := writes()
	s := &Stage{Gather: gather, Results: store, MaxOutputBytes: 256 << 10}
	in := []messages.ToolResult{kept}
	for i := 1; i < 8; i++ {
		in = append(in, sized("c1", "turn-3", i, 8, 20_000))
	}
	o, body := output(t, s, in...)
	if len(o.Results[0].Result) >= len(kept.Result) || o.Results[0].Stored == nil || *o.Results[0].Stored != *kept.Stored {
		t.Errorf("the stored result: a preview of %d bytes naming %+v; want shorter than %d, naming %+v",
			len(o.Results[0].Result), o.Results[0].Stored, len(kept.Result), kept.Stored)
	}
	if whole, err := results.Fetch(ctx, js, o.Results[0].Stored); err != nil || len(whole) != 300_000 {
		t.Errorf("fetched %d bytes (%v), want the whole 300000", len(whole), err)
	}
	for i, r := range o.Results[1:] {
		if r.Stored != nil || !bytes.Equal(r.Result, in[i+1].Result) {
			t.Errorf("result %d: stored %+v; want it inline, within its share", i+1, r.Stored)
		}
	}
	written := writes()
	if written != afterExecutor {
		t.Errorf("the formatter wrote %d messages to the results bucket for a result stored already", written-afterExecutor)
	}

	// The last result again, as a lost ack redelivers it.
	again, body2 := output(t, s, in[7])
	if writes() != written {
		t.Errorf("a redelivered result wrote %d messages to the results bucket, want none", writes()-written)
	}
	if !bytes.Equal(body, body2) || len(again.Results) != 8 {
		t.Errorf("a redelivered result gives another output")
	}
}
