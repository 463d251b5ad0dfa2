package toolcall_test

import (
	"fmt"

	"github.com/toolbus/toolbus/pkg/toolcall"
)

func Example() {
	response := `Let me check both cities.
<tool_call>
{"name": "get_weather", "arguments": {"city": "Paris"}}
</tool_call>
<tool_call>
{'name': 'get_weather', 'arguments': {city: 'Rome', days: 3,}}
`
	ex := toolcall.Extract(response, nil)
	for _, c := range ex.Calls {
		fmt.Println(c.Index, c.Name, string(c.Arguments), c.Repairs)
	}
	fmt.Printf("content: %q\n", ex.Content)
	// Output:
	// 0 get_weather {"city": "Paris"} []
	// 1 get_weather {"city":"Rome","days":3} [single_quotes unquoted_keys trailing_comma unclosed_tag]
	// content: "Let me check both cities."
}

func ExampleExtract_parseError() {
	ex := toolcall.Extract(`<tool_call>{"name": "clock", "arguments": {"tz": "UTC" : 1}}</tool_call>`, nil)
	fmt.Println(ex.Calls[0].Name, ex.Calls[0].Err.Code)
	fmt.Println(ex.Calls[0].Err.Message)
	// Output:
	// clock parse_error
	// the <tool_call> block at line 1 could not be read: invalid JSON at line 1, column 56: expected ',' or '}' after the value of "tz", found ':'. Write each call as <tool_call>{"name": "TOOL_NAME", "arguments": {...}}</tool_call> with valid JSON.
}

func ExampleExtract_knownTools() {
	// Without a marker, JSON counts as a call only when it names a known tool.
	response := "Calling it now:\n```json\n{\"name\": \"clock\", \"arguments\": {}}\n```"
	ex := toolcall.Extract(response, &toolcall.Options{KnownTools: []string{"clock"}})
	fmt.Println(len(ex.Calls), ex.Calls[0].Name, ex.Calls[0].Format)
	ex = toolcall.Extract(response, nil)
	fmt.Println(len(ex.Calls))
	// Output:
	// 1 clock json
	// 0
}

func ExampleExtract_harmony() {
	// gpt-oss: the analysis channel is reasoning, a commentary message to=functions.NAME
	// is a call, the final channel is content.
	response := `<|channel|>analysis<|message|>The user wants the weather.<|end|>` +
		`<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Oslo"}<|call|>`
	ex := toolcall.Extract(response, nil)
	fmt.Println(ex.Calls[0].Name, string(ex.Calls[0].Arguments), ex.Calls[0].Format)
	fmt.Printf("reasoning: %q\n", ex.Reasoning)
	// Output:
	// get_weather {"city": "Oslo"} harmony
	// reasoning: "The user wants the weather."
}

func ExampleParseFormat() {
	// A format by its name, or by the model that writes it.
	for _, name := range []string{"gemma4", "hunyuan", "gpt_oss"} {
		f, err := toolcall.ParseFormat(name)
		fmt.Println(name, f, err)
	}
	// Output:
	// gemma4 gemma4 <nil>
	// hunyuan tool_calls <nil>
	// gpt_oss harmony <nil>
}
