package jsonrepair

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Sentinels for the limits; a *SyntaxError wraps them when a limit was the cause.
var (
	// ErrTooDeep: objects and arrays are nested deeper than the limit.
	ErrTooDeep = errors.New("JSON nested too deep")
	// ErrTooLarge: the input is longer than the limit.
	ErrTooLarge = errors.New("input too large")
	// ErrAmbiguous: a call's arguments lost a closer (an end quote, a bracket, the
	// final brace) and the text reads two ways (see RepairArguments).
	ErrAmbiguous = errors.New("arguments read two ways")
)

// ambiguousMessage is the message of ErrAmbiguous, for the model that wrote the text.
const ambiguousMessage = "a closing quote, bracket or brace is missing before here, and the text reads two ways " +
	"(what follows may be part of a value or not); write the arguments again with every string, array and object closed"

// SyntaxError says where and why text could not be read as JSON, even after repair. Its
// message is written for the model that produced the text.
type SyntaxError struct {
	// Offset is the byte offset of the problem in the text given to Repair (or to a
	// Reader).
	Offset int
	// Line and Column (in characters) are 1-based.
	Line, Column int
	// Msg says what was expected and what was found.
	Msg string
	// Err is ErrTooDeep or ErrTooLarge when a limit was hit, ErrAmbiguous when the
	// arguments read two ways, else nil.
	Err error
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("line %d, column %d: %s", e.Line, e.Column, e.Msg)
}

func (e *SyntaxError) Unwrap() error { return e.Err }

// NewSyntaxError returns the error msg at src[offset], its line and column counted, for
// a parser built on this package that reports its own errors alike.
func NewSyntaxError(src string, offset int, msg string) *SyntaxError {
	return newSyntaxError(src, offset, nil, msg)
}

// newSyntaxError locates offset in src.
func newSyntaxError(src string, offset int, limit error, msg string) *SyntaxError {
	offset = min(max(offset, 0), len(src))
	line := 1 + strings.Count(src[:offset], "\n")
	lineStart := strings.LastIndexByte(src[:offset], '\n') + 1
	return &SyntaxError{
		Offset: offset,
		Line:   line,
		Column: 1 + utf8.RuneCountInString(src[lineStart:offset]),
		Msg:    msg,
		Err:    limit,
	}
}

// Describe names the character at src[i] as the messages of a [SyntaxError] do ('x', a
// line break, the end of the text), for a parser built on this package that words its
// own errors alike.
func Describe(src string, i int) string {
	if i >= len(src) {
		return "the end of the text"
	}
	c := src[i]
	switch {
	case c == '\n':
		return "a line break"
	case c == '\'':
		return `"'"`
	case c < utf8.RuneSelf:
		return quotedASCII[c]
	}
	r, size := utf8.DecodeRuneInString(src[i:])
	if r == utf8.RuneError && size == 1 {
		return "'\uFFFD'"
	}
	return "'" + src[i:i+size] + "'"
}

// quotedASCII holds Describe's names of the ASCII characters, so that an error
// message costs one concatenation.
var quotedASCII = func() (t [utf8.RuneSelf]string) {
	for c := range t {
		t[c] = fmt.Sprintf("'%c'", c)
	}
	return t
}()

// Kind names the kind of the JSON value v as the messages of a [SyntaxError] do: an
// object, an array, a string, a boolean, null or a number.
func Kind(v string) string {
	switch v[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}
