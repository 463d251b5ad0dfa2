package jsonrepair

import (
	"strings"

	"github.com/toolbus/toolbus/pkg/jsonscan"
)

// Precision first for a call's arguments: a repair that had to place a lost closer —
// an end quote, a bracket, the final brace — and made another repair besides leaves
// two readings that both parse (the closer where the repairer put it, taking in the
// key or the prose after it, or where the model meant it), and the arguments are a
// guess. A call run with arguments the model did not write is worse than a parse error
// the model can act on, so [RepairArguments] answers one (ErrAmbiguous) for them.
// [Repair], a general repairer measured against the reference repairers, still gives its
// best reading.

// closerLost are the repairs that place a closer the text lacks.
const closerLost = UnclosedObject | UnclosedArray | UnclosedString

// boundaryRepairs move where a value ends: with a lost closer, each is a second guess
// about the same boundary.
const boundaryRepairs = MissingComma | MissingColon | UnescapedQuote | UnquotedString | MissingValue |
	ExtraComma | MismatchedBracket | ConcatenatedValues | Comments | TrailingText | LeadingText | Ellipsis

// proseRepairs are the repairs that take text in as a value or drop it: after a lost
// final brace, the prose a model writes after its JSON. An unquoted value alone is not
// one ({unit: mm, x: 1, cut there); after a value without a comma, it is.
const proseRepairs = Comments | TrailingText | MissingValue | UnescapedQuote | ConcatenatedValues

// ambiguousArguments reports whether args, the arguments repaired from text with the
// repairs fixes, are one of two readings, and the offset in text to name. complete
// says the model wrote on after the text (a closing tag), so it was not cut off.
//
// Closers missing at the end of a text that ends after a complete value are a cut, and
// have one place: the end. A closer is lost inside the text when a string had to be
// ended where the text goes on (endQuoteLost), or brackets are missing though the text
// ends with one (the last bracket the model wrote may close the outer container or the
// inner one).
func ambiguousArguments(text string, args []byte, fixes Repairs, complete bool) (at int, ambiguous bool) {
	end := len(text)
	for end > 0 && text[end-1] <= ' ' {
		end--
	}
	bracketsAtEnd := fixes&(UnclosedObject|UnclosedArray) != 0
	// A bracket lost inside the text, not only at its end: the text ends with brackets
	// yet lacks some, and one it wrote could close another container than it does.
	bracketLost := bracketsAtEnd && end > 0 && (text[end-1] == '}' || text[end-1] == ']') &&
		closersCouldMove(text[:end], args, false)
	const otherSlip = boundaryRepairs | openQuoteLost
	switch {
	case fixes&UnescapedQuote != 0 && fixes&(boundaryRepairs&^UnescapedQuote) != 0:
		// A quote read as one inside a string, and another slip: the quote may be the
		// end quote of a string whose next one was lost ("a</i>],["b"]).
		return end, true
	case bracketLost && fixes&(otherSlip|endQuoteLost|ControlCharacter) != 0,
		fixes&endQuoteLost != 0 && fixes&otherSlip != 0:
		// A closer lost and another slip: "a": "x, "b": 2 without its end quote, or
		// {"a": {"b": 1, "c": 2} without the inner brace and a comma dropped.
		return end, true
	case fixes&endQuoteLost != 0 && (fixes&openQuoteLost != 0 || bracketsAtEnd):
		// Two quotes lost, or a string ended where the text goes on and brackets
		// closed at the end: each placed by the other.
		return end, true
	case bracketsAtEnd && (fixes&proseRepairs != 0 || fixes&(UnquotedKeys|MissingColon) == UnquotedKeys|MissingColon ||
		fixes&(UnquotedString|MissingComma) == UnquotedString|MissingComma):
		// The final brace lost and text after the last value read into the arguments:
		// {"a": 1 Let me know → a bare word taken for a key, or a value.
		return end, true
	case complete && bracketLost && closersCouldMove(text[:end], args, true):
		// {"a": {"b": 1}, "c": 2} without its inner brace, in a call the model went on
		// after (so not one cut off there): the last brace the model wrote closes
		// {"b": 1, "c": 2} or the whole object. In a text that may have been cut right
		// after it, the cut is the reading (DESIGN: closers missing after complete
		// values are repaired).
		return end, true
	case fixes&quoteInUnquoted != 0 && fixes&(closerLost|boundaryRepairs&^UnquotedString) != 0:
		// {"a": He said \"stop\" twice", and a closer lost or another slip: a string
		// whose opening quote was lost, its escapes read as text, or prose.
		return end, true
	case fixes&objectInArray != 0 && fixes&UnclosedArray != 0:
		// "key": value read as an object in an array that never closes: the array's
		// ']' may be what was lost, before the key ({"a": [1, "b": 2}).
		return end, true
	case fixes&(UnclosedString|TruncatedValue) == UnclosedString|TruncatedValue && lastStringHoldsCloser(args):
		// A string the text ends in that holds a bracket or brace: it may have ended
		// there, the rest prose ({"a": "x} Let me know).
		return end, true
	case fixes&endQuoteLost != 0 && stringEndsWithElement(args):
		// ["x,\n 515]: a string ended where the text goes on that holds a comma and
		// then what reads as the next element: its end quote may be lost before the
		// comma.
		return end, true
	case fixes&(boundaryRepairs|closerLost|ControlCharacter) != 0 && stringEndsInComma(args):
		// "a": "x,""b": 1 — a string that ends in a comma, where the text needed
		// another repair: the comma may be the one between the members, the end quote
		// lost before it.
		return end, true
	}
	return 0, false
}

// closersCouldMove reports whether the brackets text ends with could close containers
// other than the ones args says they close: args, compact, ends with the brackets the
// repair added; a container closed by one of the text's last brackets that has two
// members or more, of the kind of the first bracket added, could have lost its own
// closer after any member but its last, the text's bracket closing the container around
// it. When notOutermost, the outermost container's closer lost alone does not count: in
// a call, {"name": "f", "arguments": {"a": 1, "b": 2} cannot hold "b" beside "name".
func closersCouldMove(text string, args []byte, notOutermost bool) bool {
	closersAtEnd := func(b string) int {
		n := 0
		for i := len(b) - 1; i >= 0; i-- {
			switch b[i] {
			case '}', ']':
				n++
			case ' ', '\t', '\n', '\r':
			default:
				return n
			}
		}
		return n
	}
	written, all := closersAtEnd(text), closersAtEnd(string(args))
	added := all - written
	if written == 0 || added <= 0 || notOutermost && added < 2 {
		return false
	}
	// The text's last brackets, in order: when args does not end with them and then
	// the ones added, the repair put a bracket among them ({"a": [1, 2}: the ']'
	// before the '}'), lost inside the text.
	var wrote []byte
	for i := len(text) - 1; i >= 0 && len(wrote) < written; i-- {
		if text[i] == '}' || text[i] == ']' {
			wrote = append(wrote, text[i])
		}
	}
	for i, c := range wrote { // wrote is reversed
		if args[len(args)-added-1-i] != c {
			return !notOutermost
		}
	}
	lost := args[len(args)-added] // the kind of the innermost container left open
	for p := len(args) - added - written; p < len(args)-added; p++ {
		if args[p] == lost && members(args, p) >= 2 {
			return true
		}
	}
	return false
}

// members counts the members or elements of the container args[p] closes.
func members(args []byte, p int) int {
	depth, n := 0, 1
	for i := p - 1; i >= 0; i-- {
		switch c := args[i]; {
		case c == '"':
			for i--; i > 0 && (args[i] != '"' || backslashes(args, i)%2 == 1); i-- {
			}
		case c == '}' || c == ']':
			depth++
		case c == '{' || c == '[':
			if depth == 0 {
				if i+1 == p {
					return 0
				}
				return n
			}
			depth--
		case c == ',' && depth == 0:
			n++
		}
	}
	return 0
}

// backslashes counts the backslashes right before args[i].
func backslashes(args []byte, i int) int {
	n := 0
	for i--; i >= 0 && args[i] == '\\'; i-- {
		n++
	}
	return n
}

// anyString reports whether f holds for the body (escapes as written) of a string of
// the JSON args.
func anyString(args []byte, f func(body string) bool) bool {
	for i := 0; i < len(args); i++ {
		if args[i] != '"' {
			continue
		}
		start := i + 1
		for i++; i < len(args) && args[i] != '"'; i++ {
			if args[i] == '\\' {
				i++
			}
		}
		if f(string(args[start:min(i, len(args))])) {
			return true
		}
	}
	return false
}

// stringEndsInComma reports whether a string of the JSON args ends in a comma and
// whitespace (spaces, \n, \t).
func stringEndsInComma(args []byte) bool {
	return anyString(args, func(body string) bool {
		for {
			t := strings.TrimRight(body, " ")
			t = strings.TrimSuffix(strings.TrimSuffix(t, `\n`), `\t`)
			if t == body {
				break
			}
			body = t
		}
		return strings.HasSuffix(body, ",")
	})
}

// stringEndsWithElement reports whether a string of the JSON args ends, after its last
// comma, with a number or a literal alone (spaces and \n, \t escapes around it).
func stringEndsWithElement(args []byte) bool {
	return anyString(args, func(body string) bool {
		c := strings.LastIndexByte(body, ',')
		if c < 0 {
			return false
		}
		tail := strings.NewReplacer(`\n`, " ", `\t`, " ", `\r`, " ").Replace(body[c+1:])
		tail = strings.TrimSpace(tail)
		return tail == "true" || tail == "false" || tail == "null" || tail != "" && jsonscan.Number(tail, 0) == len(tail)
	})
}

// lastStringHoldsCloser reports whether the last string of the JSON args holds a '}'
// or ']'.
func lastStringHoldsCloser(args []byte) bool {
	i := len(args) - 1
	for i >= 0 && args[i] != '"' {
		i--
	}
	for j := i - 1; j >= 0; j-- {
		switch args[j] {
		case '"':
			if j == 0 || args[j-1] != '\\' {
				return false
			}
		case '}', ']':
			return true
		}
	}
	return false
}
