package messages

import (
	"strconv"
	"unicode/utf8"
)

// What toolbus repeats of what a model wrote — the tool names it called, its arguments,
// the error messages about them — is cut to a bounded size here, and nowhere else: in
// results and outputs, error messages, logs, span names and attributes and metric
// labels. One call can then not make an answer larger than the bus carries (a call
// naming a tool of 490 KB is answered unknown_tool, not dead-lettered), nor a log line
// or a span as large as the response. The sizes keep what a model needs to correct
// itself: the start of a name, and the start and the end of an error message.
const (
	// MaxEchoedName bounds a tool name as toolbus repeats it.
	MaxEchoedName = 256
	// MaxEchoedArguments bounds arguments, or a value of them, quoted in a message.
	MaxEchoedArguments = 1 << 10
	// MaxEchoedError bounds an error message a result carries.
	MaxEchoedError = 4 << 10
)

// EchoName is a tool name as toolbus repeats it: the name, or when it is longer than
// [MaxEchoedName] bytes its start and a marker saying how much was cut ("…(490 KB
// cut)").
func EchoName(name string) string { return Cut(name, MaxEchoedName) }

// EchoArguments is a call's arguments, or one value of them, as a message quotes it:
// within [MaxEchoedArguments] bytes, cut as [Cut] cuts.
func EchoArguments(args string) string { return Cut(args, MaxEchoedArguments) }

// EchoError is an error message as a result carries it: within [MaxEchoedError] bytes.
// A longer one keeps its start and its end around the marker, so that both what failed
// and what the end says (the tools to choose from, the pattern a value missed) stay.
func EchoError(msg string) string { return CutMiddle(msg, MaxEchoedError) }

// Cut returns s when it is at most max bytes, else its first bytes, cut at a UTF-8
// boundary, and a marker saying how much was cut: max bytes in all. Cutting what Cut
// returned changes nothing.
func Cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	keep, ok := kept(len(s), max)
	if !ok {
		return s[:runeStart(s, max)]
	}
	keep = runeStart(s, keep)
	return s[:keep] + cutMarker(len(s)-keep)
}

// CutMiddle is [Cut] keeping the start and the end of s: about two thirds of what it
// keeps from the start, the rest from the end, with the marker between them.
func CutMiddle(s string, max int) string {
	if len(s) <= max {
		return s
	}
	keep, ok := kept(len(s), max)
	if !ok || keep < 3 {
		return Cut(s, max)
	}
	head := runeStart(s, keep*2/3)
	tail := len(s) - (keep - head)
	for tail < len(s) && !utf8.RuneStart(s[tail]) {
		tail++
	}
	return s[:head] + cutMarker(tail-head) + s[tail:]
}

// kept is how many of n bytes fit within max beside the marker saying how many were cut;
// false when not even the marker fits.
func kept(n, max int) (int, bool) {
	for keep := max - len(cutMarker(n-max)); keep >= 0; keep-- {
		if keep+len(cutMarker(n-keep)) <= max {
			return keep, true
		}
	}
	return 0, false
}

// runeStart is the largest n <= at where s[:n] ends at a UTF-8 boundary.
func runeStart(s string, at int) int {
	for at > 0 && at < len(s) && !utf8.RuneStart(s[at]) {
		at--
	}
	return at
}

// cutMarker says that n bytes were cut: "…(312 bytes cut)", "…(490 KB cut)",
// "…(12 MB cut)".
func cutMarker(n int) string {
	var size string
	switch {
	case n < 10<<10:
		size = strconv.Itoa(n) + " bytes"
	case n < 10<<20:
		size = strconv.Itoa((n+512)>>10) + " KB"
	default:
		size = strconv.Itoa((n+512<<10)>>20) + " MB"
	}
	return "…(" + size + " cut)"
}
