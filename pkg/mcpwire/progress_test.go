package mcpwire_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/toolbus/toolbus/pkg/mcpwire"
	"github.com/toolbus/toolbus/pkg/messages"
)

// server-everything's trigger-long-running-operation reports each step of the call as
// notifications/progress, when the request carries a progressToken: Options.Progress
// gets them with the call's id, over stdio and over streamable HTTP (toolbus's own
// tools/call).
func TestProgressOfACall(t *testing.T) {
	index := filepath.Join(npmPackage(t, everythingPkg), "dist", "index.js")
	for _, tt := range []struct {
		name   string
		config func(t *testing.T) mcpwire.ServerConfig
	}{
		{name: "stdio", config: func(*testing.T) mcpwire.ServerConfig {
			return mcpwire.ServerConfig{Command: "node", Args: []string{index, "stdio"}}
		}},
		{name: "streamable http", config: func(t *testing.T) mcpwire.ServerConfig {
			return mcpwire.ServerConfig{Type: "http", URL: everythingURL(t, "streamableHttp") + "/mcp"}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var got []messages.CallProgress
			p := newPool(t, map[string]mcpwire.ServerConfig{"everything": tt.config(t)}, &mcpwire.Options{
				Progress: func(ctx context.Context, p messages.CallProgress) {
					mu.Lock()
					got = append(got, p)
					mu.Unlock()
				}})
			ctx := mcpwire.WithCall(mcpwire.WithConversation(ctxT(t), "c1"), "c1/r1/0")
			if _, err := p.Call(ctx, "trigger-long-running-operation", json.RawMessage(`{"duration":0.6,"steps":3}`)); err != nil {
				t.Fatal(err)
			}
			// A call without an id asks for no progress.
			if _, err := p.Call(mcpwire.WithConversation(ctxT(t), "c1"), "trigger-long-running-operation", json.RawMessage(`{"duration":0.2,"steps":2}`)); err != nil {
				t.Fatal(err)
			}
			// The last step may be handed on just after the call returned.
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				mu.Lock()
				n := len(got)
				mu.Unlock()
				if n >= 3 {
					break
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if len(got) != 3 {
				t.Fatalf("%d progress notifications, want 3: %+v", len(got), got)
			}
			for i, g := range got {
				want := messages.CallProgress{CallID: "c1/r1/0", Conversation: "c1", Server: "everything", Tool: "everything__trigger-long-running-operation",
					Progress: float64(i + 1), Total: 3, Message: g.Message}
				if g != want {
					t.Errorf("progress %d = %+v, want %+v", i, g, want)
				}
			}
		})
	}
}
