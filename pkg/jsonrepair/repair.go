package jsonrepair

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/toolbus/toolbus/pkg/jsonscan"
)

// The limits of Repair and RepairArguments, and of Limits and Reader where they leave a
// field zero.
const (
	DefaultMaxInputSize = 1 << 20 // bytes of one text
	DefaultMaxDepth     = 100     // nested objects and arrays
)

// Repair returns s as valid JSON, with the ids of the repairs it needed, in the order
// of the [Repairs] constants.
//
// It works in three layers. Valid JSON is returned unchanged, with no repairs, at the
// cost of one validation and one copy. Anything else is read by a tolerant single-pass
// parser that fixes what models write (see [Repairs]) and returns compact JSON. What
// even that parser cannot read yields a *[SyntaxError] saying where and what was
// expected. Input over DefaultMaxInputSize bytes or nested over DefaultMaxDepth levels
// is refused with a *SyntaxError wrapping [ErrTooLarge] or [ErrTooDeep].
func Repair(s string) (json.RawMessage, []string, error) {
	out, fixes, err := Limits{}.Repair(s)
	if err != nil {
		return nil, nil, err
	}
	return out, fixes.Names(), nil
}

// RepairArguments returns s, the arguments of a tool call, as a JSON object: what
// Repair makes of it, unwrapped when that is a JSON string holding the object
// ("{\"p\": 10}", as OpenAI's API writes arguments; repair [StringArguments]), and {}
// for blank text or null. Anything else is a *[SyntaxError].
func RepairArguments(s string) (json.RawMessage, []string, error) {
	v, fixes, err := Limits{}.RepairArguments(s)
	if err != nil {
		return nil, nil, err
	}
	return v, fixes.Names(), nil
}

// Limits bound what Repair and RepairArguments read; a field left zero is its default.
// Their methods are the package's functions under these limits, with the repairs as a
// set, which costs no allocation.
type Limits struct {
	MaxDepth     int // objects and arrays nested in one another (DefaultMaxDepth)
	MaxInputSize int // bytes of the text (DefaultMaxInputSize)
}

func (l Limits) depth() int { return cmp.Or(l.MaxDepth, DefaultMaxDepth) }

func (l Limits) size() int { return cmp.Or(l.MaxInputSize, DefaultMaxInputSize) }

// Repair is the package's Repair under l.
func (l Limits) Repair(s string) (json.RawMessage, Repairs, error) {
	out, fixes, err := repairJSON(s, l.depth(), l.size())
	return out, fixes &^ internalRepairs, err
}

// RepairArguments is the package's RepairArguments under l.
func (l Limits) RepairArguments(s string) (json.RawMessage, Repairs, error) {
	return repairArguments(s, l.depth(), l.size())
}

func repairArguments(s string, maxDepth, maxSize int) (json.RawMessage, Repairs, error) {
	if strings.TrimSpace(s) == "" {
		return json.RawMessage("{}"), 0, nil
	}
	v, fixes, err := repairJSON(s, maxDepth, maxSize)
	if err != nil {
		return nil, 0, err
	}
	v = bytes.TrimSpace(v)
	if at, ok := ambiguousArguments(s, v, fixes, false); ok {
		return nil, 0, newSyntaxError(s, at, ErrAmbiguous, ambiguousMessage)
	}
	fixes &^= internalRepairs
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
				return obj, fixes | innerFixes | StringArguments, nil
			}
		}
	}
	return nil, 0, &SyntaxError{Line: 1, Column: 1,
		Msg: "expected a JSON object of arguments, found " + Kind(string(v))}
}

// repairJSON is Repair with limits and the repairs as a set.
func repairJSON(s string, maxDepth, maxSize int) (json.RawMessage, Repairs, error) {
	if len(s) > maxSize {
		return nil, 0, &SyntaxError{Line: 1, Column: 1, Err: ErrTooLarge,
			Msg: fmt.Sprintf("the text is %d bytes, the limit is %d", len(s), maxSize)}
	}
	end, res := jsonscan.Value(s, 0, maxDepth, jsonscan.Strict)
	switch {
	case res == jsonscan.OK && jsonscan.SkipSpace(s, end) == len(s):
		return json.RawMessage(s), 0, nil
	case res == jsonscan.TooDeep:
		return nil, 0, tooDeepError(s, end, maxDepth)
	}
	if unescaped, ok := escapedJSON(s); ok {
		out, fixes, err := repairJSON(unescaped, maxDepth, maxSize)
		return out, fixes | EscapedJSON, err
	}
	start, end := 0, len(s)
	var fixes Repairs
	if a, b, ok := FenceBody(s); ok {
		start, end = a, b
		fixes |= CodeFence
	}
	var r repairer
	// The output is the whole text, repaired: about as long, rarely much longer.
	r.initSize(s[:end], start, maxDepth, end-start+(end-start)>>3+16)
	r.fixes = fixes
	r.space()
	if r.pos >= len(r.src) {
		return nil, 0, newSyntaxError(s, r.pos, nil, "expected a JSON value, found "+Describe(s, r.pos))
	}
	if c := r.src[r.pos]; c != '{' && c != '[' && !r.scalarAhead() {
		// JSON in code fences inside prose: the fenced values, one or a list.
		if out, fixes, ok := fencedInProse(s[:end], maxDepth, maxSize); ok {
			return out, fixes, nil
		}
		// Prose before the JSON is skipped; text without an object or array is one
		// value, an unquoted string where it is words (hello world, trueble).
		if i := strings.IndexAny(r.src[r.pos:], "{["); i >= 0 {
			r.pos += i
			r.fixes |= LeadingText
		} else if !r.startsValue(r.pos) {
			return nil, 0, newSyntaxError(s, r.pos, nil, "expected a JSON value, found "+Describe(s, r.pos))
		}
	}
	if !r.value() || r.failed {
		return nil, 0, r.syntaxError()
	}
	valueEnd := r.pos
	if r.space(); r.pos < len(r.src) {
		if r.out[0] != '{' && r.out[0] != '[' && r.scalarList(valueEnd) {
			if r.failed {
				return nil, 0, r.syntaxError()
			}
			if r.space(); r.pos < len(r.src) {
				r.fixes |= TrailingText // 1, 2: 3 — the list ends where no value follows
			}
		} else if !r.concatenation() {
			if r.failed {
				return nil, 0, r.syntaxError()
			}
			r.fixes |= TrailingText
		} else if r.space(); r.pos < len(r.src) {
			r.fixes |= TrailingText
		}
	}
	out, fixes, err := r.finish()
	if err == nil && fixes&ConcatenatedValues != 0 && jsonscan.Check(out, maxDepth, jsonscan.Strict) == jsonscan.TooDeep {
		return nil, 0, tooDeepError(s, 0, maxDepth) // the array around the values is one level too many
	}
	return out, fixes, err
}

// scalarList reads the values that follow the scalar in out, separated by commas or
// line breaks (1,2,3 or one per line), and makes out an array of them all. It returns
// false when no such value follows.
func (r *repairer) scalarList(valueEnd int) bool {
	s := r.src
	i, sep := valueEnd, false
	for i < len(s) && (s[i] == ',' || jsonscan.IsSpace(s[i])) {
		sep = sep || s[i] == ',' || s[i] == '\n'
		i++
	}
	if !sep || i >= len(s) || !r.startsValue(i) {
		return false
	}
	r.out = append(r.out, 0)
	copy(r.out[1:], r.out)
	r.out[0] = '['
	for r.pos = i; r.pos < len(s); {
		r.out = append(r.out, ',')
		if !r.value() {
			return true
		}
		for r.space(); r.pos < len(s) && s[r.pos] == ','; r.space() {
			r.pos++
		}
		if r.pos < len(s) && !r.startsValue(r.pos) {
			break
		}
	}
	r.out = append(r.out, ']')
	r.fixes |= ConcatenatedValues
	return true
}

// concatenation reads the objects and arrays that follow the value in out, separated
// by whitespace or commas (JSON Lines, or objects a model wrote one after the other),
// and makes out an array of them all. It returns false when no object or array
// follows an object or array, or when one that follows cannot be read (r.failed).
func (r *repairer) concatenation() bool {
	s := r.src
	save := r.pos
	for r.space(); r.pos < len(s) && s[r.pos] == ','; r.space() {
		r.pos++
	}
	i := r.pos
	r.pos = save
	if first := r.out[0]; first != '{' && first != '[' || i >= len(s) || s[i] != '{' && s[i] != '[' {
		return false
	}
	r.out = append(r.out, 0)
	copy(r.out[1:], r.out)
	r.out[0] = '['
	if !r.push('[') {
		return false
	}
	for r.pos = i; ; {
		r.out = append(r.out, ',')
		if !r.value() {
			return false
		}
		for r.space(); r.pos < len(s) && s[r.pos] == ','; r.space() {
			r.pos++ // also past comments: /* 1 */ {}, /* 2 */ {}
		}
		if r.pos >= len(s) || s[r.pos] != '{' && s[r.pos] != '[' {
			break
		}
	}
	r.pop()
	r.out = append(r.out, ']')
	r.fixes |= ConcatenatedValues
	return true
}

func tooDeepError(s string, at, maxDepth int) error {
	return newSyntaxError(s, at, ErrTooDeep, tooDeepMessage(maxDepth))
}

// fencedInProse repairs the ``` code fences in s, prose around them: the value of
// the one fence, or the array of the values of several. ok is false when s has no
// fence whose text is JSON.
func fencedInProse(s string, maxDepth, maxSize int) (json.RawMessage, Repairs, bool) {
	var vals []json.RawMessage
	fixes := CodeFence | LeadingText
	for i := 0; len(vals) < 64; {
		f := strings.Index(s[i:], "```")
		if f < 0 {
			break
		}
		start, closeAt, ok := fenceAt(s, i+f)
		if !ok {
			break
		}
		if v, fx, err := repairJSON(strings.TrimSpace(s[start:closeAt]), maxDepth, maxSize); err == nil {
			vals = append(vals, v)
			fixes |= fx
		}
		i = min(len(s), closeAt+3)
		if jsonscan.SkipSpace(s, i) < len(s) {
			fixes |= TrailingText
		} else {
			fixes &^= TrailingText
		}
	}
	switch len(vals) {
	case 0:
		return nil, 0, false
	case 1:
		return vals[0], fixes, true
	}
	out := []byte{'['}
	for k, v := range vals {
		if k > 0 {
			out = append(out, ',')
		}
		out = append(out, v...)
	}
	out = append(out, ']')
	if jsonscan.Check(out, maxDepth, jsonscan.Strict) != jsonscan.OK {
		return nil, 0, false
	}
	return out, fixes | ConcatenatedValues, true
}

// fenceAt reads the fence that opens at s[i]: ``` and a language, then a line break
// or the JSON. It returns the span of its text, up to the closing ``` (which must be
// there).
func fenceAt(s string, i int) (start, end int, ok bool) {
	j := i + 3
	for j < len(s) && s[j] == '`' {
		j++
	}
	for j < len(s) && isWordByte(s[j]) {
		j++
	}
	j = skipSpaceAndTabs(s, j)
	switch {
	case j < len(s) && (s[j] == '\n' || s[j] == '\r'):
		j++
	case j < len(s) && (s[j] == '{' || s[j] == '[' || s[j] == '('):
	default:
		return 0, 0, false
	}
	k := strings.Index(s[j:], "```")
	if k < 0 {
		return 0, 0, false
	}
	return j, j + k, true
}

// escapedJSON returns s with its escaped quotes unescaped when s is JSON escaped as
// the text of a string, without the quotes around it: \"hello\" or {\"a\": \"b\"}.
func escapedJSON(s string) (string, bool) {
	i := jsonscan.SkipSpace(s, 0)
	if i < len(s) && (s[i] == '{' || s[i] == '[') {
		i = jsonscan.SkipSpace(s, i+1)
	}
	if !strings.HasPrefix(s[i:], `\"`) {
		return "", false
	}
	return strings.ReplaceAll(s, `\"`, `"`), true
}

// FenceBody returns the span inside a ``` code fence when s, apart from surrounding
// whitespace, is one: ```json on a line of its own, or ``` right before the JSON
// (```{"a": 1}```), also inside a bracket a model put around the fence
// ([```json …```]).
func FenceBody(s string) (start, end int, ok bool) {
	i := jsonscan.SkipSpace(s, 0)
	wrapped := byte(0)
	if i < len(s) && (s[i] == '[' || s[i] == '{') {
		if j := jsonscan.SkipSpace(s, i+1); strings.HasPrefix(s[j:], "```") {
			wrapped, i = s[i], j
		}
	}
	if !strings.HasPrefix(s[i:], "```") {
		return 0, 0, false
	}
	start = i + 3
	for start < len(s) && s[start] == '`' {
		start++ // ```` is a fence too
	}
	for start < len(s) && isWordByte(s[start]) {
		start++ // the language
	}
	start = skipSpaceAndTabs(s, start)
	switch {
	case start < len(s) && (s[start] == '\n' || s[start] == '\r'):
		start++
	case start < len(s) && (s[start] == '{' || s[start] == '['):
	default:
		return 0, 0, false
	}
	end = len(s)
	if j := strings.LastIndex(s[start:], "```"); j >= 0 {
		end = start + j
		for end > start && s[end-1] == '`' {
			end--
		}
		if wrapped != 0 {
			k := jsonscan.SkipSpace(s, start+j+3)
			if k >= len(s) || s[k] != wrapped+2 { // ']' is '['+2, '}' is '{'+2
				return 0, 0, false
			}
		}
	} else if wrapped != 0 {
		return 0, 0, false
	}
	return start, end, true
}
