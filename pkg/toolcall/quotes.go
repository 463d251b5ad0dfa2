package toolcall

import "unicode/utf8"

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
	// pos and out stay in registers while the string is read.
	pos, out := r.pos+size, r.out
	if open {
		out = append(out, '"')
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
	stop := closer
	if stop == 0 {
		stop = '"'
	}
	// The text since the last space or line break starts at word; inPath reads it.
	// Spaces before scanned were looked for, so that a pass stays linear.
	word, scanned := pos, pos
	afterBreak := false // word follows a \n, \r or \t escape
	for {
		start := pos
		pos = plainRun(s, pos, stop)
		out = append(out, s[start:pos]...)
		if pos >= len(s) {
			r.fixes.add(fixUnclosedString)
			r.fixes.add(fixTruncatedValue)
			out = append(out, '"')
			break
		}
		c := s[pos]
		switch {
		case c == closer && closer != 0:
			if key || r.endsString(pos+1) {
				r.pos, r.out = pos+1, append(out, '"')
				return
			}
			r.fixes.add(fixUnescapedQuote)
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
		case c < ' ':
			r.fixes.add(fixControlCharacter)
			out = appendControl(out, c)
			pos++
		default:
			ru, n := utf8.DecodeRuneInString(s[pos:])
			if (q == quoteSmartDouble && isSmartDouble(ru) || q == quoteSmartSingle && isSmartSingle(ru)) && (key || r.endsString(pos+n)) {
				r.pos, r.out = pos+n, append(out, '"')
				return
			}
			if ru == utf8.RuneError && n == 1 {
				r.fixes.add(fixInvalidUTF8)
				out = append(out, "\uFFFD"...)
			} else {
				out = append(out, s[pos:pos+n]...)
			}
			pos += n
		}
	}
	r.pos, r.out = pos, out
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
	case (e == 'b' || e == 'f') && (pos+2 < len(s) && isLetter(s[pos+2]) || pos > 0 && isLetter(s[pos-1])),
		(e == 'b' || e == 'f' || e == 'n' || e == 'r' || e == 't') && inPath:
		e = 'x'
	}
	switch e {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return pos + 2, append(out, '\\', e)
	case 'u':
		if pos+6 <= len(s) && isHex(s[pos+2]) && isHex(s[pos+3]) && isHex(s[pos+4]) && isHex(s[pos+5]) {
			return pos + 6, append(out, s[pos:pos+6]...)
		}
		r.fixes.add(fixInvalidEscape)
		return pos + 2, append(out, `\\u`...)
	case '\'', '`':
		if q != quoteSingle && e == '\'' || q != quoteBacktick && e == '`' {
			r.fixes.add(fixInvalidEscape)
		}
		return pos + 2, append(out, e)
	}
	// Keep the backslash as a character: "C:\dir" means a backslash.
	r.fixes.add(fixInvalidEscape)
	return pos + 1, append(out, '\\', '\\')
}
