package dialect_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolbus/toolbus/internal/mcptest"
	"github.com/toolbus/toolbus/pkg/dialect"
	"github.com/toolbus/toolbus/pkg/messages"
)

// pngPixel is a 1×1 PNG, base64.
const pngPixel = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="

// turnCases are the results whose next turns testdata/turns holds, for each output
// dialect: <dialect>.<case>.json. examples/typescript's TestNativeTurnsTypeCheck checks
// those files against the vendors' SDKs.
var turnCases = []struct {
	name    string
	results []messages.ToolResult
}{
	{"success", []messages.ToolResult{
		{Tool: "geometry.solve_circle_area", ModelID: "call_area1", Success: true, Result: json.RawMessage(`{ "area": 78.54,
			"unit": "cm²", "note": "<r> & <π>" }`)},
		{Tool: "clock", ModelID: "call_clock2", Success: true, Result: json.RawMessage(`"12:00"`),
			Notice: "the call ran in a new session of its server: the state of the earlier one is lost"},
	}},
	{"failure", []messages.ToolResult{
		{Tool: "fetch", ModelID: "toolu_fetch1", Error: &messages.ResultError{Code: messages.CodeTimeout,
			Message: `the call took longer than 30s ("fetch" was cancelled)`}},
		{Tool: "echo", ModelID: "toolu_echo2", Success: true, Result: json.RawMessage(`["a",1,null]`)},
	}},
	{"image", []messages.ToolResult{
		{Tool: "screenshot", ModelID: "call_shot1", Success: true,
			Result: json.RawMessage(`"The page:\n[image: image/png, 70 bytes, content 1]\n[audio: audio/wav, 1.4 MB, content 2]\n[image: image/jpeg, 9.5 MB, content 3]"`),
			Content: []messages.Content{
				{Type: messages.ContentImage, MimeType: "image/png", Data: pngPixel, Size: 70},
				{Type: messages.ContentAudio, MimeType: "audio/wav", Size: 1_468_006,
					Stored: &messages.StoredResult{Bucket: "toolbus_results", Name: "c/r/0.content-2", Size: 1_468_006, SHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}},
				{Type: messages.ContentImage, MimeType: "image/jpeg", Size: 9_961_472, Omitted: true},
			}},
		{Tool: "count", ModelID: "call_count2", Success: true, Result: json.RawMessage(`3`)},
	}},
	{"stored", []messages.ToolResult{
		{Tool: "export", ModelID: "toolu_export1", Success: true,
			Result: json.RawMessage(`{"truncated":true,"size":1500002,"sha256":"2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae","preview":"{\"rows\":[[1,\"a\"],[2,\"b\"],","note":"the result is 1500002 bytes, more than toolbus passes on inline (65536); this is its first 32768 bytes; the whole result is kept, and the orchestrator can fetch it"}`),
			Stored: &messages.StoredResult{Bucket: "toolbus_results", Name: "conv/turn-6/0", Size: 1_500_002, SHA256: "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"}},
	}},
}

// TestTurnGolden writes every case's next turn in every output dialect, as
// testdata/turns holds it (go test -update rewrites the files).
func TestTurnGolden(t *testing.T) {
	for _, d := range dialect.OutputDialects() {
		for _, c := range turnCases {
			t.Run(string(d)+"/"+c.name, func(t *testing.T) {
				got, err := dialect.Turn(d, c.results)
				if err != nil {
					t.Fatal(err)
				}
				var pretty bytes.Buffer
				if err := json.Indent(&pretty, got, "", "  "); err != nil {
					t.Fatalf("%v: %s", err, got)
				}
				pretty.WriteByte('\n')
				mcptest.Golden(t, filepath.Join("testdata", "turns", string(d)+"."+c.name+".json"), pretty.Bytes(), *update)
			})
		}
	}
}

// answered is what a next turn says of one call, read back from the API's shape.
type answered struct {
	id      string
	failed  bool
	text    string // every text of the answer, with the JSON it holds
	gemini  json.RawMessage
	images  []string
	nameKey string // the tool's name, where the API answers by name
}

// readTurn reads back what turn (of dialect d) answers; images sent outside the
// answers (OpenAI's user message) are in extra.
func readTurn(t *testing.T, d dialect.Dialect, turn json.RawMessage) (out []answered, extra []string) {
	t.Helper()
	var list []map[string]any
	if err := json.Unmarshal(turn, &list); err != nil {
		t.Fatalf("not a JSON array of objects: %v: %s", err, turn)
	}
	str := func(v any) string { s, _ := v.(string); return s }
	arr := func(v any) []any { a, _ := v.([]any); return a }
	obj := func(v any) map[string]any { m, _ := v.(map[string]any); return m }
	jsonOf := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	texts := func(parts []any, key string) string {
		var b strings.Builder
		for _, p := range parts {
			if s := str(obj(p)[key]); s != "" {
				b.WriteString(s + "\n")
			}
		}
		return b.String()
	}
	one := func() map[string]any {
		if len(list) != 1 || list[0]["role"] != "user" {
			t.Fatalf("want one user message, got %s", turn)
		}
		return list[0]
	}
	switch d {
	case dialect.OpenAI:
		for _, m := range list {
			switch m["role"] {
			case "tool":
				a := answered{id: str(m["tool_call_id"]), text: str(m["content"])}
				if a.text == "" {
					a.text = texts(arr(m["content"]), "text")
				}
				out = append(out, a)
			case "user":
				for _, p := range arr(m["content"]) {
					if url := str(obj(obj(p)["image_url"])["url"]); url != "" {
						extra = append(extra, url)
					}
				}
			default:
				t.Fatalf("a message of role %v: %s", m["role"], turn)
			}
		}
	case dialect.OpenAIResponses:
		for _, m := range list {
			if m["type"] != "function_call_output" {
				t.Fatalf("an item of type %v: %s", m["type"], turn)
			}
			a := answered{id: str(m["call_id"]), text: str(m["output"])}
			for _, p := range arr(m["output"]) {
				a.text += str(obj(p)["text"]) + "\n"
				if url := str(obj(p)["image_url"]); url != "" {
					a.images = append(a.images, url)
				}
			}
			out = append(out, a)
		}
	case dialect.Anthropic:
		for _, b := range arr(one()["content"]) {
			b := obj(b)
			if b["type"] != "tool_result" {
				t.Fatalf("a block of type %v: %s", b["type"], turn)
			}
			a := answered{id: str(b["tool_use_id"]), failed: b["is_error"] == true, text: texts(arr(b["content"]), "text")}
			for _, p := range arr(b["content"]) {
				if data := str(obj(obj(p)["source"])["data"]); data != "" {
					a.images = append(a.images, data)
				}
			}
			out = append(out, a)
		}
	case dialect.Gemini:
		for _, p := range arr(one()["parts"]) {
			fr := obj(obj(p)["functionResponse"])
			if fr == nil {
				t.Fatalf("a part without functionResponse: %s", turn)
			}
			resp, _ := json.Marshal(fr["response"])
			a := answered{id: str(fr["id"]), nameKey: str(fr["name"]), gemini: resp, text: string(resp), failed: obj(fr["response"])["error"] != nil}
			for _, ip := range arr(fr["parts"]) {
				a.images = append(a.images, str(obj(obj(ip)["inlineData"])["data"]))
			}
			out = append(out, a)
		}
	case dialect.Bedrock:
		for _, b := range arr(one()["content"]) {
			tr := obj(obj(b)["toolResult"])
			a := answered{id: str(tr["toolUseId"]), failed: tr["status"] == "error"}
			if s := tr["status"]; s != "error" && s != "success" {
				t.Errorf("status %v: %s", s, turn)
			}
			for _, c := range arr(tr["content"]) {
				c := obj(c)
				a.text += str(c["text"]) + "\n"
				if c["json"] != nil {
					a.text += jsonOf(c["json"]) + "\n"
				}
				if data := str(obj(obj(c["image"])["source"])["bytes"]); data != "" {
					a.images = append(a.images, data)
				}
			}
			out = append(out, a)
		}
	case dialect.Ollama:
		for _, m := range list {
			if m["role"] != "tool" {
				t.Fatalf("a message of role %v: %s", m["role"], turn)
			}
			a := answered{nameKey: str(m["tool_name"]), text: str(m["content"])}
			for _, img := range arr(m["images"]) {
				a.images = append(a.images, str(img))
			}
			out = append(out, a)
		}
	}
	return out, extra
}

// TestTurnMeaning reads every case's turn back: each call answered by its id where the
// API wants it, in order, a failure marked as the API marks one with toolbus's error code
// in its text, a notice kept, the inline image passed on, a Gemini response an object.
func TestTurnMeaning(t *testing.T) {
	for _, d := range dialect.OutputDialects() {
		for _, c := range turnCases {
			t.Run(string(d)+"/"+c.name, func(t *testing.T) {
				turn, err := dialect.Turn(d, c.results)
				if err != nil {
					t.Fatal(err)
				}
				got, extra := readTurn(t, d, turn)
				if len(got) != len(c.results) {
					t.Fatalf("%d answers for %d results: %s", len(got), len(c.results), turn)
				}
				var images []string
				for i, r := range c.results {
					a := got[i]
					switch d {
					case dialect.Ollama: // answers by name and order
						if a.nameKey != r.Tool && !(strings.Contains(r.Tool, ".") && a.nameKey == strings.ReplaceAll(r.Tool, ".", "_")) {
							t.Errorf("result %d answers tool %q, want %q", i, a.nameKey, r.Tool)
						}
					default:
						if a.id != r.ModelID {
							t.Errorf("result %d answers call %q, want %q", i, a.id, r.ModelID)
						}
					}
					if d == dialect.Gemini {
						if a.nameKey == "" {
							t.Errorf("result %d: a functionResponse without a name", i)
						}
						var resp map[string]json.RawMessage
						if err := json.Unmarshal(a.gemini, &resp); err != nil || resp == nil {
							t.Errorf("result %d: the response is not an object: %s", i, a.gemini)
						}
					}
					if marks := d == dialect.Anthropic || d == dialect.Bedrock || d == dialect.Gemini; marks && a.failed != !r.Success {
						t.Errorf("result %d: marked failed %v, succeeded %v: %s", i, a.failed, r.Success, turn)
					}
					if !r.Success && (!strings.Contains(a.text, string(r.Error.Code)) || !strings.Contains(a.text, "longer than 30s")) {
						t.Errorf("result %d: the failure's text %q lacks its code %q or message", i, a.text, r.Error.Code)
					}
					if r.Success && d != dialect.Gemini && !strings.Contains(a.text, compact(t, r.Result)) && !strings.Contains(a.text, normal(t, r.Result)) {
						t.Errorf("result %d: the text %q lacks the result %s", i, a.text, compact(t, r.Result))
					}
					if r.Notice != "" && !strings.Contains(a.text, r.Notice) {
						t.Errorf("result %d: the notice is lost: %q", i, a.text)
					}
					images = append(images, a.images...)
				}
				images = append(images, extra...)
				wantImages := 0
				if c.name == "image" {
					wantImages = 1 // the inline PNG; the stored audio and the omitted JPEG stay named only
				}
				if len(images) != wantImages {
					t.Errorf("%d images passed on, want %d: %s", len(images), wantImages, turn)
				}
				for _, img := range images {
					if img != pngPixel && img != "data:image/png;base64,"+pngPixel {
						t.Errorf("an image %.60q, want the PNG's data", img)
					}
				}
			})
		}
	}
}

// normal is raw as readTurn writes a JSON block it read back: its keys sorted.
func normal(t *testing.T, raw json.RawMessage) string {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func compact(t *testing.T, raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// The OpenAI Chat Completions images come after every tool message: a user message
// between two of them would break the run of answers the API wants.
func TestTurnOpenAIImagesAfterToolMessages(t *testing.T) {
	turn, err := dialect.Turn(dialect.OpenAI, turnCases[2].results)
	if err != nil {
		t.Fatal(err)
	}
	var list []struct {
		Role string `json:"role"`
	}
	if err := json.Unmarshal(turn, &list); err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, m := range list {
		roles = append(roles, m.Role)
	}
	if want := []string{"tool", "tool", "user"}; !slices.Equal(roles, want) {
		t.Errorf("roles %v, want %v", roles, want)
	}
}

// A result that is missing, empty or not JSON is null in every dialect, and a failure
// without an error still says it failed.
func TestTurnOddResults(t *testing.T) {
	results := []messages.ToolResult{
		{Tool: "a", ModelID: "1", Success: true},
		{Tool: "b", ModelID: "2", Success: true, Result: json.RawMessage(`{"unclosed":`)},
		{Tool: "c", ModelID: "3"},
		{Tool: "d", ModelID: "4", Success: true, Result: json.RawMessage(" \n true \n")},
	}
	for _, d := range dialect.OutputDialects() {
		turn, err := dialect.Turn(d, results)
		if err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		if !json.Valid(turn) {
			t.Fatalf("%s: invalid JSON %s", d, turn)
		}
		got, _ := readTurn(t, d, turn)
		if len(got) != len(results) {
			t.Fatalf("%s: %d answers: %s", d, len(got), turn)
		}
		for i, want := range []string{"null", "null", string(messages.CodeInternal), "true"} {
			if !strings.Contains(got[i].text, want) {
				t.Errorf("%s: result %d reads %q, want %s in it", d, i, got[i].text, want)
			}
		}
	}
}

func TestTurnNoResults(t *testing.T) {
	for _, d := range dialect.OutputDialects() {
		turn, err := dialect.Turn(d, nil)
		if err != nil || string(turn) != "[]" {
			t.Errorf("%s: %s, %v; want []", d, turn, err)
		}
	}
}

func TestTurnUnknownDialect(t *testing.T) {
	for _, d := range []dialect.Dialect{dialect.MCP, "cobol", ""} {
		if turn, err := dialect.Turn(d, turnCases[0].results); err == nil {
			t.Errorf("%q: no error, wrote %s", d, turn)
		}
	}
}

func TestParseOutput(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    dialect.Dialect
		wantErr bool
	}{
		{name: "openai", in: "openai", want: dialect.OpenAI},
		{name: "responses", in: "openai_responses", want: dialect.OpenAIResponses},
		{name: "case and spaces", in: " Bedrock ", want: dialect.Bedrock},
		{name: "ollama", in: "ollama", want: dialect.Ollama},
		{name: "mcp is no output", in: "mcp", wantErr: true},
		{name: "unknown", in: "cobol", wantErr: true},
		{name: "empty", in: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := dialect.ParseOutput(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil {
				for _, d := range dialect.OutputDialects() {
					if !strings.Contains(err.Error(), string(d)) {
						t.Errorf("the error %q does not list %s", err, d)
					}
				}
				return
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// The declarations' list stays the four dialects Declarations writes.
func TestOutputDialectsAreNotDeclarations(t *testing.T) {
	for _, d := range []dialect.Dialect{dialect.OpenAIResponses, dialect.Bedrock, dialect.Ollama} {
		if slices.Contains(dialect.Dialects(), d) {
			t.Errorf("Dialects() lists %s", d)
		}
	}
}

// FuzzTurn: whatever the results hold, Turn never panics and writes a JSON array in
// every output dialect.
func FuzzTurn(f *testing.F) {
	for _, c := range turnCases {
		b, err := json.Marshal(c.results)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, []byte(`{"a":1}`), "call_1", "", "image/png", pngPixel, true)
	}
	f.Add([]byte(`[]`), []byte(`{"unclosed`), "", "notice", "image/jpg", "not base64!", false)
	f.Add([]byte(`null`), []byte("\xff\xfe"), "\xff", "\x00", "IMAGE/PNG", "iVBORw0KGgo", true)
	f.Fuzz(func(t *testing.T, list, result []byte, id, notice, mime, data string, success bool) {
		var results []messages.ToolResult
		_ = json.Unmarshal(list, &results)
		r := messages.ToolResult{Tool: id + ".tool", ModelID: id, Success: success, Result: result, Notice: notice,
			Content: []messages.Content{{Type: messages.ContentImage, MimeType: mime, Data: data}}}
		if !success {
			r.Error = &messages.ResultError{Code: messages.ErrorCode(notice), Message: string(result)}
		}
		results = append(results, r)
		for _, d := range dialect.OutputDialects() {
			turn, err := dialect.Turn(d, results)
			if err != nil {
				t.Fatalf("%s: %v", d, err)
			}
			var arr []json.RawMessage
			if err := json.Unmarshal(turn, &arr); err != nil {
				t.Fatalf("%s: not a JSON array: %v: %s", d, err, turn)
			}
			if len(arr) == 0 {
				t.Fatalf("%s: an empty turn for %d results", d, len(results))
			}
		}
	})
}

func ExampleTurn() {
	turn, _ := dialect.Turn(dialect.Anthropic, []messages.ToolResult{
		{Tool: "area", ModelID: "toolu_1", Success: true, Result: json.RawMessage(`{"area": 78.54}`)},
		{Tool: "fetch", ModelID: "toolu_2", Error: &messages.ResultError{Code: messages.CodeTimeout, Message: "took longer than 30s"}},
	})
	fmt.Println(string(turn))
	// Output:
	// [{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"{\"area\":78.54}"}]},{"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"{\"error\":\"took longer than 30s\",\"error_code\":\"timeout\"}"}],"is_error":true}]}]
}
