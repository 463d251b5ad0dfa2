package toolcall

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf8"
	"unsafe"
)

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

// plainRun returns the index of the first byte at or after i that is not plain (see
// plainStringByte) or is stop, or len(s). Most of a string is plain, so it tests eight
// bytes at a time.
func plainRun(s string, i int, stop byte) int {
	b := unsafe.Slice(unsafe.StringData(s), len(s)) // only read
	for ; i+8 <= len(b); i += 8 {
		if m := notPlain(binary.LittleEndian.Uint64(b[i:]), stop); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	if i < len(b) && len(b) >= 8 {
		// The last bytes: test the last eight, of which the first were tested already.
		done := 8 - (len(b) - i)
		if m := notPlain(binary.LittleEndian.Uint64(b[len(b)-8:]), stop) >> (done * 8); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
		return len(b)
	}
	for i < len(s) && plainStringByte[s[i]] && s[i] != stop {
		i++
	}
	return i
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

// memberSpans records where the members of an object are, as scanStrictMembers found
// them, so that reading the members takes no second pass. It holds the members of obj.
type memberSpans struct {
	obj   string
	n     int
	spans [8]struct{ ks, ke, vs, ve int } // in obj: key (with its quotes) and value
}

// of returns rec when it holds the members of obj, else nil.
func (rec *memberSpans) of(obj string) *memberSpans {
	if rec == nil || rec.obj != obj { // equal strings have equal members
		return nil
	}
	return rec
}

// scanStrictMembers is scanStrictValue that, when the value is an object of no more than
// len(rec.spans) members, records them in rec.
func scanStrictMembers(s string, i, maxDepth int, rec *memberSpans) (int, strictResult) {
	rec.obj, rec.n = "", 0
	i = skipJSONSpace(s, i)
	if i >= len(s) || s[i] != '{' || maxDepth < 1 {
		return scanStrictValue(s, i, maxDepth)
	}
	start := i
	if i = skipJSONSpace(s, i+1); i < len(s) && s[i] == '}' {
		rec.obj = s[start : i+1]
		return i + 1, strictOK
	}
	n := 0
	for {
		ks := i
		if i = scanObjectKey(s, i); i < 0 {
			return 0, strictInvalid
		}
		ke := i - 1 // the colon
		for s[ke-1] != '"' {
			ke--
		}
		vs := skipJSONSpace(s, i)
		ve, res := scanStrictValue(s, vs, maxDepth-1)
		if res != strictOK {
			return ve, res
		}
		if n < len(rec.spans) {
			rec.spans[n] = struct{ ks, ke, vs, ve int }{ks - start, ke - start, vs - start, ve - start}
		}
		n++
		if i = skipJSONSpace(s, ve); i >= len(s) {
			return i, strictInvalid
		}
		switch s[i] {
		case ',':
			i = skipJSONSpace(s, i+1)
		case '}':
			if n <= len(rec.spans) {
				rec.obj, rec.n = s[start:i+1], n
			}
			return i + 1, strictOK
		default:
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
		if i = plainRun(s, i, '"'); i >= len(s) {
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
			for i < len(s) && !containerByte[s[i]] {
				i++
			}
			if i >= len(s) {
				break
			}
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

// containerByte marks the bytes skipValue stops at inside an object or array.
var containerByte = [256]bool{'"': true, '{': true, '}': true, '[': true, ']': true}

// skipStringValid returns the index after the closing quote of a valid string whose
// body starts at i.
func skipStringValid(s string, i int) int {
	for i < len(s) {
		switch i = plainRun(s, i, '"'); {
		case i >= len(s):
			return i
		case s[i] == '"':
			return i + 1
		case s[i] == '\\':
			i += 2
		default:
			i++ // not ASCII
		}
	}
	return i
}

// members iterates over the members of a valid JSON object.
type members struct {
	s   string
	i   int
	rec *memberSpans // the members of s, if recorded; i counts them then
}

// objectMembers iterates over the members of obj, reading them from rec when it holds
// them (rec may be nil).
func objectMembers(obj string, rec *memberSpans) members {
	if rec = rec.of(obj); rec != nil {
		return members{s: obj, rec: rec}
	}
	return members{s: obj, i: skipJSONSpace(obj, 1)}
}

// next returns the raw key (quotes included) and the offsets of the value of the next
// member.
func (m *members) next() (key string, vs, ve int, ok bool) {
	s := m.s
	if rec := m.rec; rec != nil {
		if m.i >= rec.n {
			return "", 0, 0, false
		}
		sp := &rec.spans[m.i]
		m.i++
		return s[sp.ks:sp.ke], sp.vs, sp.ve, true
	}
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
	start, end, ok := e.nextSpan()
	return e.s[start:end], ok
}

// nextSpan returns the offsets of the next element.
func (e *elements) nextSpan() (start, end int, ok bool) {
	s := e.s
	if e.i >= len(s) || s[e.i] == ']' {
		return 0, 0, false
	}
	start = e.i
	end = skipValue(s, start)
	e.i = skipJSONSpace(s, end)
	if e.i < len(s) && s[e.i] == ',' {
		e.i = skipJSONSpace(s, e.i+1)
	}
	return start, end, true
}
