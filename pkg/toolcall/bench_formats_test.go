package toolcall

import "testing"

// cleanCalls is one clean call in each format, as its model writes it, for
// BenchmarkExtractCleanFormat: the older formats measured against the commit before the
// newer ones were added, so that a new marker costs the old formats nothing noticeable.
var cleanCalls = []struct {
	format Format
	text   string
	newer  bool // added with issue 34: skipped where it does not read (the commit before)
}{
	{FormatToolCallTag, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>", false},
	{FormatQwen3Coder, "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>", false},
	{FormatGLM, "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>", false},
	{FormatLlamaJSON, `<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris", "days": 3}}<|eom_id|>`, false},
	{FormatPythonic, `[get_weather(city='Paris', days=3)]`, false},
	{FormatMistral, `[TOOL_CALLS]get_weather[ARGS]{"city": "Paris", "days": 3}`, false},
	{FormatDeepSeekV3, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Paris\", \"days\": 3}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>", false},
	{FormatDeepSeekV31, `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Paris", "days": 3}<｜tool▁call▁end｜><｜tool▁calls▁end｜>`, false},
	{FormatKimiK2, `<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{"city": "Paris", "days": 3}<|tool_call_end|><|tool_calls_section_end|>`, false},
	{FormatDeepSeekV32, "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>", false},
	{FormatToolCallsTag, `<tool_calls>[{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}]</tool_calls>`, false},
	{FormatFunctionCalls, "<function_calls>\nget_weather(city='Paris', days=3)\n</function_calls>", false},
	{FormatJSON, `{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}`, false},
	// Issue 34's formats.
	{"harmony", `<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris", "days": 3}<|call|>`, true},
	{"gemma4", `<|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:3}<tool_call|>`, true},
	{"minimax_m2", `<minimax:tool_call><invoke name="get_weather"><parameter name="city">Paris</parameter><parameter name="days">3</parameter></invoke></minimax:tool_call>`, true},
	{"lfm2", `<|tool_call_start|>[get_weather(city='Paris', days=3)]<|tool_call_end|>`, true},
	{"cohere", `<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "get_weather", "parameters": {"city": "Paris", "days": 3}}]<|END_ACTION|>`, true},
}

// BenchmarkExtractCleanFormat extracts one clean call of each format, auto-detected
// (bare JSON with its tool known).
func BenchmarkExtractCleanFormat(b *testing.B) {
	opts := &Options{}
	known := &Options{KnownTools: []string{"get_weather"}}
	for _, c := range cleanCalls {
		o := opts
		if c.format == FormatJSON {
			o = known
		}
		if ex := Extract(c.text, o); len(ex.Calls) != 1 || ex.Calls[0].Err != nil || ex.Calls[0].Name != "get_weather" {
			if !c.newer {
				b.Fatalf("%s: %+v", c.format, ex.Calls)
			}
			continue
		}
		b.Run(string(c.format), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Extract(c.text, o)
			}
		})
	}
}
