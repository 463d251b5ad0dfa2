package toolcall

import (
	"github.com/toolbus/toolbus/pkg/jsonscan"
)

// The strict layer: pkg/jsonscan's validator in Strict mode (exactly RFC 8259 JSON:
// valid UTF-8, nesting bounded), which records an object's members as it goes, and
// helpers that walk text it accepted. It is the fast path of every call whose JSON is
// already correct (readValue); the rest goes to pkg/jsonrepair.

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
func scanStrictMembers(s string, i, maxDepth int, rec *memberSpans) (int, jsonscan.Result) {
	rec.obj, rec.n = "", 0
	i = jsonscan.SkipSpace(s, i)
	if i >= len(s) || s[i] != '{' || maxDepth < 1 {
		return jsonscan.Value(s, i, maxDepth, jsonscan.Strict)
	}
	start := i
	if i = jsonscan.SkipSpace(s, i+1); i < len(s) && s[i] == '}' {
		rec.obj = s[start : i+1]
		return i + 1, jsonscan.OK
	}
	n := 0
	for {
		ks := i
		if i = jsonscan.Key(s, i, jsonscan.Strict); i < 0 {
			return 0, jsonscan.Invalid
		}
		ke := i - 1 // the colon
		for s[ke-1] != '"' {
			ke--
		}
		vs := jsonscan.SkipSpace(s, i)
		ve, res := jsonscan.Value(s, vs, maxDepth-1, jsonscan.Strict)
		if res != jsonscan.OK {
			return ve, res
		}
		if n < len(rec.spans) {
			rec.spans[n] = struct{ ks, ke, vs, ve int }{ks - start, ke - start, vs - start, ve - start}
		}
		n++
		if i = jsonscan.SkipSpace(s, ve); i >= len(s) {
			return i, jsonscan.Invalid
		}
		switch s[i] {
		case ',':
			i = jsonscan.SkipSpace(s, i+1)
		case '}':
			if n <= len(rec.spans) {
				rec.obj, rec.n = s[start:i+1], n
			}
			return i + 1, jsonscan.OK
		default:
			return i, jsonscan.Invalid
		}
	}
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
		switch i = jsonscan.PlainRun(s, i, '"'); {
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
	return members{s: obj, i: jsonscan.SkipSpace(obj, 1)}
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
	vs = jsonscan.SkipSpace(s, jsonscan.SkipSpace(s, k)+1)
	ve = skipValue(s, vs)
	m.i = jsonscan.SkipSpace(s, ve)
	if m.i < len(s) && s[m.i] == ',' {
		m.i = jsonscan.SkipSpace(s, m.i+1)
	}
	return key, vs, ve, true
}

// elements iterates over the elements of a valid JSON array.
type elements struct {
	s string
	i int
}

func arrayElements(arr string) elements { return elements{s: arr, i: jsonscan.SkipSpace(arr, 1)} }

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
	e.i = jsonscan.SkipSpace(s, end)
	if e.i < len(s) && s[e.i] == ',' {
		e.i = jsonscan.SkipSpace(s, e.i+1)
	}
	return start, end, true
}
