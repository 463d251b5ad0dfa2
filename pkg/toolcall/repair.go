package toolcall

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// Default limits, used where Options leaves a field zero.
const (
	DefaultMaxInputSize = 1 << 20 // bytes of one response, or of one text given to RepairJSON
	DefaultMaxDepth     = 100     // nested objects and arrays
	DefaultMaxCalls     = 64      // calls in one response

	// maxDepthCap bounds Options.MaxDepth: the repairer recurses once per level.
	maxDepthCap = 10000
)

// RepairJSON returns s as valid JSON, with the repairs it needed.
//
// It works in three layers. Valid JSON is returned unchanged, with no repairs, at the
// cost of one validation and one copy. Anything else is read by a tolerant single-pass
// parser that fixes what models write (see the Repair… constants) and returns compact
// JSON. What even that parser cannot read yields a *SyntaxError saying where and what
// was expected. Input over DefaultMaxInputSize bytes or nested over DefaultMaxDepth
// levels is refused with a *SyntaxError wrapping ErrTooLarge or ErrTooDeep.
func RepairJSON(s string) (json.RawMessage, []string, error) {
	out, fixes, err := repairJSON(s, DefaultMaxDepth, DefaultMaxInputSize)
	if err != nil {
		return nil, nil, err
	}
	return out, fixes.names(), nil
}

// RepairArguments returns s, the arguments of a tool call, as a JSON object: what
// RepairJSON makes of it, unwrapped when that is a JSON string holding the object
// ("{\"p\": 10}", as OpenAI's API writes arguments), and {} for blank text or null.
// Anything else is a *SyntaxError.
func RepairArguments(s string) (json.RawMessage, []string, error) {
	v, fixes, err := repairArguments(s, DefaultMaxDepth, DefaultMaxInputSize)
	if err != nil {
		return nil, nil, err
	}
	return v, fixes.names(), nil
}

func repairArguments(s string, maxDepth, maxSize int) (json.RawMessage, fixSet, error) {
	if strings.TrimSpace(s) == "" {
		return json.RawMessage("{}"), 0, nil
	}
	v, fixes, err := repairJSON(s, maxDepth, maxSize)
	if err != nil {
		return nil, 0, err
	}
	v = bytes.TrimSpace(v)
	switch v[0] {
	case '{':
		return v, fixes, nil
	case 'n':
		return json.RawMessage("{}"), fixes, nil
	case '"':
		var inner string
		if json.Unmarshal(v, &inner) == nil && strings.TrimSpace(inner) != "" {
			obj, innerFixes, err := repairJSON(inner, maxDepth, maxSize)
			if err != nil {
				return nil, 0, err
			}
			if obj = bytes.TrimSpace(obj); obj[0] == '{' {
				return obj, fixes | innerFixes | 1<<fixStringArguments, nil
			}
		}
	}
	return nil, 0, &SyntaxError{Line: 1, Column: 1,
		Msg: "expected a JSON object of arguments, found " + jsonKind(string(v))}
}

// repairJSON is RepairJSON with limits and the repairs as a set.
func repairJSON(s string, maxDepth, maxSize int) (json.RawMessage, fixSet, error) {
	if len(s) > maxSize {
		return nil, 0, &SyntaxError{Line: 1, Column: 1, Err: ErrTooLarge,
			Msg: fmt.Sprintf("the text is %d bytes, the limit is %d", len(s), maxSize)}
	}
	end, res := scanStrictValue(s, 0, maxDepth)
	switch {
	case res == strictOK && skipJSONSpace(s, end) == len(s):
		return json.RawMessage(s), 0, nil
	case res == strictTooDeep:
		return nil, 0, tooDeepError(s, end, maxDepth)
	}
	start, end := 0, len(s)
	var fixes fixSet
	if a, b, ok := fenceBody(s); ok {
		start, end = a, b
		fixes.add(fixCodeFence)
	}
	r := newRepairer(s[:end], maxDepth)
	r.fixes = fixes
	r.pos = start
	r.space()
	if r.pos >= len(r.src) {
		return nil, 0, newSyntaxError(s, r.pos, nil, "expected a JSON value, found %s", describeAt(s, r.pos))
	}
	if c := r.src[r.pos]; c != '{' && c != '[' && !r.scalarAhead() {
		i := strings.IndexAny(r.src[r.pos:], "{[")
		if i < 0 {
			return nil, 0, newSyntaxError(s, r.pos, nil, "expected a JSON object or array, found %s", describeAt(s, r.pos))
		}
		r.pos += i
		r.fixes.add(fixLeadingText)
	}
	if !r.value() {
		return nil, 0, r.err
	}
	if r.space(); r.pos < len(r.src) {
		r.fixes.add(fixTrailingText)
	}
	return r.finish()
}

// repairValue reads one JSON value starting at s[from] (after whitespace and comments),
// repairing it, and returns it with the index after it. Valid JSON costs one scan and
// no copy.
func repairValue(s string, from, maxDepth int) (string, int, fixSet, error) {
	end, res := scanStrictValue(s, from, maxDepth)
	switch res {
	case strictOK:
		return s[skipJSONSpace(s, from):end], end, 0, nil
	case strictTooDeep:
		return "", 0, 0, tooDeepError(s, end, maxDepth)
	}
	r := newRepairer(s, maxDepth)
	r.pos = from
	r.space()
	if r.pos >= len(s) {
		return "", 0, 0, newSyntaxError(s, r.pos, nil, "expected a JSON value, found %s", describeAt(s, r.pos))
	}
	if !r.value() {
		return "", 0, 0, r.err
	}
	end = r.pos
	out, fixes, err := r.finish()
	if err != nil {
		return "", 0, 0, err
	}
	// out is never written again.
	return unsafe.String(&out[0], len(out)), end, fixes, nil
}

func tooDeepError(s string, at, maxDepth int) error {
	return newSyntaxError(s, at, ErrTooDeep, "objects and arrays are nested more than %d levels deep", maxDepth)
}

// fenceBody returns the span inside a ``` code fence when s, apart from surrounding
// whitespace, is one.
func fenceBody(s string) (start, end int, ok bool) {
	i := skipJSONSpace(s, 0)
	if !strings.HasPrefix(s[i:], "```") {
		return 0, 0, false
	}
	nl := strings.IndexByte(s[i:], '\n')
	if nl < 0 {
		return 0, 0, false
	}
	start = i + nl + 1
	end = len(s)
	if j := strings.LastIndex(s[start:], "```"); j >= 0 {
		end = start + j
	}
	return start, end, true
}

// repairer is the tolerant parser: recursive descent over src from pos, writing compact
// JSON to out. Every method consumes input, so a pass is linear in the input.
type repairer struct {
	src      string
	pos      int
	out      []byte
	fixes    fixSet
	stack    []byte // the open containers, '{' or '[', innermost last
	maxDepth int
	// inCall is set while reading a pythonic call's arguments: ')' then ends values and
	// closes whatever is open.
	inCall bool
	err    *SyntaxError
}

func newRepairer(src string, maxDepth int) *repairer {
	return &repairer{src: src, maxDepth: maxDepth, out: make([]byte, 0, len(src)+16)}
}

// finish checks the output. It is valid by construction; the check turns a bug into an
// error instead of a call with broken arguments.
func (r *repairer) finish() (json.RawMessage, fixSet, error) {
	if len(r.out) == 0 || checkStrict(unsafe.String(&r.out[0], len(r.out)), r.maxDepth+1) != strictOK {
		return nil, 0, &SyntaxError{Line: 1, Column: 1, Msg: "the JSON could not be repaired"}
	}
	return r.out, r.fixes, nil
}

func (r *repairer) fail(at int, format string, args ...any) bool {
	if r.err == nil {
		r.err = newSyntaxError(r.src, at, nil, format, args...)
	}
	return false
}

func (r *repairer) eof() bool { return r.pos >= len(r.src) }

// space skips whitespace and comments.
func (r *repairer) space() {
	s := r.src
	for r.pos < len(s) {
		c := s[r.pos]
		switch {
		case c <= ' ':
			if !isJSONSpace(c) {
				r.fixes.add(fixWhitespace)
			}
			r.pos++
		case c == '/' && r.pos+1 < len(s) && s[r.pos+1] == '/',
			c == '#' && (r.pos+1 == len(s) || s[r.pos+1] <= ' ' || s[r.pos+1] == '#'):
			r.fixes.add(fixComments)
			if nl := strings.IndexByte(s[r.pos:], '\n'); nl >= 0 {
				r.pos += nl + 1
			} else {
				r.pos = len(s)
			}
		case c == '/' && r.pos+1 < len(s) && s[r.pos+1] == '*':
			r.fixes.add(fixComments)
			if e := strings.Index(s[r.pos+2:], "*/"); e >= 0 {
				r.pos += e + 4
			} else {
				r.pos = len(s)
			}
		case c >= utf8.RuneSelf:
			ru, size := utf8.DecodeRuneInString(s[r.pos:])
			if !isOtherSpace(ru) {
				return
			}
			r.fixes.add(fixWhitespace)
			r.pos += size
		default:
			return
		}
	}
}

// isOtherSpace reports the non-ASCII spaces models put between tokens.
func isOtherSpace(r rune) bool {
	switch r {
	case 0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF:
		return true
	}
	return r >= 0x2000 && r <= 0x200B
}

func (r *repairer) push(kind byte) bool {
	if len(r.stack) >= r.maxDepth {
		if r.err == nil {
			r.err = newSyntaxError(r.src, r.pos, ErrTooDeep, "objects and arrays are nested more than %d levels deep", r.maxDepth)
		}
		return false
	}
	r.stack = append(r.stack, kind)
	return true
}

func (r *repairer) pop() { r.stack = r.stack[:len(r.stack)-1] }

// encloses reports whether a container of kind is open outside the innermost one.
func (r *repairer) encloses(kind byte) bool {
	for i := len(r.stack) - 2; i >= 0; i-- {
		if r.stack[i] == kind {
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
	if c == '-' || isDigit(c) {
		return true
	}
	if q, _ := openQuote(s, r.pos); q != quoteNone {
		return true
	}
	i := r.pos
	for i < len(s) && isWordByte(s[i]) {
		i++
	}
	if _, ok := literals[s[r.pos:i]]; ok {
		return skipJSONSpace(s, i) == len(s)
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
	case c == '-' || c == '+' || c == '.' || isDigit(c):
		return r.number()
	case isWordByte(c):
		return r.word()
	}
	if q, _ := openQuote(s, r.pos); q != quoteNone {
		r.stringValue()
		return true
	}
	if c >= utf8.RuneSelf || c > ' ' && !structural[c] {
		return r.unquoted(r.pos) // #fff, /tmp/x, <b>, @user
	}
	return r.fail(r.pos, "expected a value, found %s", describeAt(s, r.pos))
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
	case c == '{' || c == '[' || c == '-' || c == '+' || c == '.' || isDigit(c) || isWordByte(c) || c >= utf8.RuneSelf:
		return true
	}
	q, _ := openQuote(r.src, i)
	return q != quoteNone
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
	r.out = append(r.out, '{')
	s := r.src
	members := 0
	comma := false   // a comma was read since the last member
	elided := false // a "..." stood for members
	lastKey := ""
	for {
		r.space()
		if r.eof() {
			r.fixes.add(fixUnclosedObject)
			break
		}
		c := s[r.pos]
		if r.closes(c) {
			if comma && members > 0 {
				r.fixes.add(fixTrailingComma)
			}
			if c == '}' {
				r.pos++
			} else if c == ']' && !r.encloses('[') {
				r.fixes.add(fixMismatchedBracket)
				r.pos++
			} else {
				r.fixes.add(fixUnclosedObject) // leave c to the container it closes
			}
			break
		}
		if c == ',' || c == ';' {
			if members == 0 && !elided || comma {
				r.fixes.add(fixExtraComma)
			}
			comma = true
			r.pos++
			continue
		}
		if r.ellipsis() {
			comma, elided = false, true
			continue
		}
		if members > 0 && !comma {
			if !r.startsKey(r.pos) {
				return r.fail(r.pos, "expected ',' or '}' after the value of %s, found %s", lastKey, describeAt(s, r.pos))
			}
			r.fixes.add(fixMissingComma)
		}
		if members > 0 {
			r.out = append(r.out, ',')
		}
		keyStart := len(r.out)
		if !r.key() {
			return false
		}
		lastKey = string(r.out[keyStart:])
		r.space()
		if !r.eof() {
			switch c := s[r.pos]; {
			case c == ':':
				r.pos++
			case c == '=':
				r.fixes.add(fixEqualsAsColon)
				r.pos++
			case c == ',' || r.closes(c):
			case r.startsValue(r.pos):
				r.fixes.add(fixMissingColon)
			default:
				return r.fail(r.pos, "expected ':' after the key %s, found %s", lastKey, describeAt(s, r.pos))
			}
		}
		r.out = append(r.out, ':')
		r.space()
		if r.eof() || s[r.pos] == ',' || r.closes(s[r.pos]) {
			r.fixes.add(fixMissingValue)
			r.out = append(r.out, "null"...)
		} else if !r.value() {
			return false
		}
		members++
		comma = false
	}
	r.out = append(r.out, '}')
	r.pop()
	return true
}

// startsKey reports whether an object key can start at s[i].
func (r *repairer) startsKey(i int) bool {
	if q, _ := openQuote(r.src, i); q != quoteNone {
		return true
	}
	c := r.src[i]
	return isWordByte(c) || isDigit(c) || c == '-' || c >= utf8.RuneSelf
}

// key reads an object key: a quoted string or a bare word.
func (r *repairer) key() bool {
	s := r.src
	if q, _ := openQuote(s, r.pos); q != quoteNone {
		r.str(true, true)
		return true
	}
	if !r.startsKey(r.pos) {
		return r.fail(r.pos, "expected a quoted key or '}', found %s", describeAt(s, r.pos))
	}
	start := r.pos
	for r.pos < len(s) && !bareKeyStop[s[r.pos]] {
		r.pos++
	}
	r.fixes.add(fixUnquotedKeys)
	r.appendQuoted(s[start:r.pos])
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
	r.pos++
	if !r.push('[') {
		return false
	}
	r.out = append(r.out, '[')
	s := r.src
	n := 0
	comma := false
	elided := false
	for {
		r.space()
		if r.eof() {
			r.fixes.add(fixUnclosedArray)
			break
		}
		c := s[r.pos]
		if r.closes(c) {
			if comma && n > 0 {
				r.fixes.add(fixTrailingComma)
			}
			if c == ']' {
				r.pos++
			} else if c == '}' && !r.encloses('{') {
				r.fixes.add(fixMismatchedBracket)
				r.pos++
			} else {
				r.fixes.add(fixUnclosedArray)
			}
			break
		}
		if c == ',' {
			if n == 0 && !elided || comma {
				r.fixes.add(fixExtraComma)
			}
			comma = true
			r.pos++
			continue
		}
		if r.ellipsis() {
			comma, elided = false, true
			continue
		}
		if n > 0 && !comma {
			if !r.startsValue(r.pos) {
				return r.fail(r.pos, "expected ',' or ']' after an array element, found %s", describeAt(s, r.pos))
			}
			r.fixes.add(fixMissingComma)
		}
		if n > 0 {
			r.out = append(r.out, ',')
		}
		if !r.startsValue(r.pos) {
			return r.fail(r.pos, "expected a value or ']', found %s", describeAt(s, r.pos))
		}
		if !r.value() {
			return false
		}
		n++
		comma = false
	}
	r.out = append(r.out, ']')
	r.pop()
	return true
}

// ellipsis skips a "..." or "…" standing for elided elements.
func (r *repairer) ellipsis() bool {
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
	r.fixes.add(fixEllipsis)
	return true
}

// delimits reports whether s[i] can follow a number or a literal.
func (r *repairer) delimits(i int) bool {
	s := r.src
	if i >= len(s) {
		return true
	}
	switch c := s[i]; c {
	case ',', '}', ']', ':', ';', '"', '\'':
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
	if i < len(s) && isWordByte(s[i]) && !isDigit(s[i]) {
		// -Infinity, +Infinity, or a word with a dash.
		j := i
		for j < len(s) && isWordByte(s[j]) {
			j++
		}
		if s[i:j] == "Infinity" && r.delimits(j) {
			r.fixes.add(fixNonStandardLiteral)
			r.out = append(r.out, "null"...)
			r.pos = j
			return true
		}
		return r.unquoted(start)
	}
	intStart := i
	i = skipDigits(s, i)
	intEnd := i
	frac := -1 // index of '.', if any
	if i < len(s) && s[i] == '.' {
		frac = i
		i = skipDigits(s, i+1)
	}
	fracEnd := i
	exp := -1
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') && (intEnd > intStart || fracEnd > frac+1) {
		exp = i
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		i = skipDigits(s, i)
	}
	if !r.delimits(i) || intEnd == intStart && (frac < 0 || fracEnd == frac+1) ||
		intEnd-intStart > 1 && s[intStart] == '0' {
		// 10mm, 2024-01-01, 0x1F, 007, a lone "-": a word, not a number.
		return r.unquoted(start)
	}
	r.pos = i
	if end := scanNumber(s, start); end == i {
		r.out = append(r.out, s[start:i]...)
		return true
	}
	r.fixes.add(fixNumberFormat)
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
		if !isDigit(s[i-1]) {
			r.out = append(r.out, '0')
		}
	}
	return true
}

// literals maps the words that stand for JSON literals to them and to the repair, if any.
var literals = map[string]struct {
	json string
	fix  fix
	ok   bool // the word is already JSON
}{
	"true": {"true", 0, true}, "false": {"false", 0, true}, "null": {"null", 0, true},
	"True": {"true", fixPythonLiterals, false}, "False": {"false", fixPythonLiterals, false},
	"None": {"null", fixPythonLiterals, false},
	"TRUE": {"true", fixPythonLiterals, false}, "FALSE": {"false", fixPythonLiterals, false},
	"NULL": {"null", fixPythonLiterals, false}, "Null": {"null", fixPythonLiterals, false},
	"NaN": {"null", fixNonStandardLiteral, false}, "Infinity": {"null", fixNonStandardLiteral, false},
	"undefined": {"null", fixNonStandardLiteral, false},
}

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
	if r.delimits(i) {
		if lit, ok := literals[w]; ok {
			if !lit.ok {
				r.fixes.add(lit.fix)
			}
			r.out = append(r.out, lit.json...)
			r.pos = i
			return true
		}
		if i == len(s) {
			for _, full := range [...]string{"true", "false", "null"} {
				if strings.HasPrefix(full, w) {
					r.fixes.add(fixTruncatedLiteral)
					r.out = append(r.out, full...)
					r.pos = i
					return true
				}
			}
		}
	}
	return r.unquoted(start)
}

// unquoted reads a string written without quotes: up to the end of the line or the
// next ',', '}' or ']'.
func (r *repairer) unquoted(start int) bool {
	s := r.src
	i := start
	for i < len(s) {
		c := s[i]
		if c == ',' || c == '}' || c == ']' || c == '\n' || c == '\r' || c == ')' && r.inCall {
			break
		}
		i++
	}
	tok := strings.TrimRight(s[start:i], " \t")
	if tok == "" {
		return r.fail(start, "expected a value, found %s", describeAt(s, start))
	}
	r.pos = start + len(tok)
	r.fixes.add(fixUnquotedString)
	r.appendQuoted(tok)
	return true
}

// appendQuoted writes tok as a JSON string.
func (r *repairer) appendQuoted(tok string) {
	r.out = append(r.out, '"')
	for i := 0; i < len(tok); {
		start := i
		for i < len(tok) && plainStringByte[tok[i]] {
			i++
		}
		r.out = append(r.out, tok[start:i]...)
		if i >= len(tok) {
			break
		}
		switch c := tok[i]; {
		case c == '"' || c == '\\':
			r.out = append(r.out, '\\', c)
			i++
		case c < ' ':
			r.control(c)
			i++
		default:
			i += r.rune(tok[i:])
		}
	}
	r.out = append(r.out, '"')
}

// rune copies the UTF-8 sequence at the start of s, or U+FFFD for an invalid byte, and
// returns the bytes consumed.
func (r *repairer) rune(s string) int {
	ru, size := utf8.DecodeRuneInString(s)
	if ru == utf8.RuneError && size == 1 {
		r.fixes.add(fixInvalidUTF8)
		r.out = append(r.out, "\uFFFD"...)
		return 1
	}
	r.out = append(r.out, s[:size]...)
	return size
}

// control writes a control character as a JSON escape.
func (r *repairer) control(c byte) {
	r.fixes.add(fixControlCharacter)
	switch c {
	case '\n':
		r.out = append(r.out, `\n`...)
	case '\r':
		r.out = append(r.out, `\r`...)
	case '\t':
		r.out = append(r.out, `\t`...)
	default:
		const hex = "0123456789abcdef"
		r.out = append(r.out, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
	}
}

type quoteKind uint8

const (
	quoteNone quoteKind = iota
	quoteDouble
	quoteSingle
	quoteBacktick
	quoteSmartDouble // “ ” „ ‟ ＂ « »
	quoteSmartSingle // ‘ ’ ‚ ‛ ＇
)

// openQuote reports the quote that opens a string at s[i], and its length in bytes.
func openQuote(s string, i int) (quoteKind, int) {
	switch c := s[i]; {
	case c == '"':
		return quoteDouble, 1
	case c == '\'':
		return quoteSingle, 1
	case c == '`':
		return quoteBacktick, 1
	case c < utf8.RuneSelf:
		return quoteNone, 0
	}
	ru, size := utf8.DecodeRuneInString(s[i:])
	switch {
	case isSmartDouble(ru):
		return quoteSmartDouble, size
	case isSmartSingle(ru):
		return quoteSmartSingle, size
	}
	return quoteNone, 0
}

func isSmartDouble(r rune) bool {
	switch r {
	case '“', '”', '„', '‟', '＂', '«', '»', '〝', '〞':
		return true
	}
	return false
}

func isSmartSingle(r rune) bool {
	switch r {
	case '‘', '’', '‚', '‛', '＇':
		return true
	}
	return false
}

// stringValue reads a string and any strings joined to it with '+'.
func (r *repairer) stringValue() {
	r.str(true, false)
	s := r.src
	for {
		i := skipJSONSpace(s, r.pos)
		if i >= len(s) || s[i] != '+' {
			return
		}
		i = skipJSONSpace(s, i+1)
		if i >= len(s) {
			return
		}
		if q, _ := openQuote(s, i); q == quoteNone {
			return
		}
		r.fixes.add(fixStringConcat)
		r.out = r.out[:len(r.out)-1] // reopen the string
		r.pos = i
		r.str(false, false)
	}
}

// str reads a quoted string at pos and writes it as a JSON string, with the opening
// quote unless it continues a concatenation. In a key, the first closing quote closes.
func (r *repairer) str(open, key bool) {
	s := r.src
	q, size := openQuote(s, r.pos)
	switch q {
	case quoteSingle:
		r.fixes.add(fixSingleQuotes)
	case quoteBacktick, quoteSmartDouble, quoteSmartSingle:
		r.fixes.add(fixSmartQuotes)
	}
	r.pos += size
	if open {
		r.out = append(r.out, '"')
	}
	var closer byte // the ASCII byte that can close this string, if any
	switch q {
	case quoteDouble:
		closer = '"'
	case quoteSingle:
		closer = '\''
	case quoteBacktick:
		closer = '`'
	}
	for {
		start := r.pos
		for r.pos < len(s) && plainStringByte[s[r.pos]] && s[r.pos] != closer {
			r.pos++
		}
		r.out = append(r.out, s[start:r.pos]...)
		if r.pos >= len(s) {
			r.fixes.add(fixUnclosedString)
			r.out = append(r.out, '"')
			return
		}
		c := s[r.pos]
		switch {
		case c == closer && closer != 0:
			if key || r.endsString(r.pos+1) {
				r.pos++
				r.out = append(r.out, '"')
				return
			}
			r.fixes.add(fixUnescapedQuote)
			if c == '"' {
				r.out = append(r.out, '\\')
			}
			r.out = append(r.out, c)
			r.pos++
		case c == '"':
			r.out = append(r.out, '\\', '"')
			r.pos++
		case c == '\\':
			r.escape(q)
		case c < ' ':
			r.control(c)
			r.pos++
		default:
			ru, n := utf8.DecodeRuneInString(s[r.pos:])
			if (q == quoteSmartDouble && isSmartDouble(ru) || q == quoteSmartSingle && isSmartSingle(ru)) && (key || r.endsString(r.pos+n)) {
				r.pos += n
				r.out = append(r.out, '"')
				return
			}
			r.pos += r.rune(s[r.pos:])
		}
	}
}

// endsString decides whether a quote whose text ends at i closes its string or is a
// quote inside it that the model forgot to escape: a closing quote is followed by what
// can follow a string.
func (r *repairer) endsString(i int) bool {
	s := r.src
	for i < len(s) && s[i] <= ' ' {
		i++
	}
	if i >= len(s) {
		return true
	}
	switch s[i] {
	case ',', '}', ']', ':', '=', '+', '"', '{', '[', ';':
		return true
	case ')':
		return r.inCall
	case '/':
		return i+1 < len(s) && (s[i+1] == '/' || s[i+1] == '*')
	}
	return false
}

// escape handles a backslash inside a string.
func (r *repairer) escape(q quoteKind) {
	s := r.src
	if r.pos+1 >= len(s) {
		r.pos++ // a lone backslash where the text was cut off
		return
	}
	switch e := s[r.pos+1]; e {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		r.out = append(r.out, s[r.pos:r.pos+2]...)
		r.pos += 2
	case 'u':
		if r.pos+6 <= len(s) && isHex(s[r.pos+2]) && isHex(s[r.pos+3]) && isHex(s[r.pos+4]) && isHex(s[r.pos+5]) {
			r.out = append(r.out, s[r.pos:r.pos+6]...)
			r.pos += 6
			return
		}
		r.fixes.add(fixInvalidEscape)
		r.out = append(r.out, `\\u`...)
		r.pos += 2
	case '\'', '`':
		if q != quoteSingle && e == '\'' || q != quoteBacktick && e == '`' {
			r.fixes.add(fixInvalidEscape)
		}
		r.out = append(r.out, e)
		r.pos += 2
	default:
		// Keep the backslash as a character: "C:\dir" means a backslash.
		r.fixes.add(fixInvalidEscape)
		r.out = append(r.out, '\\', '\\')
		r.pos++
	}
}
