package results_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
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

// store opens the results bucket of an embedded JetStream with toolbus's buckets.
func store(t *testing.T) (*results.Store, jetstream.JetStream) {
	t.Helper()
	_, js := bustest.Provisioned(t)
	return results.NewStore(js), js
}

// objects is the last sequence of the bucket's stream: every write moves it on (an
// object written again replaces its old chunks, so the count of messages need not).
func objects(t *testing.T, js jetstream.JetStream) uint64 {
	t.Helper()
	s, err := js.Stream(context.Background(), "OBJ_"+messages.BucketResults)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.LastSeq
}

type preview struct {
	Truncated bool   `json:"truncated"`
	Size      int    `json:"size"`
	SHA256    string `json:"sha256"`
	Preview   string `json:"preview"`
	Note      string `json:"note"`
}

func big(conversation string, n int) messages.ToolResult {
	return messages.ToolResult{CallID: messages.CallID(conversation, "turn-3", 1), ResponseID: "turn-3", Conversation: conversation,
		Index: 1, Count: 2, Tool: "report", Success: true, Result: json.RawMessage(`"` + strings.Repeat(conversation[:1], n-2) + `"`)}
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// What Fit does with each result: one within the limit, a failure, or any result when
// there is no limit travels as it is and stores nothing; a larger success is stored whole,
// named by its call id, and travels as a preview that names it and stays within about
// the limit.
func TestFit(t *testing.T) {
	failed := big("c1", 5000) // a failure carrying a large body: still not stored
	failed.Success, failed.Error = false, &messages.ResultError{Code: messages.CodeToolError, Message: "no"}
	tests := []struct {
		name       string
		r          messages.ToolResult
		max        int
		wantStored bool
	}{
		{name: "within the limit", r: big("c1", 100), max: 100},
		{name: "no limit", r: big("c1", 5000), max: 0},
		{name: "a failure is never stored", r: failed, max: 100},
		{name: "larger: stored whole", r: big("c1", 5000), max: 1000, wantStored: true},
		{name: "much larger: stored whole", r: big("c2", 3<<20), max: 64 << 10, wantStored: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, js := store(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			before := objects(t, js)
			got, err := s.Fit(ctx, tt.r, tt.max)
			if err != nil {
				t.Fatal(err)
			}
			if !tt.wantStored {
				if got.Stored != nil || !bytes.Equal(got.Result, tt.r.Result) || objects(t, js) != before {
					t.Errorf("stored %+v, result changed %v, %d objects written; want it as it was, nothing stored",
						got.Stored, !bytes.Equal(got.Result, tt.r.Result), objects(t, js)-before)
				}
				return
			}
			want := &messages.StoredResult{Bucket: messages.BucketResults, Name: tt.r.CallID, Size: len(tt.r.Result), SHA256: sum(tt.r.Result)}
			if got.Stored == nil || *got.Stored != *want {
				t.Fatalf("stored %+v, want %+v", got.Stored, want)
			}
			var p preview
			if err := json.Unmarshal(got.Result, &p); err != nil {
				t.Fatalf("the result is not a preview: %v: %.200s", err, got.Result)
			}
			if !p.Truncated || p.Size != want.Size || p.SHA256 != want.SHA256 || !strings.HasPrefix(string(tt.r.Result), p.Preview) ||
				p.Preview == "" || !strings.Contains(p.Note, "whole result is kept") {
				t.Errorf("preview %v, %d bytes, %s, first %.40q, note %q; want the preview of %+v", p.Truncated, p.Size, p.SHA256, p.Preview, p.Note, want)
			}
			if len(got.Result) > tt.max+256 {
				t.Errorf("the preview is %d bytes, over the limit %d", len(got.Result), tt.max)
			}
			whole, err := results.Fetch(ctx, js, got.Stored)
			if err != nil || !bytes.Equal(whole, tt.r.Result) {
				t.Errorf("fetched %d bytes (%v), want the whole %d", len(whole), err, len(tt.r.Result))
			}
			if got.CallID != tt.r.CallID || got.Tool != tt.r.Tool || !got.Success {
				t.Errorf("the result lost its address: %+v", got)
			}
		})
	}
}

// A redelivered result (the executor's answer redelivered, or the formatter fitting what
// the executor stored) is stored once: fitting it again writes nothing and answers the
// same; fitting the fitted result shorter cuts its preview and still names the whole.
func TestFitStoresOnce(t *testing.T) {
	s, js := store(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := big("c1", 200_000)
	first, err := s.Fit(ctx, r, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	written := objects(t, js)
	again, err := s.Fit(ctx, r, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	if n := objects(t, js); n != written {
		t.Errorf("storing again wrote %d messages, want none", n-written)
	}
	a, _ := json.Marshal(first)
	b, _ := json.Marshal(again)
	if !bytes.Equal(a, b) {
		t.Errorf("fitted twice differently:\n%.300s\n%.300s", a, b)
	}

	shorter, err := s.Fit(ctx, first, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if n := objects(t, js); n != written {
		t.Errorf("cutting a stored result's preview wrote %d messages, want none", n-written)
	}
	var p preview
	if err := json.Unmarshal(shorter.Result, &p); err != nil || len(shorter.Result) > 1000+256 || p.Size != len(r.Result) ||
		shorter.Stored == nil || *shorter.Stored != *first.Stored {
		t.Errorf("cut shorter: %d bytes, preview %+v (%v), stored %+v; want within the limit, naming %+v", len(shorter.Result), p.Size, err, shorter.Stored, first.Stored)
	}
}

// A stored object that is not the result (another result under its name: a read-only
// call run again) is never replaced, which would purge its chunks (no service may
// purge): the result is stored beside it, and both stay whole.
func TestFitNeverReplacesAnObject(t *testing.T) {
	s, js := store(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := big("c1", 5000)
	os, err := js.ObjectStore(ctx, messages.BucketResults)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.PutBytes(ctx, r.CallID, []byte(`"stale"`)); err != nil {
		t.Fatal(err)
	}
	got, err := s.Fit(ctx, r, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if got.Stored == nil || got.Stored.Name == r.CallID {
		t.Fatalf("stored as %+v, want beside %q", got.Stored, r.CallID)
	}
	whole, err := results.Fetch(ctx, js, got.Stored)
	if err != nil || !bytes.Equal(whole, r.Result) {
		t.Errorf("fetched %.40q (%v), want the whole result", whole, err)
	}
	if stale, err := os.GetBytes(ctx, r.CallID); err != nil || string(stale) != `"stale"` {
		t.Errorf("the object there before reads %q (%v), want it untouched", stale, err)
	}
	again, err := s.Fit(ctx, r, 1000)
	if err != nil || *again.Stored != *got.Stored {
		t.Errorf("fitted again: %+v (%v), want %+v", again.Stored, err, got.Stored)
	}
}

// A tenant's result is kept in the tenant's own bucket, which its orchestrator may read
// (and nobody else's); the default tenant's in toolbus_results.
func TestStoredInTheTenantsBucket(t *testing.T) {
	_, js := bustest.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := bus.Provision(ctx, js, bus.Topology{Memory: true, Tenants: []bus.Tenant{{Name: "acme"}}}); err != nil {
		t.Fatal(err)
	}
	s := results.NewStore(js)
	for conv, bucket := range map[string]string{"acme.c1": "toolbus_results_acme", "c1": messages.BucketResults} {
		got, err := s.Fit(ctx, big(conv, 5000), 1000)
		if err != nil {
			t.Fatal(err)
		}
		if got.Stored == nil || got.Stored.Bucket != bucket {
			t.Fatalf("%s: stored %+v, want in bucket %s", conv, got.Stored, bucket)
		}
		os, err := js.ObjectStore(ctx, bucket)
		if err != nil {
			t.Fatal(err)
		}
		if b, err := os.GetBytes(ctx, got.Stored.Name); err != nil || !bytes.Equal(b, big(conv, 5000).Result) {
			t.Errorf("%s: the bucket holds %d bytes (%v), want the whole result", conv, len(b), err)
		}
	}
}

// Stored results are named by call id, scoped by conversation: two conversations may
// both call a response turn-3, and each fetches its own result.
func TestStoredNamesAreScoped(t *testing.T) {
	s, js := store(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stored []*messages.StoredResult
	for _, conv := range []string{"alice", "bob"} {
		got, err := s.Fit(ctx, big(conv, 5000), 1000)
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, got.Stored)
	}
	if stored[0].Name == stored[1].Name {
		t.Fatalf("both conversations' results are named %q", stored[0].Name)
	}
	for i, conv := range []string{"alice", "bob"} {
		whole, err := results.Fetch(ctx, js, stored[i])
		if err != nil || !bytes.Equal(whole, big(conv, 5000).Result) {
			t.Errorf("%s fetched %.20q… (%v), want its own result", conv, whole, err)
		}
	}
}

// Fetch gives the whole result only when it is the one named: its size and sha256 are
// checked.
func TestFetch(t *testing.T) {
	s, js := store(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := big("c1", 5000)
	got, err := s.Fit(ctx, r, 1000)
	if err != nil {
		t.Fatal(err)
	}
	named := *got.Stored
	tests := []struct {
		name    string
		change  func(*messages.StoredResult)
		wantErr bool
	}{
		{name: "the stored result", change: func(*messages.StoredResult) {}},
		{name: "another size", change: func(s *messages.StoredResult) { s.Size-- }, wantErr: true},
		{name: "another sha256", change: func(s *messages.StoredResult) { s.SHA256 = sum([]byte("other")) }, wantErr: true},
		{name: "no such object", change: func(s *messages.StoredResult) { s.Name = "c1/turn-4/0" }, wantErr: true},
		{name: "no such bucket", change: func(s *messages.StoredResult) { s.Bucket = "nope" }, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sr := named
			tt.change(&sr)
			b, err := results.Fetch(ctx, js, &sr)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Fetch: %d bytes, %v; want error %v", len(b), err, tt.wantErr)
			}
			if !tt.wantErr && !bytes.Equal(b, r.Result) {
				t.Errorf("fetched %d bytes, want the whole %d", len(b), len(r.Result))
			}
		})
	}
}
