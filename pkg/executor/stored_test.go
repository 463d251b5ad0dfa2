package executor

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/claims/claimstest"
	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/mcpwire"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/results"
)

// resultsBucket starts an embedded JetStream with toolbus's buckets and returns the
// results object store.
func resultsBucket(t *testing.T) (*results.Store, jetstream.JetStream) {
	t.Helper()
	_, js := bustest.Provisioned(t)
	return results.NewStore(js), js
}

// bigServer is a go-sdk MCP server, in process, whose read-only tool "export" answers
// with a structured result of n bytes of text.
func bigServer(t *testing.T, n int) *mcpwire.Pool {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "exports"}, nil)
	srv.AddTool(&mcp.Tool{Name: "export", InputSchema: map[string]any{"type": "object"}, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{StructuredContent: map[string]string{"text": strings.Repeat("m", n)}}, nil
		})
	p, err := mcpwire.NewPool(map[string]mcpwire.ServerConfig{"exports": {Command: "in-memory"}}, &mcpwire.Options{
		Dial: func(ctx context.Context, _ string) (mcp.Transport, error) {
			ct, st := mcp.NewInMemoryTransports()
			_, err := srv.Connect(ctx, st, nil)
			return ct, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// A result too large to travel inline is stored whole in the results bucket, named by
// its call id, and the answer carries a preview that names it and fits the inline limit;
// the tool runs once, and a redelivery answers the same reference. Without a store, or
// when storing fails, the answer is a preview that does not claim the result was kept.
func TestLargeResultsAreStoredWhole(t *testing.T) {
	const limit = 16 << 10
	const size = 300_000
	var runs atomic.Int32
	reg := localtools.New()
	reg.Add(localtools.Tool{Info: messages.ToolInfo{Name: "report"}, Run: func(_ context.Context, args json.RawMessage) (json.RawMessage, error) {
		runs.Add(1)
		var a struct {
			Bytes int    `json:"bytes"`
			Fill  string `json:"fill"`
		}
		if err := json.Unmarshal(args, &a); err != nil {
			return nil, err
		}
		return json.Marshal(strings.Repeat(a.Fill, a.Bytes))
	}})
	pool := bigServer(t, size)
	store, js := resultsBucket(t)
	gone, goneJS := resultsBucket(t) // a bucket deleted under the executor: storing fails
	if err := goneJS.DeleteObjectStore(context.Background(), messages.BucketResults); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name         string
		conversation string
		tool         string
		args         string
		store        results.Fitter
		wantStored   bool
		wantInline   bool
		// want: the whole result (checked against what is stored, or the preview's size).
		want func(b []byte) bool
	}{
		{name: "a local tool's large result", conversation: "alice", tool: "report", args: `{"bytes": 300000, "fill": "a"}`, store: store, wantStored: true,
			want: func(b []byte) bool { return len(b) == size+2 && bytes.Count(b, []byte("a")) == size }},
		{name: "the same response id in another conversation is another object", conversation: "bob", tool: "report", args: `{"bytes": 300000, "fill": "b"}`,
			store: store, wantStored: true, want: func(b []byte) bool { return len(b) == size+2 && bytes.Count(b, []byte("b")) == size }},
		{name: "an MCP server's large result", conversation: "erin", tool: "exports__export", args: `{}`, store: store, wantStored: true,
			want: func(b []byte) bool { return bytes.Contains(b, []byte(strings.Repeat("m", size))) }},
		{name: "within the limit: inline", conversation: "alice", tool: "report", args: `{"bytes": 1000, "fill": "i"}`, store: store, wantInline: true,
			want: func(b []byte) bool { return len(b) == 1002 }},
		{name: "no store: a preview only", conversation: "carol", tool: "report", args: `{"bytes": 300000, "fill": "c"}`,
			want: func(b []byte) bool { return len(b) == size+2 }},
		{name: "the store fails: a preview only, answered", conversation: "dave", tool: "report", args: `{"bytes": 300000, "fill": "d"}`, store: gone,
			want: func(b []byte) bool { return len(b) == size+2 }},
	}
	type kept struct {
		name  string
		ref   *messages.StoredResult
		whole func([]byte) bool
	}
	var all []kept
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			s := &Stage{Claims: &claimstest.Memory{}, MaxInlineResultBytes: limit, Results: tt.store, StoreWait: 200 * time.Millisecond,
				Exec: &Executor{Router: NewRouter(LocalBackend{Registry: reg}, MCPBackend{Pool: pool})}}
			call := messages.ToolCall{ID: messages.CallID(tt.conversation, "turn-3", 0), ResponseID: "turn-3", Conversation: tt.conversation, Count: 1,
				Tool: tt.tool, Arguments: json.RawMessage(tt.args)}
			before := runs.Load()
			answer := func(delivered int) messages.ToolResult {
				t.Helper()
				out, err := deliver(s, ctx, call, &bus.Delivery{Delivered: delivered})
				if err != nil || len(out) != 1 {
					t.Fatalf("delivery %d: %d messages, %v", delivered, len(out), err)
				}
				if len(out[0].Body) > limit+2048 {
					t.Errorf("delivery %d: the answer is %d bytes, over the inline limit %d", delivered, len(out[0].Body), limit)
				}
				var res messages.ToolResult
				if err := json.Unmarshal(out[0].Body, &res); err != nil {
					t.Fatal(err)
				}
				if !res.Success {
					t.Fatalf("delivery %d: %+v", delivered, res.Error)
				}
				return res
			}
			res := answer(1)
			if tt.wantInline {
				if res.Stored != nil || !tt.want(res.Result) {
					t.Errorf("stored %+v, %d bytes inline; want the whole result inline", res.Stored, len(res.Result))
				}
				return
			}
			var p struct {
				Truncated bool   `json:"truncated"`
				Size      int    `json:"size"`
				SHA256    string `json:"sha256"`
				Note      string `json:"note"`
			}
			if err := json.Unmarshal(res.Result, &p); err != nil || !p.Truncated {
				t.Fatalf("the answer is not a preview (%v): %.200s", err, res.Result)
			}
			if kept := strings.Contains(p.Note, "kept"); kept != tt.wantStored {
				t.Errorf("the note %q says kept: %v, want %v", p.Note, kept, tt.wantStored)
			}
			if !tt.wantStored {
				if res.Stored != nil || !tt.want(make([]byte, p.Size)) {
					t.Errorf("stored %+v, preview of %d bytes; want a preview of the whole, nothing stored", res.Stored, p.Size)
				}
				return
			}
			if res.Stored == nil || res.Stored.Bucket != messages.BucketResults || res.Stored.Name != call.ID ||
				res.Stored.Size != p.Size || res.Stored.SHA256 != p.SHA256 {
				t.Fatalf("stored %+v, preview of %d bytes %s; want it named %q in %s", res.Stored, p.Size, p.SHA256, call.ID, messages.BucketResults)
			}
			whole, err := results.Fetch(ctx, js, res.Stored)
			if err != nil || !tt.want(whole) {
				t.Fatalf("fetched %d bytes (%v), not the whole result", len(whole), err)
			}
			if sum := sha256.Sum256(whole); hex.EncodeToString(sum[:]) != res.Stored.SHA256 {
				t.Errorf("the stored result's sha256 is not the reference's")
			}
			all = append(all, kept{tt.name, res.Stored, tt.want})
			if tt.tool == "report" {
				// Claimed (side effects): a redelivery answers the same reference, runs
				// nothing.
				again := answer(2)
				if again.Stored == nil || *again.Stored != *res.Stored || !bytes.Equal(again.Result, res.Result) {
					t.Errorf("redelivery: stored %+v, want %+v", again.Stored, res.Stored)
				}
				if n := runs.Load() - before; n != 1 {
					t.Errorf("the tool ran %d times, want once", n)
				}
			}
		})
	} // Every result stored is still there, whole, after the others: none took another's name.
	for _, k := range all {
		whole, err := results.Fetch(context.Background(), js, k.ref)
		if err != nil || !k.whole(whole) {
			t.Errorf("%s: %s fetched at the end: %d bytes (%v), not its whole result", k.name, k.ref.Name, len(whole), err)
		}
	}
}
