package jsonrepair

import (
	"math/bits"
	"strings"
)

// Repairs is a set of the repairs made to a text, one bit each, so that recording one
// costs an OR and combining two sets costs another. [Repairs.Names] lists them by
// their stable short ids ("single_quotes"), which is how [Repair] reports them.
type Repairs uint64

// The repairs, in the order Names lists them; the comment shows one of each.
const (
	CodeFence          Repairs = 1 << iota // "code_fence": ```json … ``` around the JSON
	LeadingText                            // "leading_text": prose before the JSON, dropped
	TrailingText                           // "trailing_text": anything after the JSON, dropped
	Comments                               // "comments": // … , /* … */ or # … removed
	Whitespace                             // "nonstandard_whitespace": U+00A0, U+3000, BOM… between tokens
	SingleQuotes                           // "single_quotes": 'text' → "text"
	SmartQuotes                            // "smart_quotes": “text”, ‘text’, ＂text＂, `text` → "text"
	UnquotedKeys                           // "unquoted_keys": {p: 1} → {"p": 1}
	UnquotedString                         // "unquoted_string": {unit: bar} → {"unit": "bar"}; also 007, 10mm
	EqualsAsColon                          // "equals_as_colon": {p=10} → {"p": 10}
	MissingColon                           // "missing_colon": {"a" 1} → {"a": 1}
	MissingValue                           // "missing_value": {"a":} → {"a": null}
	PythonLiterals                         // "python_literals": True, False, None
	NonStandardLiteral                     // "nonstandard_literal": NaN, Infinity, undefined → null
	NumberFormat                           // "number_format": +1, .5, 5., 1e → 1, 0.5, 5.0, 1e0
	TrailingComma                          // "trailing_comma": [1, 2,] → [1, 2]
	ExtraComma                             // "extra_comma": [1,,2] or {, "a": 1}
	MissingComma                           // "missing_comma": [1 2] → [1, 2]
	Ellipsis                               // "ellipsis": [1, 2, ...] → [1, 2]
	StringConcat                           // "string_concatenation": "a" + "b" → "ab"
	UnescapedQuote                         // "unescaped_quote": "say "hi"" → "say \"hi\""
	ControlCharacter                       // "control_character": a raw line break or tab inside a string
	InvalidEscape                          // "invalid_escape": "C:\dir" → "C:\\dir"
	InvalidUTF8                            // "invalid_utf8": bytes that are not UTF-8 → U+FFFD
	MismatchedBracket                      // "mismatched_bracket": {"a": 1] → {"a": 1}
	UnclosedString                         // "unclosed_string": a string cut off at the end
	UnclosedObject                         // "unclosed_object": a missing } (cut-off output)
	UnclosedArray                          // "unclosed_array": a missing ]
	TruncatedLiteral                       // "truncated_literal": tru, fals, nul at the end
	ConcatenatedValues                     // "concatenated_values": {"a": 1}\n{"b": 2} → [{"a":1},{"b":2}]; 1,2,3 → [1,2,3]
	StringArguments                        // "string_arguments": arguments as a JSON string, "{\"p\": 10}" → {"p": 10}
	TruncatedValue                         // "truncated_value": the text ended inside a value: a string, number, key or literal
	WrapperCall                            // "wrapper_call": callback({...}); or ObjectId("1") → their argument
	EscapedJSON                            // "escaped_json": {\"a\": 1}: JSON escaped as in a string → {"a": 1}

	numRepairs = iota // how many there are
)

// Repairs the repairer records for its own checks (ambiguousArguments), never
// returned: objectInArray marks an object whose braces were missing, read in an array
// (["key": "value"]); endQuoteLost a string the repairer ended where the text goes on
// (its closing quote missing), openQuoteLost one whose opening quote is missing
// ({key": 1}, [abc", 1]) — both are UnclosedString; quoteInUnquoted an unquoted value
// that holds a double quote ({"a": He said \"hi\""}: its opening quote lost, its
// escapes read as text).
const (
	objectInArray Repairs = 1 << (48 + iota)
	endQuoteLost
	openQuoteLost
	quoteInUnquoted

	internalRepairs = objectInArray | endQuoteLost | openQuoteLost | quoteInUnquoted
)

var repairNames = [numRepairs]string{
	"code_fence", "leading_text", "trailing_text", "comments", "nonstandard_whitespace",
	"single_quotes", "smart_quotes", "unquoted_keys", "unquoted_string",
	"equals_as_colon", "missing_colon", "missing_value", "python_literals",
	"nonstandard_literal", "number_format", "trailing_comma", "extra_comma",
	"missing_comma", "ellipsis", "string_concatenation", "unescaped_quote",
	"control_character", "invalid_escape", "invalid_utf8", "mismatched_bracket",
	"unclosed_string", "unclosed_object", "unclosed_array", "truncated_literal",
	"concatenated_values", "string_arguments", "truncated_value",
	"wrapper_call", "escaped_json",
}

// Names lists the ids of the repairs in r in their stable order; nil when none. The
// slice is the caller's, so it is built for each call, with one allocation of the exact
// size.
func (r Repairs) Names() []string {
	r &= 1<<numRepairs - 1
	if r == 0 {
		return nil
	}
	out := make([]string, 0, bits.OnesCount64(uint64(r)))
	for ; r != 0; r &= r - 1 {
		out = append(out, repairNames[bits.TrailingZeros64(uint64(r))])
	}
	return out
}

// String returns the id of a single repair ("single_quotes"), without allocating, and
// the ids of a set separated by spaces; bits that name no repair are left out.
func (r Repairs) String() string {
	if r != 0 && r&(r-1) == 0 {
		if i := bits.TrailingZeros64(uint64(r)); i < numRepairs {
			return repairNames[i]
		}
		return ""
	}
	return strings.Join(r.Names(), " ")
}
