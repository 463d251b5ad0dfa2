package order

import (
	"cmp"
	"slices"
	"strconv"

	"github.com/toolbus/toolbus/pkg/messages"
)

// Streamed is the state of one streamed response: its calls as the parser settled them,
// chunk by chunk, which of them were released to the executors and by what, and which
// are answered. The parser adds calls (on each chunk) and the formatter marks answers
// (on each result); both then release what may run now, with compare-and-set on one key
// ([StreamStore]), so that each call is released once, by one message, and a
// redelivery of that message releases the same calls again (their message ids make the
// second publish a no-op).
//
// The rule is the segments' rule, applied as calls arrive: a call may run once every
// call before its segment is answered, where its segment is the run of calls safe to
// run together it ends (or itself alone). A run of read-only calls at the start of a
// response runs as each call is written; a call that changes something waits for every
// call before it.
type Streamed struct {
	Calls []StreamCall `json:"calls,omitempty"`
	// Final is set once the response's last chunk is read: Calls are all its calls.
	Final bool `json:"final,omitempty"`
	// OnError is the response's policy for the calls after a failed one.
	OnError OnError `json:"on_error,omitempty"`
	// End, set with Final, says why the response ended without its last chunk read
	// (no chunk for the idle timeout, a chunk over a limit, a header nobody can read):
	// the calls not released by then are released with it as their error, so they are
	// answered without running, and the output carries it after the calls' results.
	End *messages.ResultError `json:"end,omitempty"`
	// Output names the message that answers the response (as By names one), set by the
	// first that finds it complete: that message, and its redeliveries, publish the
	// output; the others that find it complete too need not.
	Output string `json:"output,omitempty"`

	// load reads the body of call i, which a state read from its store ([StreamStore])
	// holds as a stub until a release needs it; loadErr is the first read that failed.
	load    func(i int) (messages.ToolCall, error)
	loadErr error
	// derive gives the body of call i again, as the update under way settles it (from
	// the response's text: [Streamed.Derive]); failedTool is the tool of the first
	// call answered with a failure, when its answer named it.
	derive     func(i int) (messages.ToolCall, bool)
	failedTool string
}

// Derive says that the update under way can give the calls it releases again, from the
// response's text (the parser, on a chunk): f returns call i as settled, or false when
// it cannot. The calls this update releases then get no key of their own
// ([StreamStore]), and a redelivery of the message that released them reads them from
// f, not from the store. A message that cannot settle calls again (a result) must not
// call it.
func (st *Streamed) Derive(f func(i int) (messages.ToolCall, bool)) { st.derive = f }

// StreamCall is one call of a streamed response.
type StreamCall struct {
	Call messages.ToolCall `json:"call"`
	// Together: the call may run alongside its neighbours that may too.
	Together bool `json:"together,omitempty"`
	// By names the message that released the call ("" while it waits).
	By       string `json:"by,omitempty"`
	Answered bool   `json:"answered,omitempty"`
	Failed   bool   `json:"failed,omitempty"`

	// stub: Call is not read yet (only Index is set); ended: released with the end's
	// error; derived: released by an update that can settle it again ([Streamed.Derive]),
	// so its body has no key. settled is the call as settled, before a release gave it
	// an error (what the store keeps), when st holds it.
	stub, ended, derived bool
	settled              *messages.ToolCall
}

// call returns call i, its body read first when st holds a stub of it, with the error
// its release gave it (derived again from the state: a release's error is not stored).
func (st *Streamed) call(i int) *messages.ToolCall {
	c := &st.Calls[i]
	if !c.stub {
		return &c.Call
	}
	body, ok := messages.ToolCall{}, false
	if st.derive != nil {
		if body, ok = st.derive(i); ok {
			body = settledCall(body)
		}
	}
	if !ok {
		if st.load == nil {
			return &c.Call
		}
		var err error
		if body, err = st.load(i); err != nil {
			st.loadErr = cmp.Or(st.loadErr, err)
			return &c.Call
		}
	}
	c.Call, c.stub = body, false
	if c.By == "" || c.Call.Error != nil {
		return &c.Call
	}
	if c.ended {
		if st.End != nil {
			c.Call.Error = endError(st.End)
		}
		return &c.Call
	}
	if st.OnError == Skip {
		if f := st.failedBefore(st.segmentStart(i)); f >= 0 {
			c.Call.Error = st.skipError(f)
		}
	}
	return &c.Call
}

// skipError is the error of a call skipped because call f failed before it: f is the
// first call answered with a failure, whose tool its answer named. A call without a
// tool's name (one nobody could read a name in) is named by its place alone; its body
// is read for its name only where it is kept (a call that waited, or held here): a call
// a chunk released has no key, and only the parser can settle it again.
func (st *Streamed) skipError(f int) *messages.ResultError {
	tool := st.failedTool
	if c := &st.Calls[f]; tool == "" || f != st.failedBefore(len(st.Calls)) {
		tool = ""
		if !c.stub || !c.derived || st.derive != nil {
			tool = st.call(f).Tool
		}
	}
	name := ""
	if tool != "" {
		name = " (" + tool + ")"
	}
	return &messages.ResultError{Code: messages.CodeSkipped, Message: "not run: call " + strconv.Itoa(f) +
		name + " of this response failed before it, and the configuration skips the calls after a failure"}
}

// segmentStart is the first call of the run of calls safe together that call p is in
// (p itself when it is not safe together).
func (st *Streamed) segmentStart(p int) int {
	start := p
	for st.Calls[p].Together && start > 0 && st.Calls[start-1].Together {
		start--
	}
	return start
}

// failedBefore is the first call before n answered with a failure, -1 when none is.
func (st *Streamed) failedBefore(n int) int {
	for i := range n {
		if st.Calls[i].Failed {
			return i
		}
	}
	return -1
}

func endError(end *messages.ResultError) *messages.ResultError {
	return &messages.ResultError{Code: end.Code, Message: "not run: " + end.Message}
}

// ByChunk, ByResult and ByEnd name what released a call.
func ByChunk(n int) string      { return "chunk " + strconv.Itoa(n) }
func ByResult(index int) string { return "result " + strconv.Itoa(index) }

const ByEnd = "end"

// Add appends the calls after the ones st holds (calls are the response's first calls,
// in order; together says which may run alongside their neighbours) and reports
// whether st changed. A call st holds already stands as it was first settled.
func (st *Streamed) Add(calls []messages.ToolCall, together []bool) bool {
	changed := false
	for i := len(st.Calls); i < len(calls); i++ {
		c := settledCall(calls[i])
		st.Calls = append(st.Calls, StreamCall{Call: c, Together: together[i], settled: &c})
		changed = true
	}
	return changed
}

// settledCall is c as a streamed response's state holds it: a call of a stream, whose
// count and next segment are not known when it is released.
func settledCall(c messages.ToolCall) messages.ToolCall {
	c.Stream, c.Count, c.Next = true, 0, 0
	return c
}

// Answer marks call index answered (failed when !ok, by a call of tool) and reports
// whether st changed.
func (st *Streamed) Answer(index int, ok bool, tool string) bool {
	if index < 0 || index >= len(st.Calls) || st.Calls[index].Answered {
		return false
	}
	if !ok {
		if f := st.failedBefore(len(st.Calls)); f < 0 || index < f {
			st.failedTool = tool
		}
	}
	st.Calls[index].Answered, st.Calls[index].Failed = true, !ok
	return true
}

// Release marks every waiting call that may run now as released by by, and returns the
// calls by released, now or earlier, and whether st changed. Under the skip policy a
// call after a failed one is released with its skipped error, which the executor
// answers without running anything.
func (st *Streamed) Release(by string) ([]messages.ToolCall, bool) {
	changed := false
	for p := range st.Calls {
		c := &st.Calls[p]
		if c.By != "" {
			continue
		}
		if st.Final && st.End != nil {
			// The response ended without its last chunk: what did not run by then never
			// runs; it is answered with why.
			if call := st.call(p); call.Error == nil {
				call.Error = endError(st.End)
			}
			c.By, c.ended, c.derived = by, true, st.derive != nil
			changed = true
			continue
		}
		start := st.segmentStart(p)
		failed := -1
		for i := range start {
			if !st.Calls[i].Answered {
				return st.releasedBy(by), changed
			}
			if st.Calls[i].Failed && failed < 0 {
				failed = i
			}
		}
		if call := st.call(p); failed >= 0 && st.OnError == Skip && call.Error == nil {
			call.Error = st.skipError(failed)
		}
		c.By, c.derived = by, st.derive != nil
		changed = true
	}
	return st.releasedBy(by), changed
}

func (st *Streamed) releasedBy(by string) []messages.ToolCall {
	var calls []messages.ToolCall
	for i := range st.Calls {
		if st.Calls[i].By == by {
			calls = append(calls, *st.call(i))
		}
	}
	return calls
}

// snapshot is a copy of st that later changes to st leave as it is.
func (st *Streamed) snapshot() Streamed {
	c := *st
	c.Calls = slices.Clone(st.Calls)
	c.load, c.loadErr, c.derive = nil, nil, nil
	return c
}

// Complete reports whether the response ended and every call of it is answered.
func (st *Streamed) Complete() bool {
	if !st.Final {
		return false
	}
	for _, c := range st.Calls {
		if !c.Answered {
			return false
		}
	}
	return true
}
