package toolcall

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolbus/toolbus/internal/corpus"
)

// sameCall reports whether two calls read the same: name, arguments, format, error.
func sameCall(a, b Call) bool {
	if a.Name != b.Name || a.Index != b.Index || a.Format != b.Format || !bytes.Equal(a.Arguments, b.Arguments) {
		return false
	}
	if (a.Err == nil) != (b.Err == nil) {
		return false
	}
	return a.Err == nil || a.Err.Message == b.Err.Message
}

// checkSplits feeds text to a Stream in the chunks that cuts make and checks that
// every call Write returns is the call at its index in Extract's reading of the whole
// text, and that Close gives Extract's reading. It returns how many calls Write
// returned before Close.
func checkSplits(t *testing.T, text string, opts *Options, cuts []int) int {
	t.Helper()
	whole := Extract(text, opts)
	s := NewStream(opts)
	early, prev := 0, 0
	for _, cut := range append(cuts, len(text)) {
		for _, c := range s.Write(text[prev:cut]) {
			if c.Index != early {
				t.Fatalf("split %v of %q: Write returned call %d after %d calls", cuts, text, c.Index, early)
			}
			if c.Index >= len(whole.Calls) || !sameCall(c, whole.Calls[c.Index]) {
				t.Fatalf("split %v of %q at %d: Write returned call %d %s(%s) err %v; the whole response reads %v",
					cuts, text, cut, c.Index, c.Name, c.Arguments, c.Err, callsOf(whole))
			}
			early++
		}
		prev = cut
	}
	ex, rest := s.Close()
	if renderExtraction(ex) != renderExtraction(whole) {
		t.Fatalf("Close of %q differs from Extract", text)
	}
	if early+len(rest) != len(whole.Calls) {
		t.Fatalf("%q: %d calls early and %d at the close, of %d", text, early, len(rest), len(whole.Calls))
	}
	return early
}

func callsOf(ex Extraction) string {
	var b strings.Builder
	for _, c := range ex.Calls {
		b.WriteString(c.Name + string(c.Arguments) + " ")
	}
	return b.String()
}

// TestStreamEveryCut splits every case of the extraction corpus at every byte
// boundary, in two and in three, and checks that a stream gives what Extract gives:
// each call Write returns early is the whole response's call, unchanged.
func TestStreamEveryCut(t *testing.T) {
	early := 0
	for f, cases := range corpus.Load(t, extractCorpus) {
		for _, tt := range cases {
			opts := corpusOpts(t, tt.Opts)
			for _, r := range []Reasoning{ReasoningAuto, ReasoningTagged} {
				o := Options{Reasoning: r}
				if opts != nil {
					o = *opts
					o.Reasoning = r
				}
				t.Run(filepath.Base(f)+"/"+tt.Name+"/"+string(r), func(t *testing.T) {
					n := len(tt.In)
					for i := 0; i <= n; i++ {
						early += checkSplits(t, tt.In, &o, []int{i})
					}
					// every token-sized chunking
					for size := 1; size <= 7; size++ {
						var cuts []int
						for i := size; i < n; i += size {
							cuts = append(cuts, i)
						}
						early += checkSplits(t, tt.In, &o, cuts)
					}
				})
			}
		}
	}
	if early == 0 {
		t.Fatal("no call was settled before the end of its response")
	}
}

// TestStreamSettles checks when a call becomes runnable: at its closing tag, after the
// text that follows a block without one, never before the reasoning is decided.
func TestStreamSettles(t *testing.T) {
	tagged := &Options{Reasoning: ReasoningTagged, KnownTools: []string{"clock", "add"}}
	for _, tt := range []struct {
		name   string
		opts   *Options
		prefix string
		want   int
	}{
		{"closing tag", tagged, `<tool_call>{"name": "clock", "arguments": {}}</tool_call>`, 1},
		{"closing tag half written", tagged, `<tool_call>{"name": "clock", "arguments": {}}</tool_ca`, 0},
		{"value cut", tagged, `<tool_call>{"name": "add", "arguments": {"a": 12`, 0},
		{"two calls", tagged, `<tool_call>{"name": "clock", "arguments": {}}</tool_call><tool_call>{"name": "add", "arguments": {"a": 1`, 1},
		{"auto waits for a </think> that may come", &Options{}, `<tool_call>{"name": "clock", "arguments": {}}</tool_call>`, 0},
		{"auto after </think>", &Options{}, `reasoning</think><tool_call>{"name": "clock", "arguments": {}}</tool_call>`, 1},
		{"auto after <think>", &Options{}, `<think>hm</think><tool_call>{"name": "clock", "arguments": {}}</tool_call>`, 1},
		{"open before </think>", &Options{Reasoning: ReasoningOpen}, `<tool_call>{"name": "clock", "arguments": {}}</tool_call>`, 0},
		{"open after </think>", &Options{Reasoning: ReasoningOpen}, `x</think><tool_call>{"name": "clock", "arguments": {}}</tool_call>`, 1},
		{"bare json at the end", tagged, `{"name": "clock", "arguments": {}}`, 0},
		{"bare json and text", tagged, `{"name": "clock", "arguments": {}} done`, 1},
		{"pythonic list open", tagged, `[clock(), add(a=1`, 0},
		{"mistral", tagged, `[TOOL_CALLS]clock{}[TOOL_CALLS]add{"a": 1`, 1},
		// Issue 34's formats: a model with its own reasoning syntax settles under auto.
		{"harmony at <|call|>", &Options{}, `<|channel|>commentary to=functions.clock<|message|>{}<|call|>`, 1},
		{"harmony without <|call|> yet", &Options{}, `<|channel|>commentary to=functions.clock<|message|>{}`, 0},
		{"harmony at the next message", &Options{}, `<|channel|>commentary to=functions.clock<|message|>{}<|start|>`, 1},
		{"seed_oss after its reasoning", &Options{}, `<seed:think>x</seed:think><seed:tool_call><function=clock></function></seed:tool_call>`, 1},
		{"gemma4", tagged, `<|tool_call>call:clock{}<tool_call|><|tool_call>call:add{a:1`, 1},
		{"granite at the end", tagged, `<|tool_call|>[{"name": "clock", "arguments": {}}]`, 0},
		{"granite and text", tagged, `<|tool_call|>[{"name": "clock", "arguments": {}}] ok`, 1},
		{"functionary v3.2 and the next", &Options{Reasoning: ReasoningTagged, Format: FormatFunctionaryV32}, ">>>clock\n{}\n>>>add\n{\"a\": 1", 1},
		// The hosted APIs' streams: a call settles when the API says it is complete.
		{"openai at the next call's start", &Options{}, `{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","function":{"name":"clock","arguments":"{}"}}]}}]}` + "\n" + `{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_2","function":{"name":"add","arguments":""}}]}}]}`, 1},
		{"openai before the finish reason", &Options{}, `{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","function":{"name":"clock","arguments":"{}"}}]}}]}`, 0},
		{"anthropic at content_block_stop", &Options{}, `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t1","name":"clock","input":{}}}{"type":"content_block_stop","index":0}{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t2","name":"add","input":{}}}`, 1},
		{"anthropic before content_block_stop", &Options{}, `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t1","name":"clock","input":{}}}{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{}"}}`, 0},
		{"responses at arguments done", &Options{}, `{"type":"response.output_item.added","output_index":0,"item":{"type":"function_call","call_id":"c1","name":"clock","arguments":""}}{"type":"response.function_call_arguments.done","output_index":0,"arguments":"{}"}`, 1},
		{"bedrock at contentBlockStop", &Options{}, `{"contentBlockStart":{"start":{"toolUse":{"toolUseId":"t1","name":"clock"}},"contentBlockIndex":0}}{"contentBlockStop":{"contentBlockIndex":0}}`, 1},
		{"kimi in reasoning", &Options{}, `<think>x<|tool_calls_section_begin|><|tool_call_begin|>functions.clock:0<|tool_call_argument_begin|>{}<|tool_call_end|>`, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ex, n := ExtractPartial(tt.prefix, tt.opts)
			if n != tt.want {
				t.Fatalf("ExtractPartial(%q) settled %d of %d calls (%s), want %d", tt.prefix, n, len(ex.Calls), callsOf(ex), tt.want)
			}
		})
	}
}

func TestReasoningModes(t *testing.T) {
	text := `<tool_call>{"name": "clock", "arguments": {}}</tool_call></think><tool_call>{"name": "add", "arguments": {}}</tool_call>`
	for r, want := range map[Reasoning]string{ReasoningAuto: "add{} ", ReasoningTagged: "clock{} add{} ", ReasoningOpen: "add{} "} {
		if got := callsOf(Extract(text, &Options{Reasoning: r})); got != want {
			t.Errorf("%q: calls %q, want %q", r, got, want)
		}
	}
	if got := callsOf(Extract(`<tool_call>{"name": "clock", "arguments": {}}</tool_call>`, &Options{Reasoning: ReasoningOpen})); got != "" {
		t.Errorf("open reasoning never closed: calls %q, want none", got)
	}
	for _, s := range []string{"", "auto", "tagged", "open"} {
		if _, err := ParseReasoning(s); err != nil {
			t.Error(err)
		}
	}
	if _, err := ParseReasoning("prompt"); err == nil {
		t.Error(`ParseReasoning("prompt") did not fail`)
	}
}

func FuzzStream(f *testing.F) {
	for _, s := range []string{
		`<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call> and <tool_call>{"name": "clock", "arguments": {}}</tool_call>`,
		`<think>x</think>[TOOL_CALLS]a{"x": "</tool_call>"}[TOOL_CALLS]clock{}`,
		"[get_weather(city='Paris'), clock()] then",
		`{"name": "clock", "arguments": {}} {"name": "a", "arguments": {"b": "c\"d"}} ok`,
	} {
		f.Add(s, uint8(3), uint8(1))
	}
	// Every case of the extraction corpus, the new formats' above all, in chunks of 3.
	for _, cases := range corpus.Load(f, extractCorpus) {
		for _, tt := range cases {
			f.Add(tt.In, uint8(2), uint8(0))
		}
	}
	formats := append([]Format{FormatAuto}, Formats()...)
	f.Fuzz(func(t *testing.T, text string, size, format uint8) {
		opts := &Options{
			KnownTools: []string{"get_weather", "clock", "a"},
			Format:     formats[int(format)%len(formats)],
			Reasoning:  []Reasoning{ReasoningAuto, ReasoningTagged, ReasoningOpen}[int(format)%3],
		}
		step := int(size%16) + 1
		var cuts []int
		for i := step; i < len(text); i += step {
			cuts = append(cuts, i)
		}
		checkSplits(t, text, opts, cuts)
	})
}

func corpusOpts(t *testing.T, s string) *Options {
	t.Helper()
	if s == "" {
		return nil
	}
	var co corpusOptions
	if err := json.Unmarshal([]byte(s), &co); err != nil {
		t.Fatalf("opts: %v", err)
	}
	format, err := ParseFormat(co.Format)
	if err != nil {
		t.Fatal(err)
	}
	return &Options{KnownTools: co.KnownTools, Schemas: co.Schemas, Format: format,
		MaxCalls: co.MaxCalls, MaxDepth: co.MaxDepth, MaxInputSize: co.MaxInput}
}

// BenchmarkExtractPartial is what the parser spends on one chunk of a streamed
// response: reading the text so far (here a response of three calls, whole) and
// settling its calls, against Extract on the same text.
func BenchmarkExtractPartial(b *testing.B) {
	text := strings.Repeat(`<tool_call>{"name": "clock", "arguments": {"tz": "UTC"}}</tool_call> and `, 3) + "done."
	opts := &Options{Reasoning: ReasoningTagged}
	b.Run("partial", func(b *testing.B) {
		for b.Loop() {
			if _, n := ExtractPartial(text, opts); n != 3 {
				b.Fatal(n)
			}
		}
	})
	b.Run("extract", func(b *testing.B) {
		for b.Loop() {
			Extract(text, opts)
		}
	})
}
