package mcpwire_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolbus/toolbus/pkg/mcpwire"
)

// A server's declared tools stay known while it is down, from the start: a call of one
// by its bare name finds the server and fails as unreachable, naming it — the model is
// never told the tool does not exist.
func TestDeclaredToolsKnownWhileTheServerIsDown(t *testing.T) {
	var cfg map[string]mcpwire.ServerConfig
	if err := json.Unmarshal([]byte(`{"weather": {"type": "sse", "url": "http://127.0.0.1:1/sse",
		"tools": [{"name": "get_weather", "input_schema": {"type": "object"}}]}}`), &cfg); err != nil {
		t.Fatal(err)
	}
	pool, err := mcpwire.NewPool(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tool, err := pool.Lookup(ctx, "get_weather")
	if err != nil || tool.Server != "weather" {
		t.Fatalf("get_weather while its server is down: %+v, %v", tool, err)
	}
	_, err = pool.CallTool(ctx, tool, json.RawMessage(`{}`))
	if !errors.Is(err, mcpwire.ErrUnavailable) || !strings.Contains(err.Error(), "weather") {
		t.Fatalf("calling it: %v, want unavailable naming the server", err)
	}
}
