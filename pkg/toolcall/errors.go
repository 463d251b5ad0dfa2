package toolcall

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
)

// SyntaxError says where and why text could not be read as JSON, even after repair. Its
// message is written for the model that produced the text.
type SyntaxError struct {
	// Offset is the byte offset of the problem in the text given to RepairJSON.
	Offset int
	// Line and Column (in characters) are 1-based.
	Line, Column int
	// Msg says what was expected and what was found.
	Msg string
	// Err is ErrTooDeep or ErrTooLarge when a limit was hit, else nil.
	Err error
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("line %d, column %d: %s", e.Line, e.Column, e.Msg)
}

func (e *SyntaxError) Unwrap() error { return e.Err }

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

// describeAt names the character at src[i] for an error message.
func describeAt(src string, i int) string {
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

// quotedASCII holds describeAt's names of the ASCII characters, so that an error
// message costs one concatenation.
var quotedASCII = func() (t [utf8.RuneSelf]string) {
	for c := range t {
		t[c] = fmt.Sprintf("'%c'", c)
	}
	return t
}()
