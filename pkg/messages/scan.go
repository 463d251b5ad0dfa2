package messages

// One pass over a JSON value, for the hops that only need to know where a raw value
// ends and that it is valid (a result's raw bytes), or to re-space one they have checked
// (a block's indented result, the compact result read back out of a block).
// encoding/json's Valid, Indent and Compact run a state machine per byte; these are a
// few times faster on the results toolbus carries and agree with them byte for byte
// (FuzzScan compares them).

// maxDepth is encoding/json's limit on nesting: a deeper value is not valid.
const maxDepth = 10000

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(d []byte, i int) int {
	for i < len(d) && isSpace(d[i]) {
		i++
	}
	return i
}

// scanValue returns the index after the JSON value that starts at d[i] (no whitespace
// before it), and whether it is one that json.Valid accepts.
func scanValue(d []byte, i int) (int, bool) {
	var buf [64]byte
	stack := buf[:0] // the open containers, '{' or '['
	for {
		// A value starts at i.
		i = skipSpace(d, i)
		if i >= len(d) {
			return 0, false
		}
		switch c := d[i]; c {
		case '{', '[':
			if len(stack) >= maxDepth {
				return 0, false
			}
			i = skipSpace(d, i+1)
			if i < len(d) && d[i] == c+2 { // '{'+2 is '}', '['+2 is ']'
				i++
				break
			}
			stack = append(stack, c)
			if c == '{' {
				var ok bool
				if i, ok = scanKey(d, i); !ok {
					return 0, false
				}
			}
			continue
		case '"':
			var ok bool
			if i, ok = scanString(d, i); !ok {
				return 0, false
			}
		case 't':
			if !hasWord(d, i, "true") {
				return 0, false
			}
			i += 4
		case 'f':
			if !hasWord(d, i, "false") {
				return 0, false
			}
			i += 5
		case 'n':
			if !hasWord(d, i, "null") {
				return 0, false
			}
			i += 4
		default:
			var ok bool
			if i, ok = scanNumber(d, i); !ok {
				return 0, false
			}
		}
		// A value ended at i: close what it ends, or go on to the next member.
		for {
			if len(stack) == 0 {
				return i, true
			}
			i = skipSpace(d, i)
			if i >= len(d) {
				return 0, false
			}
			open := stack[len(stack)-1]
			if d[i] == open+2 {
				stack = stack[:len(stack)-1]
				i++
				continue
			}
			if d[i] != ',' {
				return 0, false
			}
			i++
			if open == '{' {
				var ok bool
				if i, ok = scanKey(d, skipSpace(d, i)); !ok {
					return 0, false
				}
			}
			break
		}
	}
}

// scanKey reads a member's key and its colon, from i at the key's quote.
func scanKey(d []byte, i int) (int, bool) {
	if i >= len(d) || d[i] != '"' {
		return 0, false
	}
	i, ok := scanString(d, i)
	if !ok {
		return 0, false
	}
	i = skipSpace(d, i)
	if i >= len(d) || d[i] != ':' {
		return 0, false
	}
	return i + 1, true
}

func hasWord(d []byte, i int, w string) bool {
	return len(d)-i >= len(w) && string(d[i:i+len(w)]) == w
}

// scanString returns the index after the string whose quote is at d[i]. As
// encoding/json, it takes any byte but a control character, invalid UTF-8 included.
func scanString(d []byte, i int) (int, bool) {
	for j := i + 1; j < len(d); j++ {
		switch c := d[j]; {
		case c == '"':
			return j + 1, true
		case c == '\\':
			if j+1 >= len(d) {
				return 0, false
			}
			switch d[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j++
			case 'u':
				if hex4(d[j+2:]) < 0 {
					return 0, false
				}
				j += 5
			default:
				return 0, false
			}
		case c < 0x20:
			return 0, false
		}
	}
	return 0, false
}

// scanNumber returns the index after the number at d[i], read by JSON's grammar.
func scanNumber(d []byte, i int) (int, bool) {
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		i = digits(d, i)
	default:
		return 0, false
	}
	if i < len(d) && d[i] == '.' {
		if i+1 >= len(d) || d[i+1] < '0' || d[i+1] > '9' {
			return 0, false
		}
		i = digits(d, i+1)
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			return 0, false
		}
		i = digits(d, i)
	}
	return i, true
}

func digits(d []byte, i int) int {
	for i < len(d) && d[i] >= '0' && d[i] <= '9' {
		i++
	}
	return i
}

// Valid reports whether d is one JSON value with only whitespace around it, as
// json.Valid does, in a third of its time on the results toolbus carries.
func Valid(d []byte) bool {
	end, ok := scanValue(d, skipSpace(d, 0))
	return ok && skipSpace(d, end) == len(d)
}

// appendCompact appends src, valid JSON, without the whitespace between its tokens, as
// json.Compact does.
func appendCompact(dst, src []byte) []byte {
	for i := 0; i < len(src); {
		switch c := src[i]; {
		case c == '"':
			end, _ := scanString(src, i)
			dst = append(dst, src[i:end]...)
			i = end
		case isSpace(c):
			i++
		default:
			dst = append(dst, c)
			i++
		}
	}
	return dst
}

// appendIndent appends src, one valid JSON value with no whitespace around it, as
// json.Indent does: each member and element on its own line after prefix and one indent
// per level, empty objects and arrays kept as {} and [].
func appendIndent(dst, src []byte, prefix, indent string) []byte {
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
			e, _ := scanString(src, i)
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
