package order

import (
	"context"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/bus"
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
}

// StreamCall is one call of a streamed response.
type StreamCall struct {
	Call messages.ToolCall `json:"call"`
	// Together: the call may run alongside its neighbours that may too.
	Together bool `json:"together,omitempty"`
	// By names the message that released the call ("" while it waits).
	By       string `json:"by,omitempty"`
	Answered bool   `json:"answered,omitempty"`
	Failed   bool   `json:"failed,omitempty"`
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
		c := calls[i]
		c.Stream, c.Count, c.Next = true, 0, 0
		st.Calls = append(st.Calls, StreamCall{Call: c, Together: together[i]})
		changed = true
	}
	return changed
}

// Answer marks call index answered (failed when !ok) and reports whether st changed.
func (st *Streamed) Answer(index int, ok bool) bool {
	if index < 0 || index >= len(st.Calls) || st.Calls[index].Answered {
		return false
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
		start := p
		for c.Together && start > 0 && st.Calls[start-1].Together {
			start--
		}
		if st.Final && st.End != nil {
			// The response ended without its last chunk: what did not run by then never
			// runs; it is answered with why.
			if c.Call.Error == nil {
				c.Call.Error = &messages.ResultError{Code: st.End.Code, Message: "not run: " + st.End.Message}
			}
			c.By = by
			changed = true
			continue
		}
		failed := -1
		for i := range start {
			if !st.Calls[i].Answered {
				return st.releasedBy(by), changed
			}
			if st.Calls[i].Failed && failed < 0 {
				failed = i
			}
		}
		if failed >= 0 && st.OnError == Skip && c.Call.Error == nil {
			f := st.Calls[failed].Call
			c.Call.Error = &messages.ResultError{Code: messages.CodeSkipped, Message: "not run: call " + strconv.Itoa(f.Index) +
				" (" + f.Tool + ") of this response failed before it, and the configuration skips the calls after a failure"}
		}
		c.By = by
		changed = true
	}
	return st.releasedBy(by), changed
}

func (st *Streamed) releasedBy(by string) []messages.ToolCall {
	var calls []messages.ToolCall
	for _, c := range st.Calls {
		if c.By == by {
			calls = append(calls, c.Call)
		}
	}
	return calls
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

// StreamStore keeps the state of streamed responses in a key-value bucket (the gather
// bucket), one key per response.
type StreamStore struct{ KV jetstream.KeyValue }

// StreamKey is where the state of a streamed response (by its scoped id) is kept.
func StreamKey(response string) string { return bus.Key(response) + ".stream" }

// Update applies fn to the state of response (by its scoped id, messages.ScopedID) with
// compare-and-set and returns the state as stored. A state it creates for a response
// answered meanwhile is deleted again: ErrAnswered ([Created]).
func (s StreamStore) Update(ctx context.Context, response string, fn func(*Streamed) (bool, error)) (Streamed, error) {
	st, created, err := bus.UpdateJSONCreated(ctx, s.KV, StreamKey(response), fn)
	if err == nil && created {
		err = Created(ctx, s.KV, response, StreamKey(response))
	}
	return st, err
}
