package toolcall

import "math/bits"

// The repairs RepairJSON and Extract report, as stable short ids. A Call's Repairs and
// RepairJSON's list hold them in this order.
const (
	RepairCodeFence          = "code_fence"             // ```json … ``` around the JSON
	RepairLeadingText        = "leading_text"           // prose before the JSON, dropped
	RepairTrailingText       = "trailing_text"          // anything after the JSON, dropped
	RepairComments           = "comments"               // // … , /* … */ or # … removed
	RepairWhitespace         = "nonstandard_whitespace" // U+00A0, U+3000, BOM… between tokens
	RepairSingleQuotes       = "single_quotes"          // 'text' → "text"
	RepairSmartQuotes        = "smart_quotes"           // “text”, ‘text’, ＂text＂, `text` → "text"
	RepairUnquotedKeys       = "unquoted_keys"          // {p: 1} → {"p": 1}
	RepairUnquotedString     = "unquoted_string"        // {unit: bar} → {"unit": "bar"}; also 007, 10mm
	RepairEqualsAsColon      = "equals_as_colon"        // {p=10} → {"p": 10}
	RepairMissingColon       = "missing_colon"          // {"a" 1} → {"a": 1}
	RepairMissingValue       = "missing_value"          // {"a":} → {"a": null}
	RepairPythonLiterals     = "python_literals"        // True, False, None
	RepairNonStandardLiteral = "nonstandard_literal"    // NaN, Infinity, undefined → null
	RepairNumberFormat       = "number_format"          // +1, .5, 5., 1e → 1, 0.5, 5.0, 1e0
	RepairTrailingComma      = "trailing_comma"         // [1, 2,] → [1, 2]
	RepairExtraComma         = "extra_comma"            // [1,,2] or {, "a": 1}
	RepairMissingComma       = "missing_comma"          // [1 2] → [1, 2]
	RepairEllipsis           = "ellipsis"               // [1, 2, ...] → [1, 2]
	RepairStringConcat       = "string_concatenation"   // "a" + "b" → "ab"
	RepairUnescapedQuote     = "unescaped_quote"        // "say "hi"" → "say \"hi\""
	RepairControlCharacter   = "control_character"      // a raw line break or tab inside a string
	RepairInvalidEscape      = "invalid_escape"         // "C:\dir" → "C:\\dir"
	RepairInvalidUTF8        = "invalid_utf8"           // bytes that are not UTF-8 → U+FFFD
	RepairMismatchedBracket  = "mismatched_bracket"     // {"a": 1] → {"a": 1}
	RepairUnclosedString     = "unclosed_string"        // a string cut off at the end
	RepairUnclosedObject     = "unclosed_object"        // a missing } (cut-off output)
	RepairUnclosedArray      = "unclosed_array"         // a missing ]
	RepairTruncatedLiteral   = "truncated_literal"      // tru, fals, nul at the end
	RepairTruncatedValue     = "truncated_value"        // the text ended inside a value: a string, number, key or literal
	RepairConcatenatedValues = "concatenated_values"    // {"a": 1}\n{"b": 2} → [{"a":1},{"b":2}]; 1,2,3 → [1,2,3]
	RepairWrapperCall        = "wrapper_call"           // callback({...}); or ObjectId("1") → their argument
	RepairEscapedJSON        = "escaped_json"           // {\"a\": 1}: JSON escaped as in a string → {"a": 1}

	// Repairs of the call around the JSON, which only Extract reports.

	RepairStringArguments = "string_arguments" // "arguments": "{\"p\": 10}" → {"p": 10}
	RepairUnclosedTag     = "unclosed_tag"     // a final <tool_call> without </tool_call>
	RepairSchemaCoercion  = "schema_coercion"  // "10" → 10 where the input schema wants a number
)

// fix is one repair, as a bit in a fixSet.
type fix uint8

const (
	fixCodeFence fix = iota
	fixLeadingText
	fixTrailingText
	fixComments
	fixWhitespace
	fixSingleQuotes
	fixSmartQuotes
	fixUnquotedKeys
	fixUnquotedString
	fixEqualsAsColon
	fixMissingColon
	fixMissingValue
	fixPythonLiterals
	fixNonStandardLiteral
	fixNumberFormat
	fixTrailingComma
	fixExtraComma
	fixMissingComma
	fixEllipsis
	fixStringConcat
	fixUnescapedQuote
	fixControlCharacter
	fixInvalidEscape
	fixInvalidUTF8
	fixMismatchedBracket
	fixUnclosedString
	fixUnclosedObject
	fixUnclosedArray
	fixTruncatedLiteral
	fixConcatenatedValues
	fixStringArguments
	fixUnclosedTag
	fixSchemaCoercion
	fixTruncatedValue
	fixWrapperCall
	fixEscapedJSON
	numFixes
)

var fixNames = [numFixes]string{
	RepairCodeFence, RepairLeadingText, RepairTrailingText, RepairComments, RepairWhitespace,
	RepairSingleQuotes, RepairSmartQuotes, RepairUnquotedKeys, RepairUnquotedString,
	RepairEqualsAsColon, RepairMissingColon, RepairMissingValue, RepairPythonLiterals,
	RepairNonStandardLiteral, RepairNumberFormat, RepairTrailingComma, RepairExtraComma,
	RepairMissingComma, RepairEllipsis, RepairStringConcat, RepairUnescapedQuote,
	RepairControlCharacter, RepairInvalidEscape, RepairInvalidUTF8, RepairMismatchedBracket,
	RepairUnclosedString, RepairUnclosedObject, RepairUnclosedArray, RepairTruncatedLiteral,
	RepairConcatenatedValues, RepairStringArguments, RepairUnclosedTag, RepairSchemaCoercion, RepairTruncatedValue,
	RepairWrapperCall, RepairEscapedJSON,
}

// fixSet records which repairs were applied, so that recording one costs an OR.
type fixSet uint64

func (s *fixSet) add(f fix) { *s |= 1 << f }

func (s fixSet) has(f fix) bool { return s&(1<<f) != 0 }

// names lists the repairs in s in their stable order; nil when none. The slice is the
// caller's, so it is built for each call, with one allocation of the exact size.
func (s fixSet) names() []string {
	if s == 0 {
		return nil
	}
	out := make([]string, 0, bits.OnesCount64(uint64(s)))
	for ; s != 0; s &= s - 1 {
		out = append(out, fixNames[bits.TrailingZeros64(uint64(s))])
	}
	return out
}
