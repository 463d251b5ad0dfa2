package jsonrepair

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/toolbus/toolbus/pkg/jsonscan"
)

// Strings: quotes of every kind, escapes, and what a model leaves unescaped.

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
	if c := s[i]; c < utf8.RuneSelf {
		if q := asciiQuote[c]; q != quoteNone {
			return q, 1
		}
		return quoteNone, 0
	}
	return openSmartQuote(s, i)
}

var asciiQuote = [utf8.RuneSelf]quoteKind{'"': quoteDouble, '\'': quoteSingle, '`': quoteBacktick}

func openSmartQuote(s string, i int) (quoteKind, int) {
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
func (r *repairer) stringValue() bool {
	r.str(true, false)
	if r.failed {
		return false
	}
	s := r.src
	for {
		i := skipSpaceComments(s, r.pos)
		if i >= len(s) || s[i] != '+' {
			return true
		}
		plus := i
		i = skipSpaceComments(s, i+1)
		if i >= len(s) || s[i] == ']' || s[i] == '}' || s[i] == ',' {
			r.fixes |= StringConcat
			r.pos = plus + 1 // "hello" + ]: nothing is joined
			return true
		}
		if q, _ := openQuote(s, i); q == quoteNone {
			return true
		}
		r.fixes |= StringConcat
		r.out = r.out[:len(r.out)-1] // reopen the string
		r.pos = i
		r.str(false, false)
		if r.failed {
			return false
		}
	}
}

// str reads a quoted string at pos and writes it as a JSON string, with the opening
// quote unless it continues a concatenation. Which quote closes it is decided by what
// follows and precedes each quote (see closeAt); a string the text ends in is closed
// before the brackets that close its containers, where the text ends with them.
func (r *repairer) str(open, key bool) {
	s := r.src
	q, size := openQuote(s, r.pos)
	switch q {
	case quoteSingle:
		r.fixes |= SingleQuotes
	case quoteBacktick, quoteSmartDouble, quoteSmartSingle:
		r.fixes |= SmartQuotes
	}
	// pos and out stay in registers while the string is read.
	pos, out := r.pos+size, r.out
	if open {
		out = append(out, '"')
	}
	body, outBody := pos, len(out) // where the text of the string starts, in s and out
	var closer byte                // the ASCII byte that can close this string, if any
	switch q {
	case quoteDouble:
		closer = '"'
	case quoteSingle:
		closer = '\''
	case quoteBacktick:
		closer = '`'
	}
	stop := closer
	if stop == 0 {
		stop = '"'
	}
	var brackets bracketCount // of the string's text, as far as a quote needed them
	// In a key, the first ':' of its text, in s and out: a key whose closing quote is
	// missing ends there ({"key:value}).
	colon, outColon := -1, -1
	// The text since the last space or line break starts at word; inPath reads it.
	// Spaces before scanned were looked for, so that a pass stays linear.
	word, scanned := pos, pos
	afterBreak := false // word follows a \n, \r or \t escape
	for {
		start := pos
		pos = jsonscan.PlainRun(s, pos, stop)
		out = append(out, s[start:pos]...)
		if key && colon < 0 {
			if i := strings.IndexByte(s[start:pos], ':'); i >= 0 {
				colon, outColon = start+i, len(out)-(pos-start-i)
			}
		}
		if pos >= len(s) {
			if key && colon >= 0 {
				r.pos, r.out = colon, append(trimSpaces(out[:outColon], outBody), '"')
				r.fixes |= UnclosedString | endQuoteLost
				return
			}
			end := len(s)
			if f := strings.LastIndex(s[body:], "```"); f >= 0 && jsonscan.SkipSpace(s, body+f+3) == len(s) {
				end = body + f // {"a": "b}``` : the fence is no part of the string
				for end > body && s[end-1] == '`' {
					end--
				}
			}
			if at := r.closersBefore(body, end); at >= 0 {
				end = at // ["abc] or {"a": "b}: the brackets close the containers
			}
			if p := lastNonSpace(s, body, end); p > body && s[p] == '+' && s[p-1] == ' ' {
				end = p // "hello + : a concatenation the text ends in
			}
			if end < len(s) {
				r.fixes |= UnclosedString | endQuoteLost
				r.pos, r.out = end, append(trimSpaces(out[:len(out)-escapedWidth(s[end:pos])], outBody), '"')
				return
			}
			r.fixes |= UnclosedString
			r.fixes |= TruncatedValue
			out = append(trimSpaces(out, outBody), '"')
			break
		}
		c := s[pos]
		switch {
		case c == closer && closer != 0:
			switch r.closeAt(pos, body, key, colon >= 0, &brackets) {
			case quoteCloses:
				if key && pos > body && (s[pos-1] == '\n' || s[pos-1] == '\r') {
					out = trimSpaces(out, outBody) // {"key_1\n": 1}
				}
				r.pos, r.out = pos+1, append(out, '"')
				return
			case quoteDoubledCloses:
				r.fixes |= UnescapedQuote
				r.pos, r.out = pos+2, append(out, '"')
				return
			case quoteDoubledOpens:
				r.fixes |= UnescapedQuote
				pos++
				body = pos
				continue
			case quoteAfterComma:
				// "b,"c": the quote opens the next string; this one ended before
				// the comma.
				r.fixes |= UnclosedString | endQuoteLost
				end := lastNonSpace(s, body, pos)
				if at := r.closersBefore(body, end); at >= 0 {
					end = at // {"a": "b}, "c": 1}: the brackets close containers
				}
				out = out[:len(out)-escapedWidth(s[end:pos])]
				r.pos, r.out = end, append(trimSpaces(out, outBody), '"')
				return
			case quoteAfterPlus:
				// "hello +\n " world": the string ended before the '+'.
				r.fixes |= UnclosedString | endQuoteLost
				end := lastNonSpace(s, body, pos)
				out = out[:len(out)-escapedWidth(s[end:pos])]
				r.pos, r.out = end, append(trimSpaces(out, outBody), '"')
				return
			case quoteAfterKeyColon:
				r.fixes |= UnclosedString | endQuoteLost
				r.pos, r.out = colon, append(trimSpaces(out[:outColon], outBody), '"')
				return
			}
			r.fixes |= UnescapedQuote
			if c == '"' {
				out = append(out, '\\')
			}
			out = append(out, c)
			pos++
		case c == '"':
			out = append(out, '\\', '"')
			pos++
		case c == '\\':
			for i := pos - 1; i >= scanned; i-- {
				if s[i] == ' ' || s[i] == '\t' {
					word, afterBreak = i+1, false
					break
				}
			}
			path := inPath(s[word:pos], afterBreak)
			if e := s[min(pos+1, len(s)-1)]; !path && (e == 'n' || e == 'r' || e == 't') {
				word, afterBreak = pos+2, true // a line break or tab, which ends a path
			}
			pos, out = r.escape(q, pos, out, path)
			scanned = pos
			if r.failed {
				r.pos, r.out = pos, out
				return
			}
		case c < ' ':
			if key && colon >= 0 && (c == '\n' || c == '\r') {
				// {"key:value\n: a key whose closing quote is missing ends at its colon.
				r.fixes |= UnclosedString | endQuoteLost
				r.pos, r.out = colon, append(trimSpaces(out[:outColon], outBody), '"')
				return
			}
			if c != '\n' && c != '\r' && c != '\t' && c != '\b' && c != '\f' && !r.python {
				// NUL and the like are no text a model writes: binary, or a broken stream.
				r.fail(pos, fmt.Sprintf("invalid character %q in a string", c))
				r.pos, r.out = len(s), out
				return
			}
			r.fixes |= ControlCharacter
			out = appendControl(out, c)
			pos++
		default:
			ru, n := utf8.DecodeRuneInString(s[pos:])
			if (q == quoteSmartDouble && isSmartDouble(ru) || (q == quoteSmartSingle || q == quoteBacktick) && (isSmartSingle(ru) || ru == '´')) && (key || r.endsString(pos+n)) {
				r.pos, r.out = pos+n, append(out, '"')
				return
			}
			out = r.appendRune(out, ru, s[pos:pos+n])
			pos += n
		}
	}
	r.pos, r.out = pos, out
}

// appendRune writes ru, which text encodes, to a JSON string's text: U+FFFD where text
// is not UTF-8.
func (r *repairer) appendRune(out []byte, ru rune, text string) []byte {
	if ru == utf8.RuneError && len(text) == 1 {
		r.fixes |= InvalidUTF8
		return append(out, "\uFFFD"...)
	}
	return append(out, text...)
}

// What a quote inside a string is: see closeAt.
const (
	quoteInside        = iota // a quote the model forgot to escape
	quoteCloses               // the closing quote
	quoteDoubledCloses        // "b"", : a doubled closing quote
	quoteDoubledOpens         // ""b": a doubled opening quote
	quoteAfterComma           // "b,"c": the next string's opening quote
	quoteAfterKeyColon        // {"key:"value": the value's opening quote
	quoteAfterPlus            // "a +\n "b": the next string of a concatenation
)

// bracketCount counts the brackets in a string's text up to a point, so that each
// byte is counted once however many quotes ask.
type bracketCount struct {
	upto                 int
	square, curly, round [2]int // opened [, { and (, closed ], } and )
	quotes               int
}

// quoted reports whether s[body:i] holds a double quote.
func (b *bracketCount) quoted(s string, body, i int) bool {
	b.open(s, body, i, ']')
	return b.quotes > 0
}

// open reports whether s[body:i] opens more brackets closed by c than it closes.
func (b *bracketCount) open(s string, body, i int, c byte) bool {
	if b.upto < body {
		*b = bracketCount{upto: body}
	}
	for ; b.upto < i; b.upto++ {
		switch s[b.upto] {
		case '[':
			b.square[0]++
		case ']':
			b.square[1]++
		case '{':
			b.curly[0]++
		case '}':
			b.curly[1]++
		case '(':
			b.round[0]++
		case ')':
			b.round[1]++
		case '"':
			b.quotes++
		}
	}
	switch c {
	case ']':
		return b.square[0] > b.square[1]
	case ')':
		return b.round[0] > b.round[1]
	}
	return b.curly[0] > b.curly[1]
}

// closeAt decides what the quote at s[i] of a string whose text starts at body is.
// It closes the string when what follows can follow a string (endsString; in a key, a
// ':'), unless that is a bracket the string's own text opened ("a [1, 2"] b"); in an
// array or before an object's '}' also when a word follows the first quote of the text
// (["a" b"]). A doubled quote is one quote: at the start of the text when no delimiter
// follows it, at the end when a ':', a closing bracket or a line break does, or a comma
// in a key or an array; before a comma in an object, and at the very end of the text,
// the first of the two is an inch mark ("27"", as both references read it). A quote
// that cannot close, right after a comma, opens the next string when a string follows
// it ({"a": "b,"c": 1}, ["a,"b"]); right after " +", it opens the next string of a
// concatenation; and in a key that holds a ':', the key ends at that colon
// ({"key:"value"}). Anything else is a quote inside the string.
func (r *repairer) closeAt(i, body int, key, hasColon bool, brackets *bracketCount) int {
	s := r.src
	if i == body && i+1 < len(s) && (!doubledQuoteEnds[s[i+1]] && s[i+1] != s[i] || key && s[i+1] == ' ' && r.keyAt(i)) {
		return quoteDoubledOpens // ""key":, ""/tmp/x" or {"" key": 1}
	}
	if i+1 < len(s) && s[i+1] == s[i] {
		// Both references read "b"", "c": 1 in an object as b" (an inch mark): so
		// does toolbus. Before a colon, a bracket or a line break it is one quote.
		j := skipSpaceAndTabs(s, i+2)
		inch := s[i] == '"' && !key && !r.inArray()
		if j < len(s) && (s[j] == ',' && !inch || s[j] == ':' || s[j] == '}' || s[j] == ']' || s[j] == '\n') {
			return quoteDoubledCloses
		}
		if j < len(s) && s[j] == ',' {
			return quoteInside
		}
		if !key && jsonscan.SkipSpace(s, j) == len(s) {
			return quoteInside // "The TV is 72"": an inch mark, then the closing quote
		}
	}
	if key {
		j := skipSpaceAndTabs(s, i+1)
		switch {
		case j >= len(s) || s[j] == ':' || s[j] == '=' || s[j] == '}' || s[j] == ',' || s[j] == '\n' || s[j] == '\r':
			return quoteCloses
		case hasColon:
			return quoteAfterKeyColon
		case j > i+1 || s[j] == '"' || s[j] == '[' || s[j] == '{' || s[j] == '-' || jsonscan.IsDigit(s[j]) || literalAt(s, j):
			return quoteCloses // {"key" "value"}, {"key"1}: the colon is missing
		}
		return quoteInside // {"k"e"y": 1}
	}
	if r.endsString(i + 1) {
		if j := jsonscan.SkipSpace(s, i+1); j < len(s) && (s[j] == ']' || s[j] == '}') && brackets.open(s, body, i, s[j]) {
			return quoteInside // "the list [1, 2"] more": the bracket is the text's
		} else if j < len(s) && s[j] == ')' && r.inCall && s[i] == '\'' && brackets.open(s, body, i, ')') &&
			brackets.quotes%2 == 1 && closesQuotedPart(s, j) {
			// cmd='python3 -c "print(f(x, sep='\,'))"': inside a double-quoted
			// part of the text still open, and closed right after, a ')' the text
			// opened is the text's.
			return quoteInside
		}
		return quoteCloses
	}
	if (r.wordAhead(i+1) || r.junkBeforeBrace(i+1)) && !brackets.quoted(s, body, i) {
		return quoteCloses // the first quote in the string, and a word follows
	}
	c := lastNonSpace(s, body, i)
	switch {
	case c >= 0 && s[c] == ',' && r.stringAhead(i):
		return quoteAfterComma
	case c > body && s[c] == '+' && s[c-1] == ' ' && c < i-1:
		return quoteAfterPlus
	}
	return quoteInside
}

// closesQuotedPart reports whether s[j:] is ')'s, then '"' and the single quote that
// closes the string: '))"'.
func closesQuotedPart(s string, j int) bool {
	for j < len(s) && (s[j] == ')' || s[j] == ' ') {
		j++
	}
	if j >= len(s) || s[j] != '"' {
		return false
	}
	j = skipSpaceAndTabs(s, j+1)
	return j < len(s) && s[j] == '\''
}

// doubledQuoteEnds marks what can follow an empty string "": a space, a delimiter.
var doubledQuoteEnds = func() (t [256]bool) {
	for c := 0; c <= ' '; c++ {
		t[c] = true
	}
	for _, c := range []byte(`,:}]);+=`) {
		t[c] = true
	}
	return t
}()

// stringAhead reports whether the quote at s[i] opens a string that is a key (followed
// by ':'), in an object, or any string, in an array: the next string, when a quote
// follows a comma inside a string.
func (r *repairer) stringAhead(i int) bool {
	s := r.src
	end := strings.IndexByte(s[i+1:min(len(s), i+1+256)], s[i])
	if end < 0 {
		return false
	}
	j := skipSpaceAndTabs(s, i+1+end+1)
	if r.inArray() {
		return true
	}
	return j < len(s) && s[j] == ':'
}

// inArray reports whether the innermost open container is an array.
func (r *repairer) inArray() bool {
	if r.depth == 0 {
		return false
	}
	i := r.depth - 1
	if i < len(r.small) {
		return r.small[i] == '['
	}
	return r.deep[i-len(r.small)] == '['
}

// closersBefore reports where the brackets start that end s[body:end], the text of a
// string whose closing quote is missing, when they close the open containers,
// innermost first (with spaces between): ["abc]\n. Else it returns -1.
func (r *repairer) closersBefore(body, end int) int {
	s := r.src
	at := end
	for i := end - 1; i >= body; i-- {
		c := s[i]
		if c == ']' || c == '}' {
			at = i
		} else if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			break
		}
	}
	if at == end || bracketsOpen(s[body:at]) {
		return -1 // no brackets, or the text's own: "a {b}
	}
	k := r.depth - 1 // the container the next bracket closes, innermost first
	for i := at; i < end; i++ {
		switch c := s[i]; c {
		case ']', '}':
			open := byte('[')
			if c == '}' {
				open = '{'
			}
			if k < 0 || r.container(k) != open {
				return -1
			}
			k--
		}
	}
	return at
}

// container returns the kind of the k-th open container, outermost first.
func (r *repairer) container(k int) byte {
	if k < len(r.small) {
		return r.small[k]
	}
	return r.deep[k-len(r.small)]
}

// bracketsOpen reports whether t opens more brackets of a kind than it closes.
func bracketsOpen(t string) bool {
	return strings.Count(t, "{") > strings.Count(t, "}") || strings.Count(t, "[") > strings.Count(t, "]")
}

// lastNonSpace returns the index of the last byte of s[from:to] that is not a space,
// tab or line break, or -1.
func lastNonSpace(s string, from, to int) int {
	for i := to - 1; i >= from; i-- {
		if c := s[i]; c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return i
		}
	}
	return -1
}

func skipSpaceAndTabs(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	return i
}

// escapedWidth is the length in a JSON string of t, plain text and whitespace.
func escapedWidth(t string) int {
	n := len(t)
	for i := 0; i < len(t); i++ {
		switch c := t[i]; {
		case c == '\n' || c == '\r' || c == '\t' || c == '"' || c == '\\':
			n++
		case c < ' ':
			n += 5
		}
	}
	return n
}

// trimSpaces removes the whitespace at the end of out after from, spaces and escaped
// line breaks and tabs: the text of a string that ends where its closing quote was
// missing ("abc  ]).
func trimSpaces(out []byte, from int) []byte {
	for len(out) > from {
		switch n := len(out); {
		case out[n-1] == ' ':
			out = out[:n-1]
		case n-2 >= from && out[n-2] == '\\' && (out[n-1] == 'n' || out[n-1] == 'r' || out[n-1] == 't') && !escapedBackslash(out[from:n-2]):
			out = out[:n-2]
		default:
			return out
		}
	}
	return out
}

// escapedBackslash reports whether b, JSON string text, ends with an escaped backslash
// (an odd number of backslashes before the one that follows it).
func escapedBackslash(b []byte) bool {
	n := 0
	for i := len(b) - 1; i >= 0 && b[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

// inPath reports whether word, the text of a string between the last space or line
// break and a backslash, is a Windows path, so that the backslash is a path separator:
// C:\… anywhere, or a drive alone (C:) unless it follows a line break, where it is more
// likely a label ("Q: …\nA:\nyes").
func inPath(word string, afterBreak bool) bool {
	if len(word) < 2 || !isLetter(word[0]) || word[1] != ':' {
		return false
	}
	return len(word) > 2 && word[2] == '\\' || len(word) == 2 && !afterBreak
}

// endsString decides whether a quote whose text ends at i closes its string or is a
// quote inside it that the model forgot to escape: a closing quote is followed by what
// can follow a string.
func (r *repairer) endsString(i int) bool {
	s := r.src
	newline := false
	for i < len(s) && s[i] <= ' ' {
		newline = newline || s[i] == '\n'
		i++
	}
	if i >= len(s) || newline {
		return true // a line break follows the quote: strings do not hold one
	}
	switch s[i] {
	case ',':
		return r.inArray() || r.memberAhead(i+1)
	case '}', ']', ':', '=', '+', '"', '{', '[', ';':
		return true
	case ')':
		return r.inCall
	case '/':
		return i+1 < len(s) && (s[i+1] == '/' || s[i+1] == '*')
	case '#':
		return i+1 == len(s) || s[i+1] == ' ' // "a" # comment
	case '`':
		return strings.HasPrefix(s[i:], "```") // "a"``` : the fence around the JSON
	}
	return jsonscan.IsDigit(s[i]) && r.inArray() // ["a" 2]
}

// junkBeforeBrace reports whether the quote at s[i-1], in an object, is followed by a
// space, a word and the '}' that ends the object: {"a": "b" AAAA }.
func (r *repairer) junkBeforeBrace(i int) bool {
	s := r.src
	if r.inArray() || r.depth == 0 || i >= len(s) || s[i] != ' ' {
		return false
	}
	i = skipSpaceAndTabs(s, i)
	j := wordEnd(s, i)
	if j == i {
		return false
	}
	j = skipSpaceAndTabs(s, j)
	return j < len(s) && s[j] == '}'
}

// wordEnd returns the end of the word (letters, digits, '_', '$') at s[i], which is
// i when there is none; a word ends after 64 bytes, so that a look ahead stays short.
func wordEnd(s string, i int) int {
	j := i
	for j < len(s) && j-i < 64 && isWordByte(s[j]) {
		j++
	}
	return j
}

// wordAhead reports whether the quote at s[i-1], in an array, is followed by a space
// and a word that is the next element: ["a" b", "c"] or ["a" b].
func (r *repairer) wordAhead(i int) bool {
	s := r.src
	if !r.inArray() || i >= len(s) || s[i] != ' ' {
		return false
	}
	i = skipSpaceAndTabs(s, i)
	j := wordEnd(s, i)
	if j == i {
		return false
	}
	if j < len(s) && s[j] == '"' {
		return r.quoteEnds(j)
	}
	j = skipSpaceAndTabs(s, j)
	return j < len(s) && (s[j] == ']' || s[j] == ',')
}

// memberAhead reports whether what follows a comma at s[i-1] in an object can be the
// next member, so that a quote before the comma closes its string: "lorem "ipsum",
// sic." is one string.
func (r *repairer) memberAhead(i int) bool {
	s := r.src
	i = jsonscan.SkipSpace(s, i)
	if i >= len(s) {
		return true
	}
	switch c := s[i]; {
	case c == '}' || c == '.' || c == '/' || c == '#' || c == ',':
		return true
	case isWordByte(c) || c == '-':
		j := wordEnd(s, i)
		if j < len(s) && s[j] == '"' {
			j++ // note": the key's opening quote is missing
		}
		k := skipSpaceAndTabs(s, j)
		if k > j && k < len(s) && s[k] == '"' && r.keyAt(k) {
			return true // , COMMENT "b": 1 — a stray word before the next key
		}
		return k < len(s) && (s[k] == ':' || s[k] == '=')
	}
	q, _ := openQuote(s, i)
	return q != quoteNone
}

// escape writes the backslash at s[pos] of a string in quote q, and what it escapes,
// and returns where the string goes on. A valid JSON escape keeps its meaning, except
// where the model plainly wrote a backslash unescaped: before a character that JSON
// does not escape ("C:\dir", "\d+"), as \b or \f next to a letter (C:\files, \bword),
// and as \n, \r or \t inside a Windows path (inPath: C:\new\table).
func (r *repairer) escape(q quoteKind, pos int, out []byte, inPath bool) (int, []byte) {
	s := r.src
	if pos+1 >= len(s) {
		return pos + 1, out // a lone backslash where the text was cut off
	}
	e := s[pos+1]
	switch {
	case r.python: // Python's escapes mean what they mean, in a path too
	case (e == 'b' || e == 'f') && (pos+2 < len(s) && isLetter(s[pos+2]) || pos > 0 && isLetter(s[pos-1])),
		(e == 'b' || e == 'f' || e == 'n' || e == 'r' || e == 't') && inPath:
		e = 'x'
	}
	if r.python {
		if end, o, ok := r.pythonEscape(pos, out); ok {
			return end, o
		}
		if r.failed {
			return len(s), out
		}
	}
	switch e {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return pos + 2, append(out, '\\', e)
	case '\n':
		r.fixes |= InvalidEscape
		return pos + 2, append(out, `\n`...) // a line continued with a backslash, as in a shell
	case 'u':
		if pos+6 <= len(s) && jsonscan.IsHex(s[pos+2]) && jsonscan.IsHex(s[pos+3]) && jsonscan.IsHex(s[pos+4]) && jsonscan.IsHex(s[pos+5]) {
			return pos + 6, append(out, s[pos:pos+6]...)
		}
		j := pos + 2
		for j < len(s) && j < pos+6 && jsonscan.IsHex(s[j]) {
			j++
		}
		switch {
		case j == len(s):
			// "\u26 where the text ends: the character was cut off.
			r.fixes |= TruncatedValue
			return j, out
		case inPath || j == pos+2 && isLetter(s[j]) && pos >= 2 && s[pos-1] == ':' && isLetter(s[pos-2]):
			r.fixes |= InvalidEscape
			return pos + 2, append(out, `\\u`...) // C:\users
		}
		r.fail(pos, "invalid escape "+strconv.Quote(s[pos:j+1])+": \\u takes four hex digits")
		return len(s), out
	case '\'', '`':
		if q != quoteSingle && e == '\'' || q != quoteBacktick && e == '`' {
			r.fixes |= InvalidEscape
		}
		return pos + 2, append(out, e)
	}
	if e >= utf8.RuneSelf && !inPath {
		r.fixes |= InvalidEscape
		return pos + 1, out // "a \„ b": the backslash escapes nothing
	}
	// Keep the backslash as a character: "C:\dir" means a backslash.
	r.fixes |= InvalidEscape
	return pos + 1, append(out, '\\', '\\')
}

// pythonEscape writes the escape at s[pos] of a Python string that JSON does not share
// with Python, and returns where the string goes on; ok is false for the escapes both
// read alike, and the backslashes Python keeps ("\,", "C:\dir"), which escape reads.
func (r *repairer) pythonEscape(pos int, out []byte) (end int, _ []byte, ok bool) {
	s := r.src
	e := s[pos+1]
	var ru rune
	switch {
	case e == 'x' || e == 'U':
		n := 2
		if e == 'U' {
			n = 8
		}
		if pos+2+n > len(s) {
			return 0, out, false
		}
		v, err := strconv.ParseUint(s[pos+2:pos+2+n], 16, 32)
		if err != nil || v > utf8.MaxRune {
			return 0, out, false
		}
		ru, end = rune(v), pos+2+n
	case e >= '0' && e <= '7':
		end = pos + 1
		for end < len(s) && end < pos+4 && s[end] >= '0' && s[end] <= '7' {
			ru = ru*8 + rune(s[end]-'0')
			end++
		}
	case e == 'a':
		ru, end = 7, pos+2
	case e == 'v':
		ru, end = 11, pos+2
	case e == '\n':
		r.fixes |= InvalidEscape
		return pos + 2, out, true // a line continued: Python drops both
	case e == 'N' && pos+2 < len(s) && s[pos+2] == '{':
		r.fail(pos, "a \\N{…} escape names a character that toolbus cannot look up: write the character itself")
		return 0, out, false
	default:
		return 0, out, false
	}
	switch {
	case ru < ' ':
		return end, appendControl(out, byte(ru)), true
	case ru == '"' || ru == '\\':
		return end, append(out, '\\', byte(ru)), true
	case ru >= 0xd800 && ru <= 0xdfff:
		const hex = "0123456789abcdef"
		return end, append(out, '\\', 'u', hex[ru>>12], hex[ru>>8&15], hex[ru>>4&15], hex[ru&15]), true
	}
	return end, utf8.AppendRune(out, ru), true
}

// literalAt reports whether a JSON or Python literal is written at s[i], followed by
// what ends a value.
func literalAt(s string, i int) bool {
	j := i
	for j < len(s) && j-i < 6 && isWordByte(s[j]) {
		j++
	}
	if _, _, _, ok := literal(s[i:j]); !ok {
		return false
	}
	return j == len(s) || !isWordByte(s[j])
}

// skipSpaceComments returns the index of the first byte at or after i that is neither
// JSON whitespace nor in a // or /* */ comment.
func skipSpaceComments(s string, i int) int {
	for {
		i = jsonscan.SkipSpace(s, i)
		if i+1 >= len(s) || s[i] != '/' {
			return i
		}
		switch s[i+1] {
		case '/':
			if nl := strings.IndexByte(s[i:], '\n'); nl >= 0 {
				i += nl + 1
			} else {
				return len(s)
			}
		case '*':
			if e := strings.Index(s[i+2:], "*/"); e >= 0 {
				i += e + 4
			} else {
				return len(s)
			}
		default:
			return i
		}
	}
}

// AppendString appends s to dst as a JSON string, with the repairs that took: a control
// character escaped ([ControlCharacter]), bytes that are not UTF-8 replaced by U+FFFD
// ([InvalidUTF8]).
func AppendString(dst []byte, s string) ([]byte, Repairs) {
	var fixes Repairs
	out := append(dst, '"')
	for i := 0; i < len(s); {
		start := i
		for i < len(s) && jsonscan.Plain(s[i]) {
			i++
		}
		out = append(out, s[start:i]...)
		if i >= len(s) {
			break
		}
		switch c := s[i]; {
		case c == '"' || c == '\\':
			out = append(out, '\\', c)
			i++
		case c < ' ':
			fixes |= ControlCharacter
			out = appendControl(out, c)
			i++
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				fixes |= InvalidUTF8
				out = append(out, "\uFFFD"...)
			} else {
				out = append(out, s[i:i+size]...)
			}
			i += size
		}
	}
	return append(out, '"'), fixes
}

// appendControl appends the control character c as a JSON escape.
func appendControl(out []byte, c byte) []byte {
	switch c {
	case '\n':
		return append(out, `\n`...)
	case '\r':
		return append(out, `\r`...)
	case '\t':
		return append(out, `\t`...)
	}
	const hex = "0123456789abcdef"
	return append(out, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
}
