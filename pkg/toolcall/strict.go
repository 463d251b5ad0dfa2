package toolcall

import "unicode/utf8"

// The strict layer: a validator for exactly RFC 8259 JSON (valid UTF-8, nesting bounded)
// and helpers that walk text this validator accepted. It is the fast path of RepairJSON
// and of every call whose JSON is already correct.

type strictResult uint8

const (
	strictOK strictResult = iota
	strictInvalid
	strictTooDeep
)

// plainStringByte marks the bytes a JSON string may hold as they are: printable ASCII
// other than '"' and '\\'.
var plainStringByte = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func isJSONSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\t' || c == '\r' }

func skipJSONSpace(s string, i int) int {
	for i < len(s) && s[i] <= ' ' && isJSONSpace(s[i]) {
		i++
	}
	return i
}

// checkStrict reports whether s is one JSON value, optionally surrounded by whitespace,
// with no more than maxDepth nested objects and arrays.
func checkStrict(s string, maxDepth int) strictResult {
	end, res := scanStrictValue(s, 0, maxDepth)
	if res == strictOK && skipJSONSpace(s, end) != len(s) {
		return strictInvalid
	}
	return res
}

// scanStrictValue scans one JSON value that starts at s[i] after optional whitespace
// and returns the index after it.
func scanStrictValue(s string, i, maxDepth int) (int, strictResult) {
	// One bit per open container: 1 for an object, 0 for an array.
	var small [8]uint64
	kinds := small[:]
	if maxDepth > len(small)*64 {
		kinds = make([]uint64, (maxDepth+63)/64)
	}
	depth := 0
	n := len(s)
	for {
		// A value starts at i.
		i = skipJSONSpace(s, i)
		if i >= n {
			return i, strictInvalid
		}
		switch s[i] {
		case '{':
			if depth >= maxDepth {
				return i, strictTooDeep
			}
			i = skipJSONSpace(s, i+1)
			if i < n && s[i] == '}' {
				i++
				break
			}
			kinds[depth>>6] |= 1 << (depth & 63)
			depth++
			if i = scanObjectKey(s, i); i < 0 {
				return 0, strictInvalid
			}
			continue
		case '[':
			if depth >= maxDepth {
				return i, strictTooDeep
			}
			i = skipJSONSpace(s, i+1)
			if i < n && s[i] == ']' {
				i++
				break
			}
			kinds[depth>>6] &^= 1 << (depth & 63)
			depth++
			continue
		case '"':
			if i = scanString(s, i+1); i < 0 {
				return 0, strictInvalid
			}
		case 't':
			if len(s)-i < 4 || s[i:i+4] != "true" {
				return i, strictInvalid
			}
			i += 4
		case 'f':
			if len(s)-i < 5 || s[i:i+5] != "false" {
				return i, strictInvalid
			}
			i += 5
		case 'n':
			if len(s)-i < 4 || s[i:i+4] != "null" {
				return i, strictInvalid
			}
			i += 4
		default:
			if i = scanNumber(s, i); i < 0 {
				return 0, strictInvalid
			}
		}
		if depth == 0 {
			return i, strictOK
		}
		// A value ended inside a container: close containers until the next value.
		for {
			i = skipJSONSpace(s, i)
			if i >= n {
				return i, strictInvalid
			}
			inObject := kinds[(depth-1)>>6]&(1<<((depth-1)&63)) != 0
			c := s[i]
			if c == ',' {
				i++
				if inObject {
					if i = scanObjectKey(s, skipJSONSpace(s, i)); i < 0 {
						return 0, strictInvalid
					}
				}
				break
			}
			if inObject && c == '}' || !inObject && c == ']' {
				depth--
				i++
				if depth == 0 {
					return i, strictOK
				}
				continue
			}
			return i, strictInvalid
		}
	}
}

// scanObjectKey scans `"key" :` at i and returns the index after the colon, or -1.
func scanObjectKey(s string, i int) int {
	if i >= len(s) || s[i] != '"' {
		return -1
	}
	if i = scanString(s, i+1); i < 0 {
		return -1
	}
	i = skipJSONSpace(s, i)
	if i >= len(s) || s[i] != ':' {
		return -1
	}
	return i + 1
}

// scanString scans the rest of a string whose opening quote is at i-1 and returns the
// index after its closing quote, or -1.
func scanString(s string, i int) int {
	for i < len(s) {
		// Most bytes are plain; step over them four at a time.
		for i+4 <= len(s) && plainStringByte[s[i]] && plainStringByte[s[i+1]] && plainStringByte[s[i+2]] && plainStringByte[s[i+3]] {
			i += 4
		}
		if i >= len(s) {
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
				if i+6 > len(s) || !isHex(s[i+2]) || !isHex(s[i+3]) || !isHex(s[i+4]) || !isHex(s[i+5]) {
					return -1
				}
				i += 6
			default:
				return -1
			}
		case c < 0x20:
			return -1
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				return -1
			}
			i += size
		}
	}
	return -1
}

// scanNumber scans a JSON number at i and returns the index after it, or -1.
func scanNumber(s string, i int) int {
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
		i = skipDigits(s, i+1)
	default:
		return -1
	}
	if i < len(s) && s[i] == '.' {
		j := skipDigits(s, i+1)
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
		j := skipDigits(s, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func skipDigits(s string, i int) int {
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return i
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// The walkers below assume text checkStrict accepted.

// skipValue returns the index after the valid JSON value that starts at i.
func skipValue(s string, i int) int {
	switch s[i] {
	case '"':
		return skipStringValid(s, i+1)
	case '{', '[':
		depth := 0
		for i < len(s) {
			switch s[i] {
			case '"':
				i = skipStringValid(s, i+1)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	default:
		for i < len(s) {
			switch s[i] {
			case ',', '}', ']', ' ', '\n', '\t', '\r':
				return i
			}
			i++
		}
		return i
	}
}

// skipStringValid returns the index after the closing quote of a valid string whose
// body starts at i.
func skipStringValid(s string, i int) int {
	for i < len(s) {
		switch s[i] {
		case '"':
			return i + 1
		case '\\':
			i += 2
		default:
			i++
		}
	}
	return i
}

// members iterates over the members of a valid JSON object.
type members struct {
	s string
	i int
}

func objectMembers(obj string) members { return members{s: obj, i: skipJSONSpace(obj, 1)} }

// next returns the raw key (quotes included) and the offsets of the value of the next
// member.
func (m *members) next() (key string, vs, ve int, ok bool) {
	s := m.s
	if m.i >= len(s) || s[m.i] != '"' {
		return "", 0, 0, false
	}
	k := skipStringValid(s, m.i+1)
	key = s[m.i:k]
	vs = skipJSONSpace(s, skipJSONSpace(s, k)+1)
	ve = skipValue(s, vs)
	m.i = skipJSONSpace(s, ve)
	if m.i < len(s) && s[m.i] == ',' {
		m.i = skipJSONSpace(s, m.i+1)
	}
	return key, vs, ve, true
}

// elements iterates over the elements of a valid JSON array.
type elements struct {
	s string
	i int
}

func arrayElements(arr string) elements { return elements{s: arr, i: skipJSONSpace(arr, 1)} }

func (e *elements) next() (string, bool) {
	s := e.s
	if e.i >= len(s) || s[e.i] == ']' {
		return "", false
	}
	start := e.i
	end := skipValue(s, start)
	e.i = skipJSONSpace(s, end)
	if e.i < len(s) && s[e.i] == ',' {
		e.i = skipJSONSpace(s, e.i+1)
	}
	return s[start:end], true
}
