package jsonrepair

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/toolbus/toolbus/pkg/jsonscan"
)

// repairer is the tolerant parser: recursive descent over src from pos, writing compact
// JSON to out. Every method consumes input, so a pass is linear in the input.
type repairer struct {
	src   string
	pos   int
	out   []byte
	fixes Repairs
	// The open containers, '{' or '[', innermost last: the first in small, the rest
	// in deep (a slice into small would make every repairer escape to the heap).
	depth    int
	small    [32]byte
	deep     []byte
	maxDepth int
	// inCall is set while reading the arguments of a call (Reader.Args, a tuple, a
	// wrapper call): ')' then ends values and closes whatever is open.
	inCall bool
	// python reads strings as Python's literals (Reader.Python).
	python bool
	// The first failure: where, why, and the limit that caused it, if any.
	failed   bool
	errAt    int
	errMsg   string
	errLimit error
}

func (r *repairer) init(src string, from, maxDepth int) {
	// Size the output for the text ahead, but not for all of a long response that a
	// short value starts.
	r.initSize(src, from, maxDepth, min(len(src)-from, 1<<10)+16)
}

// initSize is init with the capacity of the output.
func (r *repairer) initSize(src string, from, maxDepth, size int) {
	*r = repairer{src: src, pos: from, maxDepth: maxDepth, out: make([]byte, 0, size)}
}

// msgRepairBug is the message of the error finish and AppendValue return: the repairer wrote
// invalid JSON, which the fuzz targets report as a bug.
const msgRepairBug = "the JSON could not be repaired"

// finish checks the output. It is valid by construction; the check turns a bug into an
// error instead of a call with broken arguments. A failure recorded on the way is the
// repair's, also where reading went on past it: what failed was dropped from the output.
func (r *repairer) finish() (json.RawMessage, Repairs, error) {
	if r.failed {
		return nil, 0, r.syntaxError()
	}
	if len(r.out) == 0 || jsonscan.Check(r.out, r.maxDepth+1, jsonscan.Strict) != jsonscan.OK {
		return nil, 0, &SyntaxError{Line: 1, Column: 1, Msg: msgRepairBug}
	}
	return r.out, r.fixes, nil
}

func (r *repairer) fail(at int, msg string) bool {
	if !r.failed {
		r.failed, r.errAt, r.errMsg = true, at, msg
	}
	return false
}

func (r *repairer) tooDeep(at int) bool {
	r.fail(at, tooDeepMessage(r.maxDepth))
	r.errLimit = ErrTooDeep
	return false
}

func tooDeepMessage(maxDepth int) string {
	return "objects and arrays are nested more than " + strconv.Itoa(maxDepth) + " levels deep"
}

// syntaxError locates the failure in lines and columns.
func (r *repairer) syntaxError() *SyntaxError {
	return newSyntaxError(r.src, r.errAt, r.errLimit, r.errMsg)
}

func (r *repairer) eof() bool { return r.pos >= len(r.src) }

// space skips whitespace and comments.
func (r *repairer) space() {
	if r.pos < len(r.src) && !mayBeSpace[r.src[r.pos]] {
		return // most tokens follow the last directly
	}
	var fixes Repairs
	r.pos, fixes = SkipSpace(r.src, r.pos)
	r.fixes |= fixes
}

// mayBeSpace marks the bytes that may start whitespace or a comment.
var mayBeSpace = func() (t [256]bool) {
	for c := range t {
		t[c] = c <= ' ' || c == '/' || c == '#' || c >= utf8.RuneSelf
	}
	return t
}()

// SkipSpace returns the index of the first byte at or after s[i] that is neither
// whitespace nor in a comment, as the repairer skips them between tokens, and the
// repairs that took ([Comments], [Whitespace]).
func SkipSpace(s string, i int) (int, Repairs) {
	var fixes Repairs
	for i < len(s) {
		c := s[i]
		switch {
		case c <= ' ':
			if !jsonscan.IsSpace(c) {
				fixes |= Whitespace
			}
			i++
		case c == '/' && i+1 < len(s) && s[i+1] == '/',
			c == '#' && (i+1 == len(s) || s[i+1] <= ' ' || s[i+1] == '#'):
			fixes |= Comments
			if nl := strings.IndexByte(s[i:], '\n'); nl >= 0 {
				i += nl + 1
			} else {
				i = len(s)
			}
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			fixes |= Comments
			if e := strings.Index(s[i+2:], "*/"); e >= 0 {
				i += e + 4
			} else {
				i = len(s)
			}
		case c >= utf8.RuneSelf:
			ru, size := utf8.DecodeRuneInString(s[i:])
			if !isOtherSpace(ru) {
				return i, fixes
			}
			fixes |= Whitespace
			i += size
		default:
			return i, fixes
		}
	}
	return i, fixes
}

// IsSpace reports whether the repairer skips r between tokens as whitespace: any
// character up to ' ' (a control character other than JSON's four is repair
// [Whitespace]), and the Unicode spaces models put there.
func IsSpace(r rune) bool { return r <= ' ' || isOtherSpace(r) }

// isOtherSpace reports the non-ASCII spaces models put between tokens.
func isOtherSpace(r rune) bool {
	switch r {
	case 0x85, 0xA0, 0x1680, 0x180E, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF:
		return true
	}
	return r >= 0x2000 && r <= 0x200B
}

func (r *repairer) push(kind byte) bool {
	if r.depth >= r.maxDepth {
		return r.tooDeep(r.pos)
	}
	if r.depth < len(r.small) {
		r.small[r.depth] = kind
	} else {
		r.deep = append(r.deep[:r.depth-len(r.small)], kind)
	}
	r.depth++
	return true
}

func (r *repairer) pop() { r.depth-- }

// encloses reports whether a container of kind is open outside the innermost one.
func (r *repairer) encloses(kind byte) bool {
	for i := r.depth - 2; i >= 0; i-- {
		k := byte(0)
		if i < len(r.small) {
			k = r.small[i]
		} else {
			k = r.deep[i-len(r.small)]
		}
		if k == kind {
			return true
		}
	}
	return false
}

// scalarAhead reports whether the text at pos starts with a string, a number or a
// literal, rather than prose.
func (r *repairer) scalarAhead() bool {
	s := r.src
	c := s[r.pos]
	if jsonscan.IsDigit(c) || c == '-' && r.pos+1 < len(s) && (jsonscan.IsDigit(s[r.pos+1]) || s[r.pos+1] == '.') {
		return true
	}
	if q, _ := openQuote(s, r.pos); q != quoteNone {
		return true
	}
	if r.regexAt(r.pos) {
		return true
	}
	i := r.pos
	for i < len(s) && isWordByte(s[i]) {
		i++
	}
	if _, _, _, ok := literal(s[r.pos:i]); ok {
		return jsonscan.SkipSpace(s, i) == len(s)
	}
	return false
}

// value reads one value; the caller has checked that one starts at pos.
func (r *repairer) value() bool {
	s := r.src
	c := s[r.pos]
	switch {
	case c == '{':
		return r.object()
	case c == '[':
		return r.array()
	case c == '(':
		return r.tuple()
	case c == '-' || c == '+' || c == '.' || jsonscan.IsDigit(c):
		return r.number()
	case isWordByte(c):
		return r.word()
	}
	if q, _ := openQuote(s, r.pos); q != quoteNone {
		return r.stringValue()
	}
	if r.regexAt(r.pos) {
		return r.regex()
	}
	if c >= utf8.RuneSelf || c > ' ' && !structural[c] {
		return r.unquoted(r.pos) // #fff, /tmp/x, <b>, @user
	}
	return r.fail(r.pos, "expected a value, found "+Describe(s, r.pos))
}

// structural marks the ASCII punctuation that cannot start an unquoted string.
var structural = func() (t [256]bool) {
	for _, c := range []byte("{}[]():;,=") {
		t[c] = true
	}
	return t
}()

// startsValue reports whether a value can start at s[i].
func (r *repairer) startsValue(i int) bool {
	c := r.src[i]
	switch {
	case c == '{' || c == '[' || c == '-' || c == '+' || c == '.' || jsonscan.IsDigit(c) || isWordByte(c) || c >= utf8.RuneSelf:
		return true
	case c == '/':
		return r.regexAt(i)
	case c == '(':
		return true
	}
	q, _ := openQuote(r.src, i)
	return q != quoteNone
}

// end ends the container whose closing bracket is closer at c, which closes something
// (see closes): its own bracket is taken, the other kind of bracket too when no container
// of that kind (opened by otherOpen) encloses it, and anything else is left to the
// container it closes, this one being unclosed.
func (r *repairer) end(c, closer, otherOpen byte, trailingComma bool, unclosed Repairs) {
	if trailingComma {
		r.fixes |= TrailingComma
	}
	switch {
	case c == closer:
		r.pos++
	case (c == ']' || c == '}') && !r.encloses(otherOpen): // the other kind of bracket
		r.fixes |= MismatchedBracket
		r.pos++
	default:
		r.fixes |= unclosed
	}
}

// closes reports whether c ends the current container when it is not its own bracket.
func (r *repairer) closes(c byte) bool {
	return c == '}' || c == ']' || c == ')' && r.inCall
}

func (r *repairer) object() bool {
	r.pos++
	if !r.push('{') {
		return false
	}
	objStart := len(r.out)
	r.out = append(r.out, '{')
	s := r.src
	members := 0
	comma := false           // a comma was read since the last member
	elided := false          // a "..." stood for members
	var keyStart, keyEnd int // the last key, in out
	for {
		r.space()
		if r.eof() {
			r.fixes |= UnclosedObject
			break
		}
		c := s[r.pos]
		if c == '`' && strings.HasPrefix(s[r.pos:], "```") {
			r.fixes |= UnclosedObject // {"a": "b"``` : the fence ends the JSON
			break
		}
		if (c == '}' && r.depth == 1 || c == ']' && !r.encloses('[')) && r.objectGoesOn(r.pos+1) {
			// {"a": 1}, "b": 2} or {"a": [1]], "b": 2}: a bracket too many; the members
			// go on.
			r.fixes |= MismatchedBracket
			r.pos++
			continue
		}
		if r.closes(c) {
			r.end(c, '}', '[', comma && members > 0, UnclosedObject)
			break
		}
		if c == ',' || c == ';' {
			if members == 0 && !elided || comma {
				r.fixes |= ExtraComma
			}
			comma = true
			r.pos++
			continue
		}
		if r.ellipsis() {
			comma, elided = false, true
			continue
		}
		if r.pos == len(s)-1 && c == '"' {
			// {"a": 1, " : the text ends at a key's opening quote; nothing of it.
			r.fixes |= UnclosedObject
			r.fixes |= TruncatedValue
			r.pos++
			break
		}
		if c == '{' && r.encloses('[') {
			// [{"i":1{"i":2}]: the object's '}' is missing; the array goes on.
			r.fixes |= UnclosedObject
			break
		}
		if c == '[' && comma && members > 0 && r.out[len(r.out)-1] == ']' {
			// {"a": [1], [2], "b": 3}: the array of the last member goes on.
			if !r.continueArray() {
				return false
			}
			comma = false
			continue
		}
		if w := r.wordBeforeKey(r.pos); w > r.pos {
			// {"a": true, COMMENT "b": 1}: a word that is no member.
			r.fixes |= TrailingText
			r.pos = w
			continue
		}
		if members > 0 && !comma {
			if !r.startsKey(r.pos) {
				return r.fail(r.pos, "expected ',' or '}' after the value of "+string(r.out[keyStart:keyEnd])+", found "+Describe(s, r.pos))
			}
			r.fixes |= MissingComma
		}
		if members > 0 {
			r.out = append(r.out, ',')
		}
		keyStart = len(r.out)
		keySrc := r.pos
		if !r.key() {
			return false
		}
		keyEnd = len(r.out)
		r.space()
		if !r.eof() {
			switch c := s[r.pos]; {
			case c == ':':
				r.pos++
			case c == '=':
				r.fixes |= EqualsAsColon
				r.pos++
			case (c == ',' || c == '}') && members == 0 && r.out[keyStart] == '"':
				return r.set(objStart, keySrc, "expected ':' after the key "+string(r.out[keyStart:keyEnd])+", found "+Describe(s, r.pos))
			case c == ',' || r.closes(c):
				return r.fail(r.pos, "expected ':' after the key "+string(r.out[keyStart:keyEnd])+", found "+Describe(s, r.pos))
			case r.startsValue(r.pos):
				r.fixes |= MissingColon
			default:
				return r.fail(r.pos, "expected ':' after the key "+string(r.out[keyStart:keyEnd])+", found "+Describe(s, r.pos))
			}
		}
		r.out = append(r.out, ':')
		r.space()
		if r.eof() || s[r.pos] == ',' || r.closes(s[r.pos]) {
			if r.eof() {
				r.fixes |= TruncatedValue // a key, and the text ended before its value
			}
			r.fixes |= MissingValue
			r.out = append(r.out, "null"...)
		} else if !r.value() {
			return false
		}
		members++
		comma = false
		r.strayQuote()
	}
	r.out = append(r.out, '}')
	r.pop()
	return true
}

// continueArray reads the array at pos as more elements of the array that out ends
// with.
func (r *repairer) continueArray() bool {
	prevEmpty := r.out[len(r.out)-2] == '['
	r.out = r.out[:len(r.out)-1] // reopen it
	p := len(r.out)
	if !r.array() {
		return false
	}
	switch {
	case r.out[p+1] == ']': // [] adds nothing
		r.out = append(r.out[:p], ']')
	case prevEmpty:
		r.out = append(r.out[:p], r.out[p+1:]...)
	default:
		r.out[p] = ','
	}
	r.fixes |= MismatchedBracket
	return true
}

// objectGoesOn reports whether what follows a '}' at s[i-1] is a comma and a member
// of the object that brace closed: a quoted key followed by ':' or by its value.
func (r *repairer) objectGoesOn(i int) bool {
	s := r.src
	i = jsonscan.SkipSpace(s, i)
	if i >= len(s) || s[i] != ',' {
		return false
	}
	i = jsonscan.SkipSpace(s, i+1)
	if i >= len(s) || s[i] != '"' {
		return false
	}
	end := strings.IndexByte(s[i+1:min(len(s), i+1+128)], '"')
	if end < 0 {
		return false
	}
	j := skipSpaceAndTabs(s, i+1+end+1)
	return j < len(s) && (s[j] == ':' || s[j] == '"')
}

// wordBeforeKey returns the index of a quoted key (followed by ':') that a bare word
// at s[i] and spaces stand before, or i.
func (r *repairer) wordBeforeKey(i int) int {
	s := r.src
	j := wordEnd(s, i)
	k := skipSpaceAndTabs(s, j)
	if j > i && k < len(s) && s[k] == '}' && i > 0 && (s[i-1] == ' ' || s[i-1] == '\t') {
		return k // {"a": "b" AAAA }: a word after the last member
	}
	if j == i || k == j || k >= len(s) || s[k] != '"' || !r.keyAt(k) {
		return i
	}
	if _, _, _, ok := literal(s[i:j]); ok {
		return i
	}
	return k
}

// set reads an object whose first key has neither colon nor value, {'a', 'b'}: a
// Python set, written in out from objStart as the array of its members.
func (r *repairer) set(objStart, first int, notSet string) bool {
	s := r.src
	at := r.pos
	r.out = append(r.out[:objStart], '[')
	r.pos = first // the members are values: {1, 2} is [1, 2]
	r.pop()
	if !r.push('[') {
		return false
	}
	n := 0
	for {
		r.space()
		if r.eof() || s[r.pos] == ':' {
			// {"a", cut off, or {"a", "b": 1}: a key without its colon, not a set.
			return r.fail(at, notSet)
		}
		c := s[r.pos]
		if c == ',' {
			r.pos++
			continue
		}
		if r.closes(c) {
			r.pos++
			break
		}
		if !r.startsValue(r.pos) {
			return r.fail(r.pos, "expected a value or '}', found "+Describe(s, r.pos))
		}
		if n > 0 {
			r.out = append(r.out, ',')
		}
		if !r.value() {
			return false
		}
		n++
	}
	r.pop()
	r.out = append(r.out, ']')
	r.fixes |= PythonLiterals
	return true
}

// startsKey reports whether an object key can start at s[i].
func (r *repairer) startsKey(i int) bool {
	if q, _ := openQuote(r.src, i); q != quoteNone {
		return true
	}
	c := r.src[i]
	return isWordByte(c) || jsonscan.IsDigit(c) || c == '-' || c >= utf8.RuneSelf
}

// key reads an object key: a quoted string or a bare word.
func (r *repairer) key() bool {
	s := r.src
	if q, _ := openQuote(s, r.pos); q != quoteNone {
		r.str(true, true)
		return !r.failed
	}
	if c := s[r.pos]; !isWordByte(c) && c != '-' && c < utf8.RuneSelf {
		return r.fail(r.pos, "expected a quoted key or '}', found "+Describe(s, r.pos))
	}
	start := r.pos
	plain := true // no byte to escape
	for r.pos < len(s) && !bareKeyStop[s[r.pos]] {
		plain = plain && jsonscan.Plain(s[r.pos])
		r.pos++
	}
	r.fixes |= UnquotedKeys
	if plain {
		r.out = append(append(append(r.out, '"'), s[start:r.pos]...), '"')
	} else {
		r.appendQuoted(s[start:r.pos])
	}
	if r.pos < len(s) && s[r.pos] == '"' {
		if j := skipSpaceAndTabs(s, r.pos+1); j < len(s) && s[j] == ':' {
			r.pos++ // {key": 1}: the opening quote is missing
			r.fixes |= UnclosedString | openQuoteLost
		}
	}
	return true
}

// bareKeyStop marks the bytes that end an unquoted key.
var bareKeyStop = func() (t [256]bool) {
	for c := 0; c <= ' '; c++ {
		t[c] = true
	}
	for _, c := range []byte(`:=,;{}[]()"'`) {
		t[c] = true
	}
	return t
}()

func (r *repairer) array() bool {
	_, _, ok := r.list(']')
	return ok
}

// list reads the elements of an array, or of a tuple when closer is ')', up to its
// closer, and writes them as a JSON array; it returns how many there were and whether
// a comma was read.
func (r *repairer) list(closer byte) (n int, anyComma, ok bool) {
	what := "array"
	if closer == ')' {
		what = "tuple"
	}
	r.pos++
	if !r.push('[') {
		return 0, false, false
	}
	r.out = append(r.out, '[')
	s := r.src
	comma := false
	elided := false
	for {
		r.space()
		if r.eof() {
			r.fixes |= UnclosedArray
			break
		}
		c := s[r.pos]
		if c == '`' && strings.HasPrefix(s[r.pos:], "```") {
			r.fixes |= UnclosedArray
			break
		}
		if c == '}' {
			if j := jsonscan.SkipSpace(s, r.pos+1); j < len(s) && s[j] == ',' {
				j = jsonscan.SkipSpace(s, j+1)
				switch {
				case j < len(s) && s[j] == '"' && r.keyAt(j) && r.encloses('{'):
					// {"a": [1, 2}, "b": 3}: '}' written for ']'.
					r.fixes |= MismatchedBracket
					r.pos++
					r.out = append(r.out, ']')
					r.pop()
					return n, anyComma, true
				case j < len(s) && s[j] == '{' && !r.encloses('{'):
					// [{"a": 1}}, {"a": 2}]: one '}' too many.
					r.fixes |= MismatchedBracket
					r.pos++
					continue
				}
			}
		}
		if r.closes(c) {
			r.end(c, closer, '{', comma && n > 0, UnclosedArray)
			break
		}
		if c == ',' {
			anyComma = true
			if n == 0 && !elided || comma {
				r.fixes |= ExtraComma
			}
			comma = true
			r.pos++
			continue
		}
		if r.ellipsis() {
			comma, elided = false, true
			continue
		}
		if r.pos == len(s)-1 && c == '"' {
			// [1, " : the text ends at an element's opening quote; nothing of it.
			r.fixes |= UnclosedArray
			r.fixes |= TruncatedValue
			r.pos++
			break
		}
		if n > 0 && !comma {
			if !r.startsValue(r.pos) {
				return n, anyComma, r.fail(r.pos, "expected ',' or '"+string(closer)+"' after an "+what+" element, found "+Describe(s, r.pos))
			}
			r.fixes |= MissingComma
		}
		if n > 0 {
			r.out = append(r.out, ',')
		}
		if !r.startsValue(r.pos) {
			return n, anyComma, r.fail(r.pos, "expected a value or '"+string(closer)+"', found "+Describe(s, r.pos))
		}
		elem := len(r.out)
		if !r.value() {
			return n, anyComma, false
		}
		n++
		comma = false
		r.strayQuote()
		if r.out[elem] == '"' {
			if j := skipSpaceAndTabs(s, r.pos); j < len(s) && s[j] == ':' {
				// ["key": "value"]: an object whose braces are missing.
				r.pos = j
				if !r.membersInArray(elem) {
					return n, anyComma, false
				}
			}
		}
	}
	r.out = append(r.out, ']')
	r.pop()
	return n, anyComma, true
}

// membersInArray reads, at the ':' after the string written at out[elem] in an array,
// the object that string is the first key of ({"key": …}, its braces missing), up to
// the ']' or '}' that ends it.
func (r *repairer) membersInArray(elem int) bool {
	s := r.src
	r.out = append(r.out, 0)
	copy(r.out[elem+1:], r.out[elem:])
	r.out[elem] = '{'
	r.fixes |= UnclosedObject | objectInArray
	for {
		r.pos++ // the ':'
		r.out = append(r.out, ':')
		r.space()
		if r.eof() || !r.startsValue(r.pos) {
			r.fixes |= MissingValue
			r.out = append(r.out, "null"...)
		} else if !r.value() {
			return false
		}
		r.space()
		if r.pos < len(s) && s[r.pos] == ',' {
			if j := jsonscan.SkipSpace(s, r.pos+1); j < len(s) && s[j] == '"' && r.keyAt(j) {
				r.pos = j
				r.out = append(r.out, ',')
				r.str(true, true)
				if r.failed {
					return false
				}
				r.pos = skipSpaceAndTabs(s, r.pos)
				continue
			}
		}
		break
	}
	r.out = append(r.out, '}')
	if r.pos < len(s) && s[r.pos] == '}' {
		r.pos++
	}
	return true
}

// strayQuote skips a double quote right after a value that ends the value: the
// closing quote of a string whose opening one is missing ({"a": 12", [true", 1]).
func (r *repairer) strayQuote() {
	if r.quoteEnds(r.pos) {
		r.fixes |= UnclosedString | openQuoteLost
		r.pos++
	}
}

// quoteEnds reports whether s[i] is a double quote followed by what ends a value.
func (r *repairer) quoteEnds(i int) bool {
	s := r.src
	if i >= len(s) || s[i] != '"' {
		return false
	}
	j := skipSpaceAndTabs(s, i+1)
	return j == len(s) || s[j] == ',' || s[j] == '}' || s[j] == ']' || s[j] == '\n' || s[j] == '\r'
}

// ellipsis skips a "..." or "…" standing for elided elements.
func (r *repairer) ellipsis() bool {
	if c := r.src[r.pos]; c != '.' && c != 0xE2 { // "…" starts with 0xE2
		return false
	}
	return r.ellipsisSlow()
}

func (r *repairer) ellipsisSlow() bool {
	rest := r.src[r.pos:]
	switch {
	case strings.HasPrefix(rest, "..."):
		r.pos += 3
	case strings.HasPrefix(rest, "…"):
		r.pos += len("…")
	default:
		return false
	}
	for r.pos < len(r.src) && r.src[r.pos] == '.' {
		r.pos++
	}
	r.fixes |= Ellipsis
	return true
}

// delimits reports whether s[i] can follow a number or a literal.
func (r *repairer) delimits(i int) bool {
	s := r.src
	if i >= len(s) {
		return true
	}
	switch c := s[i]; c {
	case ',', '}', ']', ':', ';', '"', '\'', '[', '{':
		return true
	case ')':
		return r.inCall
	case '/':
		return i+1 < len(s) && (s[i+1] == '/' || s[i+1] == '*')
	default:
		if c <= ' ' {
			return true
		}
		if c >= utf8.RuneSelf {
			ru, _ := utf8.DecodeRuneInString(s[i:])
			return isOtherSpace(ru)
		}
		return false
	}
}

func (r *repairer) number() bool {
	s := r.src
	start := r.pos
	i := start
	sign := byte(0)
	if s[i] == '+' || s[i] == '-' {
		sign = s[i]
		i++
	}
	if i < len(s) && isWordByte(s[i]) && !jsonscan.IsDigit(s[i]) {
		// -Infinity, +Infinity, or a word with a dash.
		j := i
		for j < len(s) && isWordByte(s[j]) {
			j++
		}
		if s[i:j] == "Infinity" && r.delimits(j) {
			r.fixes |= NonStandardLiteral
			r.out = append(r.out, "null"...)
			r.pos = j
			return true
		}
		return r.unquoted(start)
	}
	intStart := i
	i = jsonscan.Digits(s, i)
	if i < len(s) && s[i] == '_' && i > intStart {
		if _, ok := r.underscoreNumber(start, intStart); ok {
			return true
		}
	}
	intEnd := i
	frac := -1 // index of '.', if any
	if i < len(s) && s[i] == '.' {
		frac = i
		i = jsonscan.Digits(s, i+1)
	}
	fracEnd := i
	exp := -1
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') && (intEnd > intStart || fracEnd > frac+1) {
		exp = i
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		i = jsonscan.Digits(s, i)
	}
	if intEnd == intStart && exp < 0 && r.delimits(i) && (frac < 0 && sign == '-' || frac >= 0 && fracEnd == frac+1 && sign == 0) {
		// A lone "-" or ".": a number cut short, as "-0" and "0.0".
		r.pos = i
		r.fixes |= NumberFormat
		if i == len(s) {
			r.fixes |= TruncatedValue
		}
		if frac >= 0 {
			r.out = append(r.out, "0.0"...)
		} else {
			r.out = append(r.out, "-0"...)
		}
		return true
	}
	if !r.delimits(i) || intEnd == intStart && (frac < 0 || fracEnd == frac+1) ||
		intEnd-intStart > 1 && s[intStart] == '0' {
		// 10mm, 2024-01-01, 0x1F, 007, a lone "-": a word, not a number.
		return r.unquoted(start)
	}
	r.pos = i
	if i == len(s) {
		r.fixes |= TruncatedValue // the number may have had more digits
	}
	if sign != '+' && intEnd > intStart && (frac < 0 || fracEnd > frac+1) && (exp < 0 || jsonscan.IsDigit(s[i-1])) {
		r.out = append(r.out, s[start:i]...) // already JSON
		return true
	}
	r.fixes |= NumberFormat
	if sign == '-' {
		r.out = append(r.out, '-')
	}
	if intEnd == intStart {
		r.out = append(r.out, '0')
	}
	r.out = append(r.out, s[intStart:intEnd]...)
	if frac >= 0 {
		r.out = append(r.out, '.')
		if fracEnd == frac+1 {
			r.out = append(r.out, '0')
		} else {
			r.out = append(r.out, s[frac+1:fracEnd]...)
		}
	}
	if exp >= 0 {
		r.out = append(r.out, s[exp:i]...)
		if !jsonscan.IsDigit(s[i-1]) {
			r.out = append(r.out, '0')
		}
	}
	return true
}

// underscoreNumber reads a number written with Python's digit separators (82_461_110,
// 1_234.5_6) as the number: the digits of s[digits:] in groups joined by single '_', an
// optional fraction and exponent, then what ends a value. It writes nothing and returns
// false when s holds no such number.
func (r *repairer) underscoreNumber(start, digits int) (int, bool) {
	s := r.src
	group := func(i int) int { // digits, '_' only between two digits
		for i < len(s) && jsonscan.IsDigit(s[i]) {
			i++
			if i+1 < len(s) && s[i] == '_' && jsonscan.IsDigit(s[i+1]) {
				i++
			}
		}
		return i
	}
	i := group(digits)
	if i < len(s) && s[i] == '.' && i+1 < len(s) && jsonscan.IsDigit(s[i+1]) {
		i = group(i + 1)
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		if j < len(s) && jsonscan.IsDigit(s[j]) {
			i = group(j)
		}
	}
	if !r.delimits(i) || s[digits] == '0' {
		return 0, false // 0_1 or 00_1 has a leading zero: a word
	}
	if s[start] == '-' {
		r.out = append(r.out, '-')
	}
	for _, c := range []byte(s[digits:i]) {
		if c != '_' {
			r.out = append(r.out, c)
		}
	}
	r.fixes |= NumberFormat
	r.pos = i
	return i, true
}

// literal returns the JSON literal that word stands for and the repair that reading it
// as that is (none when it is already JSON); ok is false for other words.
func literal(word string) (json string, f Repairs, repaired, ok bool) {
	switch word {
	case "true", "false", "null":
		return word, 0, false, true
	case "True", "TRUE":
		return "true", PythonLiterals, true, true
	case "False", "FALSE":
		return "false", PythonLiterals, true, true
	case "None", "NULL", "Null":
		return "null", PythonLiterals, true, true
	case "NaN", "Infinity", "undefined":
		return "null", NonStandardLiteral, true, true
	}
	return "", 0, false, false
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$'
}

// word reads a literal, or else an unquoted string.
func (r *repairer) word() bool {
	s := r.src
	start := r.pos
	i := start
	for i < len(s) && isWordByte(s[i]) {
		i++
	}
	w := s[start:i]
	if i < len(s) && s[i] == '(' && !r.inCall {
		return r.wrapperCall(i)
	}
	if r.delimits(i) && !r.quoteEnds(i) {
		if lit, f, repaired, ok := literal(w); ok {
			if repaired {
				r.fixes |= f
			}
			r.out = append(r.out, lit...)
			r.pos = i
			return true
		}
		if i == len(s) {
			for _, full := range [...]string{"true", "false", "null"} {
				if strings.HasPrefix(full, w) {
					r.fixes |= TruncatedLiteral
					r.fixes |= TruncatedValue
					r.out = append(r.out, full...)
					r.pos = i
					return true
				}
			}
		}
	}
	return r.unquoted(start)
}

// tuple reads a Python tuple, (1, 2), as an array; a value in parentheses without a
// comma, (1), is that value.
func (r *repairer) tuple() bool {
	inCall := r.inCall
	r.inCall = true // ')' ends the values and closes the tuple
	start := len(r.out)
	n, anyComma, ok := r.list(')')
	r.inCall = inCall
	if !ok {
		return false
	}
	r.fixes |= PythonLiterals
	if n == 1 && !anyComma {
		r.out = append(r.out[:start], r.out[start+1:len(r.out)-1]...) // (1) is 1
	}
	return true
}

// regexAt reports whether a regular expression literal starts at s[i]: a '/' that
// starts no comment, closed by another on the same line.
func (r *repairer) regexAt(i int) bool {
	s := r.src
	if s[i] != '/' || i+1 >= len(s) || s[i+1] == '/' || s[i+1] == '*' {
		return false
	}
	end, ok := regexEnd(s, i)
	if !ok {
		return false
	}
	for end < len(s) && strings.IndexByte("dgimsuy", s[end]) >= 0 {
		end++ // flags
	}
	return r.delimits(end) // /tmp/x or /usr/local/bin are paths, not /regex/
}

// regexEnd returns the index after the '/' that closes the regular expression at s[i].
func regexEnd(s string, i int) (int, bool) {
	for j := i + 1; j < len(s) && j-i < 1<<10; j++ {
		switch s[j] {
		case '\\':
			j++
		case '/':
			return j + 1, true
		case '\n':
			return 0, false
		}
	}
	return 0, false
}

// regex reads a regular expression literal as the string it is written as: /\d+/ is
// "/\\d+/".
func (r *repairer) regex() bool {
	end, _ := regexEnd(r.src, r.pos)
	for end < len(r.src) && strings.IndexByte("dgimsuy", r.src[end]) >= 0 {
		end++
	}
	r.fixes |= UnquotedString
	r.appendQuoted(r.src[r.pos:end])
	r.pos = end
	return true
}

// wrapperCall reads the value inside a call that wraps it, at s[open] = '(': JSONP
// (callback({...});) and MongoDB's types (ObjectId("123"), NumberLong(2)) are their
// argument.
func (r *repairer) wrapperCall(open int) bool {
	s := r.src
	r.pos = open + 1
	r.space()
	if r.pos >= len(s) || s[r.pos] == ')' || !r.startsValue(r.pos) {
		return r.fail(r.pos, "expected a value in the parentheses, found "+Describe(s, r.pos))
	}
	r.inCall = true
	ok := r.value()
	r.inCall = false
	if !ok {
		return false
	}
	r.space()
	if r.pos < len(s) && s[r.pos] == ')' {
		r.pos++
	}
	if r.depth == 0 {
		if r.space(); r.pos < len(s) && s[r.pos] == ';' {
			r.pos++
		}
	}
	r.fixes |= WrapperCall
	return true
}

// unquoted reads a string written without quotes: up to the end of the line or the
// next ',', '}' or ']'.
func (r *repairer) unquoted(start int) bool {
	s := r.src
	i := start
	open := 0 // braces and brackets the text opened: {text: words{in braces}}
	for i < len(s) {
		c := s[i]
		if (c == '}' || c == ']') && open > 0 {
			open--
			i++
			continue
		}
		if c == '{' || c == '[' {
			open++
		}
		if c == ',' && r.depth > 0 && !r.inArray() && !r.inCall && !r.memberAhead(i+1) {
			i++ // {"a": sic tamet, quick brown fox. "b": 1}: no member follows the comma
			continue
		}
		if c == ',' || c == '}' || c == ']' || c == '\n' || c == '\r' || c == ')' && r.inCall {
			break
		}
		if c == '"' && i > start && s[i-1] == ' ' && r.keyAt(i) {
			break // {"a": value "b": 1}: the comma is missing
		}
		i++
	}
	if i < len(s) && s[i] == ',' && !r.inArray() {
		// {"a": ipsum, sic, datum.", "b": 1}: a string whose opening quote is
		// missing, commas and all, when its closing quote ends the value.
		limit := min(len(s), i+256)
		if k := strings.IndexAny(s[i:limit], "\":\n{}[]"); k >= 0 && s[i+k] == '"' && r.quoteEnds(i+k) {
			i += k + 1
		}
	}
	tok := strings.TrimRight(s[start:i], " \t")
	if tok == "" {
		return r.fail(start, "expected a value, found "+Describe(s, start))
	}
	if len(tok) > 1 && tok[len(tok)-1] == '"' && strings.IndexByte(tok[:len(tok)-1], '"') < 0 {
		// [abc", 1] or {"a": foo"}: a string whose opening quote is missing.
		r.fixes |= UnclosedString | openQuoteLost
		r.pos = start + len(tok)
		r.out = append(r.out, '"')
		r.out = r.stringText(tok[:len(tok)-1], start)
		r.out = append(r.out, '"')
		// Its escapes are read as a quoted string's are, and refused alike: {"a": x\u"}
		// is no "x" (the escape and what follows it dropped), as {"a": "x\u"} is none.
		return !r.failed
	}
	if i == len(s) {
		r.fixes |= TruncatedValue
	}
	r.pos = start + len(tok)
	r.fixes |= UnquotedString
	if strings.IndexByte(tok, '"') >= 0 {
		r.fixes |= quoteInUnquoted
	}
	r.appendQuoted(tok)
	return true
}

// keyAt reports whether a quoted key starts at s[i]: a short string followed by ':'.
func (r *repairer) keyAt(i int) bool {
	s := r.src
	end := strings.IndexByte(s[i+1:min(len(s), i+1+128)], '"')
	if end < 0 {
		return false
	}
	j := skipSpaceAndTabs(s, i+1+end+1)
	return j < len(s) && s[j] == ':'
}

// stringText writes t, the text of a double-quoted string that starts at s[at], as
// the text of a JSON string: its escapes kept, quotes and control characters escaped.
// An escape it cannot read (\u without four hex digits) fails the repairer (r.failed),
// and the text after it is not written.
func (r *repairer) stringText(t string, at int) []byte {
	out := r.out
	for i := 0; i < len(t); {
		switch c := t[i]; {
		case c == '\\':
			var next int
			next, out = r.escape(quoteDouble, at+i, out, false)
			if r.failed {
				return out
			}
			i = next - at
		case c == '"':
			out = append(out, '\\', '"')
			i++
		case c < ' ':
			r.fixes |= ControlCharacter
			out = appendControl(out, c)
			i++
		case c >= utf8.RuneSelf:
			ru, n := utf8.DecodeRuneInString(t[i:])
			out = r.appendRune(out, ru, t[i:i+n])
			i += n
		default:
			out = append(out, c)
			i++
		}
	}
	return out
}

// appendQuoted writes tok as a JSON string.
func (r *repairer) appendQuoted(tok string) {
	var fixes Repairs
	r.out, fixes = AppendString(r.out, tok)
	r.fixes |= fixes
}
