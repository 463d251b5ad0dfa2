package jsonrepair

import (
	"unsafe"

	"github.com/toolbus/toolbus/pkg/jsonscan"
)

// A Reader repairs JSON values that start inside a longer text, one at a time: the
// JSON a model wrote after a marker of its own, or a value among the arguments of a
// call it wrote in Python. Unlike [Repair] it reads no further than the value, so that
// its caller goes on after it, and a failure costs no more than the reading did:
// [Reader.Err] locates it in lines and columns only when asked, [Reader.Stopped] not
// at all. The zero Reader is ready to use; a Reader keeps its last read, so one
// Reader serves one goroutine.
type Reader struct {
	// MaxDepth bounds how deep objects and arrays nest; zero means DefaultMaxDepth.
	MaxDepth int
	// Args reads values as the arguments of a call, f(a=1, b=[2]): a ')' ends a value
	// and closes the objects and arrays open in it.
	Args bool
	// Python reads strings as Python's literals: \xHH, octal (\0, \101), \a, \v and
	// \UXXXXXXXX escapes mean the characters they mean there, a backslash before a line
	// break continues the line, and control characters are text (a NUL too); \N{NAME}
	// is an error, naming a character this package cannot look up.
	Python bool
	// Arguments reads a call's arguments (or the call object holding them): where a
	// lost closer leaves two readings that both parse, the read fails with
	// ErrAmbiguous instead of guessing, as RepairArguments does. A value the text ends
	// inside of is left to the caller, which knows whether the response was cut there,
	// unless Complete says it was not.
	Arguments bool
	// Complete says, with Arguments, that the model wrote on after the text read (a
	// closing tag follows it): the value was not cut off at the text's end, so brackets
	// it lacks there were lost inside it.
	Complete bool

	r repairer // the last read
}

func (rd *Reader) maxDepth() int { return Limits{MaxDepth: rd.MaxDepth}.depth() }

// Value returns the JSON value that starts at s[from], after whitespace and comments,
// and the index in s after it. Valid JSON there costs one scan and no copy: v is s's
// own text, and what follows it is not read. Anything else is read as [Reader.AppendValue]
// reads it. ok is false when no value could be read or it nests deeper than MaxDepth.
func (rd *Reader) Value(s string, from int) (v string, end int, repairs Repairs, ok bool) {
	maxDepth := rd.maxDepth()
	end, res := jsonscan.Value(s, from, maxDepth, jsonscan.Strict)
	switch res {
	case jsonscan.OK:
		rd.r.src, rd.r.pos, rd.r.failed, rd.r.errAt = s, end, false, 0
		return s[jsonscan.SkipSpace(s, from):end], end, 0, true
	case jsonscan.TooDeep:
		rd.r = repairer{src: s, maxDepth: maxDepth}
		rd.r.tooDeep(end)
		return "", 0, 0, false
	}
	out, end, repairs, ok := rd.AppendValue(nil, s, from)
	if !ok {
		return "", 0, 0, false
	}
	// out is never written again.
	return unsafe.String(&out[0], len(out)), end, repairs, true
}

// AppendValue repairs the value that starts at s[from], after whitespace and comments,
// appends it to dst as compact JSON, and returns the index in s after it and the
// repairs it needed. ok is false when no value could be read: [Reader.Err] says why. A
// nil dst is allocated for the text ahead.
func (rd *Reader) AppendValue(dst []byte, s string, from int) (out []byte, end int, repairs Repairs, ok bool) {
	r := &rd.r
	maxDepth := rd.maxDepth()
	if dst == nil {
		r.init(s, from, maxDepth)
	} else {
		*r = repairer{src: s, pos: from, maxDepth: maxDepth, out: dst}
	}
	r.inCall, r.python = rd.Args, rd.Python
	r.space()
	if r.pos >= len(s) {
		r.fail(r.pos, "expected a JSON value, found "+Describe(s, r.pos))
		return dst, 0, 0, false
	}
	// A failure recorded is the value's, also where reading went on past it: what
	// failed is missing from the output.
	if !r.value() || r.failed {
		return dst, 0, 0, false
	}
	// The value is valid by construction; the check turns a bug into an error instead
	// of broken JSON.
	if jsonscan.Check(r.out[len(dst):], maxDepth+1, jsonscan.Strict) != jsonscan.OK {
		r.fail(from, msgRepairBug)
		return dst, 0, 0, false
	}
	if rd.Arguments && (r.fixes&TruncatedValue == 0 || rd.Complete) {
		if at, ambiguous := ambiguousArguments(s[:r.pos], r.out[len(dst):], r.fixes, rd.Complete); ambiguous {
			r.failed, r.errAt, r.errMsg, r.errLimit = true, at, ambiguousMessage, ErrAmbiguous
			return dst, 0, 0, false
		}
	}
	return r.out, r.pos, r.fixes &^ internalRepairs, true
}

// Err locates the failure of the last read in the lines and columns of its text; nil
// when it read a value.
func (rd *Reader) Err() *SyntaxError {
	if !rd.r.failed {
		return nil
	}
	return rd.r.syntaxError()
}

// Stopped returns how far into its text the last read got: past the value when it read
// one, else as far as it read before it gave up.
func (rd *Reader) Stopped() int { return max(rd.r.errAt, rd.r.pos) }
