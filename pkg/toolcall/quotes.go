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
	e := s[r.pos+1]
	if (e == 'b' || e == 'f') && (r.pos+2 < len(s) && isLetter(s[r.pos+2]) || r.pos > 0 && isLetter(s[r.pos-1])) {
		// A backspace or form feed before a letter is a path (C:\files) or a regular
		// expression (\bword) that lost its backslash.
		e = 'x'
	}
	switch e {
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
