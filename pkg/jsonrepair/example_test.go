package jsonrepair_test

import (
	"fmt"

	"github.com/toolbus/toolbus/pkg/jsonrepair"
)

func Example() {
	out, repairs, err := jsonrepair.Repair(`{p=10, d=100, 'unit': 'mm', exact: True,}`)
	fmt.Println(string(out), repairs, err)
	// Output:
	// {"p":10,"d":100,"unit":"mm","exact":true} [single_quotes unquoted_keys equals_as_colon python_literals trailing_comma] <nil>
}

func ExampleRepair_error() {
	_, _, err := jsonrepair.Repair(`{"p": 10 : 20}`)
	fmt.Println(err)
	// Output:
	// line 1, column 10: expected ',' or '}' after the value of "p", found ':'
}

func ExampleRepair_truncated() {
	// Output cut off at the token limit: repaired, and marked, since the last value may
	// have been meant longer.
	out, repairs, _ := jsonrepair.Repair(`{"city": "Par`)
	fmt.Println(string(out), repairs)
	// Output:
	// {"city":"Par"} [unclosed_string unclosed_object truncated_value]
}

func ExampleRepairArguments() {
	out, repairs, _ := jsonrepair.RepairArguments(`"{\"p\": 10}"`)
	fmt.Println(string(out), repairs)
	// Output:
	// {"p": 10} [string_arguments]
}

func ExampleReader() {
	// JSON after a marker in a model's response: the value, and where the text goes on.
	text := `Action: {'tool': 'clock',} Then I wait.`
	var rd jsonrepair.Reader
	v, end, repairs, ok := rd.Value(text, len("Action:"))
	fmt.Println(v, repairs, ok)
	fmt.Printf("%q\n", text[end:])
	// Output:
	// {"tool":"clock"} single_quotes trailing_comma true
	// " Then I wait."
}
