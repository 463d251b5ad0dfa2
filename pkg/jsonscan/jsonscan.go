// Package jsonscan reads JSON text in one pass, without decoding it: where a value ends
// and whether it is valid, and valid JSON re-spaced (indented or compacted). It works on
// strings and byte slices alike. pkg/toolcall reads model output with it in [Strict]
// mode (RFC 8259: valid UTF-8); pkg/messages checks raw results with it in [Lax] mode,
// which accepts exactly what encoding/json's Valid does. Both are several times faster
// than encoding/json's state machine, which steps once per byte.
package jsonscan

import (
	"math/bits"
	"unicode/utf8"
)

// Text is what the scanners read.
type Text interface{ ~string | ~[]byte }

// Mode says what a string may hold.
type Mode uint8

const (
	// Strict takes RFC 8259 JSON: strings of valid UTF-8.
	Strict Mode = iota
	// Lax takes what encoding/json's Valid does: any byte but a control character in a
	// string, invalid UTF-8 included.
	Lax
)

// Result is a scan's outcome.
type Result uint8

const (
	OK Result = iota
	Invalid
	TooDeep // nested deeper than the limit
)

// MaxDepth is encoding/json's limit on nesting: with it, [Lax] agrees with json.Valid.
const MaxDepth = 10000

// plainStringByte marks the bytes a JSON string may hold as they are: printable ASCII
// other than '"' and '\\'.
var plainStringByte = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// Plain reports whether a JSON string may hold c as it is: printable ASCII other than
// '"' and '\\'.
func Plain(c byte) bool { return plainStringByte[c] }

// PlainRun returns the index of the first byte at or after i that is not plain (see
// plainStringByte) or is stop, or len(s). Most of a string is plain, so it tests eight
// bytes at a time.
func PlainRun[T Text](s T, i int, stop byte) int {
	for ; i+8 <= len(s); i += 8 {
		if m := notPlain(load64(s, i), stop); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	if i < len(s) && len(s) >= 8 {
		// The last bytes: test the last eight, of which the first were tested already.
		done := 8 - (len(s) - i)
		if m := notPlain(load64(s, len(s)-8), stop) >> (done * 8); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
		return len(s)
	}
	for i < len(s) && plainStringByte[s[i]] && s[i] != stop {
		i++
	}
	return i
}

// load64 reads s[i:i+8] little-endian (the compiler makes it one load).
func load64[T Text](s T, i int) uint64 {
	_ = s[i+7]
	return uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
		uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
}

// notPlain returns x, eight bytes of text, with the high bit of each byte that is not
// plain or is stop set, and no bit of a byte before the first of them set. A byte is
// zero in x^c where x holds c, and y-ones sets the high bit of each byte of y below
// 0x01 (y-0x20… of each below ' '), which &^y keeps only where y's own high bit was
// clear; a borrow can flag later bytes, never earlier ones. Non-ASCII bytes have their
// high bit set in x.
func notPlain(x uint64, stop byte) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q, bs, st := x^(ones*'"'), x^(ones*'\\'), x^(ones*uint64(stop))
	return ((q-ones)&^q | (bs-ones)&^bs | (st-ones)&^st | (x-ones*0x20)&^x | x) & highs
}

// IsSpace reports whether c is JSON whitespace.
func IsSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\t' || c == '\r' }

// SkipSpace returns the index of the first byte at or after i that is not whitespace.
func SkipSpace[T Text](s T, i int) int {
	for i < len(s) && s[i] <= ' ' && IsSpace(s[i]) {
		i++
	}
	return i
}

// Check reports whether s is one JSON value, optionally surrounded by whitespace, with
// no more than maxDepth nested objects and arrays.
func Check[T Text](s T, maxDepth int, m Mode) Result {
	end, res := Value(s, 0, maxDepth, m)
	if res == OK && SkipSpace(s, end) != len(s) {
		return Invalid
	}
	return res
}

// Value scans one JSON value that starts at s[i] after optional whitespace and returns
// the index after it.
func Value[T Text](s T, i, maxDepth int, m Mode) (int, Result) {
	// One bit per open container: 1 for an object, 0 for an array; grown past 512.
	var small [8]uint64
	kinds := small[:]
	depth := 0
	n := len(s)
	for {
		// A value starts at i.
		i = SkipSpace(s, i)
		if i >= n {
			return i, Invalid
		}
		switch s[i] {
		case '{', '[':
			open := s[i]
			if depth >= maxDepth {
				return i, TooDeep
			}
			i = SkipSpace(s, i+1)
			if i < n && s[i] == open+2 { // '{'+2 is '}', '['+2 is ']': empty
				i++
				break
			}
			if depth>>6 == len(kinds) {
				kinds = append(kinds, 0)
			}
			if open == '{' {
				kinds[depth>>6] |= 1 << (depth & 63)
			} else {
				kinds[depth>>6] &^= 1 << (depth & 63)
			}
			depth++
			if open == '{' {
				if i = Key(s, i, m); i < 0 {
					return 0, Invalid
				}
			}
			continue
		case '"':
			if i = String(s, i+1, m); i < 0 {
				return 0, Invalid
			}
		case 't':
			if n-i < 4 || string(s[i:i+4]) != "true" {
				return i, Invalid
			}
			i += 4
		case 'f':
			if n-i < 5 || string(s[i:i+5]) != "false" {
				return i, Invalid
			}
			i += 5
		case 'n':
			if n-i < 4 || string(s[i:i+4]) != "null" {
				return i, Invalid
			}
			i += 4
		default:
			if i = Number(s, i); i < 0 {
				return 0, Invalid
			}
		}
		if depth == 0 {
			return i, OK
		}
		// A value ended inside a container: close containers until the next value.
		for {
			i = SkipSpace(s, i)
			if i >= n {
				return i, Invalid
			}
			inObject := kinds[(depth-1)>>6]&(1<<((depth-1)&63)) != 0
			c := s[i]
			if c == ',' {
				i++
				if inObject {
					if i = Key(s, SkipSpace(s, i), m); i < 0 {
						return 0, Invalid
					}
				}
				break
			}
			if inObject && c == '}' || !inObject && c == ']' {
				depth--
				i++
				if depth == 0 {
					return i, OK
				}
				continue
			}
			return i, Invalid
		}
	}
}

// Key scans `"key" :` at i and returns the index after the colon, or -1.
func Key[T Text](s T, i int, m Mode) int {
	if i >= len(s) || s[i] != '"' {
		return -1
	}
	if i = String(s, i+1, m); i < 0 {
		return -1
	}
	i = SkipSpace(s, i)
	if i >= len(s) || s[i] != ':' {
		return -1
	}
	return i + 1
}

// String scans the rest of a string whose opening quote is at i-1 and returns the index
// after its closing quote, or -1.
func String[T Text](s T, i int, m Mode) int {
	for i < len(s) {
		if i = PlainRun(s, i, '"'); i >= len(s) {
			break
		}
		c := s[i]
		switch {
		case plainStringByte[c]:
			i++
		case c == '"':
			return i + 1
		case c == '\\':
			if i+1 >= len(s) {
				return -1
			}
			switch s[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(s) || !IsHex(s[i+2]) || !IsHex(s[i+3]) || !IsHex(s[i+4]) || !IsHex(s[i+5]) {
					return -1
				}
				i += 6
			default:
				return -1
			}
		case c < 0x20:
			return -1
		case m == Lax:
			i++
		default:
			r, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
			if r == utf8.RuneError && size == 1 {
				return -1
			}
			i += size
		}
	}
	return -1
}

// Number scans a JSON number at i and returns the index after it, or -1.
func Number[T Text](s T, i int) int {
	if i < len(s) && s[i] == '-' {
		i++
	}
	if i >= len(s) {
		return -1
	}
	switch c := s[i]; {
	case c == '0':
		i++
	case c >= '1' && c <= '9':
		i = Digits(s, i+1)
	default:
		return -1
	}
	if i < len(s) && s[i] == '.' {
		j := Digits(s, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j := Digits(s, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

// Digits returns the index of the first byte at or after i that is not a digit.
func Digits[T Text](s T, i int) int {
	for i < len(s) && IsDigit(s[i]) {
		i++
	}
	return i
}

func IsDigit(c byte) bool { return c >= '0' && c <= '9' }

func IsHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// AppendCompact appends src, valid JSON, without the whitespace between its tokens, as
// json.Compact does.
func AppendCompact(dst, src []byte) []byte {
	for i := 0; i < len(src); {
		switch c := src[i]; {
		case c == '"':
			end := String(src, i+1, Lax)
			dst = append(dst, src[i:end]...)
			i = end
		case IsSpace(c):
			i++
		default:
			dst = append(dst, c)
			i++
		}
	}
	return dst
}

// AppendIndent appends src, one valid JSON value with no whitespace around it, as
// json.Indent does: each member and element on its own line after prefix and one indent
// per level, empty objects and arrays kept as {} and [].
func AppendIndent(dst, src []byte, prefix, indent string) []byte {
	depth := 0
	open := false // a container was just opened: its first line is not begun yet
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '}', ']':
			if open {
				open = false
			} else {
				depth--
				dst = appendNewline(dst, prefix, indent, depth)
			}
			dst = append(dst, c)
			continue
		}
		if open {
			open = false
			depth++
			dst = appendNewline(dst, prefix, indent, depth)
		}
		switch c {
		case '"':
			e := String(src, i+1, Lax)
			dst = append(dst, src[i:e]...)
			i = e - 1
		case '{', '[':
			open = true
			dst = append(dst, c)
		case ',':
			dst = append(dst, ',')
			dst = appendNewline(dst, prefix, indent, depth)
		case ':':
			dst = append(dst, ':', ' ')
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

func appendNewline(dst []byte, prefix, indent string, depth int) []byte {
	dst = append(dst, '\n')
	dst = append(dst, prefix...)
	for range depth {
		dst = append(dst, indent...)
	}
	return dst
}
