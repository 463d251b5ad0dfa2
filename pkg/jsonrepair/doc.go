// Package jsonrepair turns the broken JSON language models write into valid JSON, and
// says what it changed. It owns that one idea: it knows nothing of tool calls, their
// formats or schemas (pkg/toolcall finds the calls and hands their JSON here), and it
// imports the standard library and pkg/jsonscan only.
//
// [Repair] has three layers. Valid JSON is returned unchanged after one validation pass
// that is faster than encoding/json's. Anything else goes through a tolerant
// single-pass parser that records what it fixed. What even that parser cannot read gives
// a *[SyntaxError] with the line, the column and what was expected, worded for the model
// that wrote the text. [RepairArguments] does the same for the arguments of a tool call,
// which must be an object, also when they arrive as a JSON string, and puts precision
// first: where a closer was lost (an end quote, a bracket, the final brace) and the text
// then reads two ways that both parse — the key or the prose after it taken into a
// value, or left out — it answers a *[SyntaxError] wrapping [ErrAmbiguous] at the place,
// never the guess; a [Reader] with Arguments set does the same.
//
// # What it repairs
//
// Each repair has a stable id, reported in the order of the [Repairs] constants:
//
//   - around the JSON: code fences (code_fence), prose before and after it
//     (leading_text, trailing_text), the JSONP and MongoDB wrappers callback({…}); and
//     ObjectId("1"), which are their argument (wrapper_call), JSON escaped as string
//     text, {\"a\": 1} (escaped_json), and objects or arrays written one after the
//     other, JSON Lines, which become one array (concatenated_values; also 1,2,3);
//   - between tokens: comments (comments) and spaces JSON does not allow
//     (nonstandard_whitespace);
//   - quotes: single, curly and backtick quotes (single_quotes, smart_quotes), unquoted
//     keys and values (unquoted_keys, unquoted_string), quotes left unescaped inside a
//     string (unescaped_quote), a string whose closing or opening quote is missing
//     (unclosed_string);
//   - structure: = for : (equals_as_colon), a missing colon, comma or value
//     (missing_colon, missing_comma, missing_value: null), an extra or trailing comma
//     (extra_comma, trailing_comma), a bracket of the wrong kind or one too many
//     (mismatched_bracket), an ellipsis standing for elements (ellipsis), strings
//     joined with + (string_concatenation);
//   - values: Python literals, dicts ({p=10}), tuples and sets (python_literals), NaN,
//     Infinity and undefined as null (nonstandard_literal), +1, .5, 5., 1e and 1_000
//     (number_format), control characters and invalid escapes in strings
//     (control_character, invalid_escape), bytes that are not UTF-8 (invalid_utf8);
//   - output cut off: unclosed strings, objects and arrays (unclosed_string,
//     unclosed_object, unclosed_array), tru, fals, nul (truncated_literal), and, whenever
//     the text ended inside a value (a string, number, key or literal), truncated_value;
//   - arguments written as a JSON string, "{\"p\": 10}" (string_arguments, from
//     RepairArguments).
//
// Text that is no object or array is one value (hello world is "hello world"; 1,2,3 is
// [1,2,3]).
//
// Which quote ends a string is read from what is around it, as models break quotes:
// a quote closes when what follows can follow a string (a comma before the next
// member, a closing bracket, a colon, a line break); a doubled quote is one quote
// (""key": 1, "value""}), except before a comma in an object, where both references
// read an inch mark ("27"", → 27"); a quote right after a comma inside a string opens the
// next string when one follows ({"a": "b, "c": 1}); a key that holds a colon and lacks
// its closing quote ends at the colon ({"key:value}); a string the text ends in stops
// before the brackets that close its containers (["abc]); a value that ends in a quote
// but lacks the opening one is a string ({"a": foo", [12", 1]).
//
// A backslash that does not start a JSON escape is kept as a character ("C:\dir",
// "\d+"). So is one that does, where the model plainly did not mean an escape: \b or \f
// next to a letter (C:\files, \bword), and \n, \r or \t inside a Windows path: the text
// from a drive (C:\…) to the next space or line break (C:\new\table), or a drive alone
// (C:\new) unless a line break precedes it, where "A:\n" is more likely a label. Valid
// JSON is never reinterpreted: {"path": "C:\new"} holds a line break, as JSON says,
// since a model that wrote valid JSON is taken at its word.
//
// # What it refuses
//
// It never invents a value the model did not write: a missing value is null, the value
// absent, marked missing_value; a value cut off is kept as far as it was written (a
// literal completed: tru is true), marked truncated_value, so that a caller can refuse
// to act on it (pkg/toolcall does not run such a call: a value cut short is a wrong
// argument, not a sloppy one).
//
// Precision comes before recall. Where two readings are plausible and give different
// values, Repair takes the one both reference repairers take (josdejong/jsonrepair
// and mangiucugna/json_repair, whose test suites run as conformance tables in this
// package); where a text has no reading they share, it answers a *SyntaxError rather
// than guess: a key with neither colon nor value ({"a", "b": 1}), a \u escape with
// fewer than four hex digits inside the text (of a quoted string, or of one whose
// opening quote is missing: {"a": x\u12"}; unquoted text without quotes keeps its
// backslashes as characters, x\u12), a NUL or other control character in a string (a
// tab or a line break is escaped instead).
//
// # Inside a longer text
//
// A parser of model output that finds JSON after markers of its own reads it with a
// [Reader]: the value at an offset, as far as it goes, valid JSON without a copy, a
// failure located only when asked. [Limits] runs Repair and RepairArguments under other
// limits and gives the repairs as a [Repairs] set, which costs no allocation.
// [SkipSpace], [IsSpace], [FenceBody], [AppendString], [Describe], [Kind] and
// [NewSyntaxError] are the repairer's own pieces for such a parser, so that it skips,
// writes and words its errors as the repairer does.
//
// # Limits
//
// Every pass is linear in its input. Input over [DefaultMaxInputSize] bytes or nested
// over [DefaultMaxDepth] levels is refused with a *SyntaxError wrapping [ErrTooLarge] or
// [ErrTooDeep]; nothing panics.
package jsonrepair
