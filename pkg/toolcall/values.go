package toolcall

import (
	"unsafe"

	"github.com/toolbus/toolbus/pkg/jsonrepair"
	"github.com/toolbus/toolbus/pkg/jsonscan"
)

// limits are the repairer's limits under x.o.
func (x *extractor) limits() jsonrepair.Limits {
	return jsonrepair.Limits{MaxDepth: x.o.MaxDepth, MaxInputSize: x.o.MaxInputSize}
}

// repairValue reads one JSON value starting at s[from] (after whitespace and comments),
// repairing it, and returns it with the index after it. Valid JSON costs one scan and
// no copy, and when it is an object, x.rec records its members.
func (x *extractor) repairValue(s string, from int) (string, int, fixSet, error) {
	v, end, fixes, ok := x.readValue(s, from)
	if !ok {
		return "", 0, 0, x.rd.Err()
	}
	return v, end, fixes, nil
}

// readValue is repairValue for text that may not be JSON at all: on failure x.rd says
// how far it read (Stopped) without the cost of locating the error in lines and
// columns.
func (x *extractor) readValue(s string, from int) (v string, end int, fixes fixSet, ok bool) {
	x.rd.MaxDepth, x.rd.Args, x.rd.Arguments, x.rd.Complete = x.o.MaxDepth, false, true, false
	end, res := scanStrictMembers(s, from, x.o.MaxDepth, &x.rec)
	switch res {
	case jsonscan.OK:
		return s[jsonscan.SkipSpace(s, from):end], end, 0, true
	case jsonscan.TooDeep:
		_, _, _, ok := x.rd.Value(s, from) // the same scan, failing at the same place
		return "", 0, 0, ok
	}
	// The model wrote on after s (a closing tag, the next call): arguments that lack
	// brackets at its end lost them inside, they were not cut off.
	x.rd.Complete = len(s) < len(x.text) && unsafe.StringData(s) == unsafe.StringData(x.text) && !isBlank(x.text[len(s):])
	out, end, repairs, ok := x.rd.AppendValue(nil, s, from)
	if !ok {
		return "", 0, 0, false
	}
	// out is never written again.
	return unsafe.String(&out[0], len(out)), end, fixSet(repairs), true
}
