package toolcall

import (
	"fmt"
	"strings"
	"testing"

	"github.com/toolbus/toolbus/internal/corpus"
)

// referenceParsers names, for every format, the parser whose tests and behaviour its
// corpus cases were checked against (README.md's accuracy table).
var referenceParsers = map[Format]string{
	FormatToolCallTag:     "vLLM hermes_tool_parser",
	FormatQwen3Coder:      "vLLM qwen3coder_tool_parser",
	FormatGLM:             "vLLM glm4_moe_tool_parser",
	FormatLlamaJSON:       "vLLM llama_tool_parser (llama3_json)",
	FormatPythonic:        "vLLM pythonic_tool_parser, llama4_pythonic_tool_parser",
	FormatMistral:         "vLLM mistral_tool_parser",
	FormatDeepSeekV3:      "vLLM deepseekv3_tool_parser",
	FormatDeepSeekV31:     "vLLM deepseekv31_tool_parser",
	FormatKimiK2:          "vLLM kimi_k2_tool_parser, llama.cpp",
	FormatDeepSeekV32:     "sglang DeepSeek V3.2 detector, vLLM deepseekv32_tool_parser",
	FormatToolCallsTag:    "vLLM jamba, hunyuan_a13b, minimax (M1) tool parsers",
	FormatFunctionCalls:   "vLLM olmo3_tool_parser",
	FormatJSON:            "vLLM xlam_tool_parser",
	FormatHarmony:         "openai/harmony, vLLM openai_tool_parser, llama.cpp",
	FormatGemma4:          "vLLM gemma4_tool_parser",
	FormatFunctionGemma:   "vLLM functiongemma_tool_parser",
	FormatToolCode:        "Google's Gemma 3 function-calling guide",
	FormatMiniMax:         "vLLM minimax_m2_tool_parser",
	FormatSeedOSS:         "vLLM seed_oss_tool_parser",
	FormatStep3:           "vLLM step3_tool_parser",
	FormatApertus:         "vLLM apertus_tool_parser",
	FormatCohere:          "vLLM cohere_command_tool_parser",
	FormatFunctionaryV31:  "llama.cpp (functionary v3.1)",
	FormatFunctionaryV32:  "llama.cpp (functionary v3.2)",
	FormatLFM2:            "vLLM lfm2_tool_parser",
	FormatLongCat:         "vLLM longcat_tool_parser",
	FormatGigaChat:        "vLLM gigachat3_tool_parser",
	FormatNemotron:        "vLLM llama_nemotron_json parser",
	FormatGranite:         "vLLM granite_tool_parser",
	FormatPhi4Mini:        "vLLM phi4mini_tool_parser, llama.cpp (firefunction v2)",
	FormatOpenAI:          "OpenAI Chat Completions (testdata/api)",
	FormatOpenAIResponses: "OpenAI Responses (testdata/api)",
	FormatAnthropic:       "Anthropic Messages (testdata/api)",
	FormatGemini:          "Gemini generateContent (testdata/api)",
	FormatBedrock:         "Bedrock Converse (testdata/api)",
	FormatOllama:          "Ollama /api/chat (testdata/api)",
}

// TestFormatAccuracy measures every format on the extraction corpus: the cases that
// hold its calls, the calls read and run, the calls answered parse_error on purpose (a
// cut, an ambiguity, a slip the model must fix), and the cases read otherwise than their
// reviewed .want — which must be none. -v prints README.md's table.
func TestFormatAccuracy(t *testing.T) {
	type tally struct{ cases, calls, run, refused, wrong int }
	by := map[Format]*tally{}
	for _, f := range Formats() {
		by[f] = &tally{}
		if referenceParsers[f] == "" {
			t.Errorf("format %s names no reference parser", f)
		}
	}
	for _, cases := range corpus.Load(t, extractCorpus) {
		for _, tt := range cases {
			ex := Extract(tt.In, corpusOpts(t, tt.Opts))
			right := renderExtraction(ex) == tt.Want
			seen := map[Format]bool{}
			for _, c := range ex.Calls {
				n := by[c.Format]
				if n == nil {
					continue // a response-level error, of no format
				}
				n.calls++
				if c.Err == nil {
					n.run++
				} else {
					n.refused++
				}
				if !seen[c.Format] {
					seen[c.Format] = true
					n.cases++
					if !right {
						n.wrong++
					}
				}
			}
		}
	}
	var b strings.Builder
	b.WriteString("| format | corpus cases | calls | run | parse_error | wrong | checked against |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	var all tally
	for _, f := range Formats() {
		n := by[f]
		fmt.Fprintf(&b, "| `%s` | %d | %d | %d | %d | %d | %s |\n", f, n.cases, n.calls, n.run, n.refused, n.wrong, referenceParsers[f])
		all.cases += n.cases
		all.calls += n.calls
		all.run += n.run
		all.refused += n.refused
		all.wrong += n.wrong
		if n.cases == 0 {
			t.Errorf("format %s: no corpus case", f)
		}
		if n.wrong > 0 {
			t.Errorf("format %s: %d cases read otherwise than their .want", f, n.wrong)
		}
	}
	fmt.Fprintf(&b, "| **all** | %d | %d | %d | %d | **%d** | |\n", all.cases, all.calls, all.run, all.refused, all.wrong)
	t.Logf("accuracy per format:\n%s", b.String())
}
