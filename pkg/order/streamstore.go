package order

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/messages"
)

// StreamStore keeps the state of streamed responses in a key-value bucket (the gather
// bucket), per response: in one key ([StreamKey]) how many calls, bitmaps of which may
// run together and which are answered and failed, what released each run of calls, and
// the calls still waiting; each released call in a key of its own ([StreamCallKey]),
// created once by the write that releases it, before that write. A chunk or a result
// then rewrites a few bytes per released call, not every call: the first key is read
// and written with compare-and-set, a released call's key only read again by a
// redelivery of the message that released it.
//
// Make one with [NewStreamStore], and share it among the stages of a process that update
// the same responses (the parser and the formatter): their updates of one response then
// take turns rather than each retrying against the others.
type StreamStore struct {
	KV jetstream.KeyValue

	turns *bus.Combiner[streamHead, *streamOp]
}

// NewStreamStore keeps the state of streamed responses in kv, the gather bucket.
func NewStreamStore(kv jetstream.KeyValue) StreamStore {
	return StreamStore{KV: kv, turns: bus.NewCombiner[streamHead, *streamOp]()}
}

// StreamKey is where the state of a streamed response (by its scoped id) is kept.
func StreamKey(response string) string { return bus.Key(response) + ".stream" }

// StreamCallKey is where the body of call index of a streamed response (by its scoped
// id) is kept, as the parser settled it.
func StreamCallKey(response string, index int) string {
	return bus.Key(response) + ".call." + strconv.Itoa(index)
}

// CallKeys are the keys of the calls of st (a streamed response, by its scoped id)
// that have one: the released calls, but those released by an update that settles them
// again ([Streamed.Derive]).
func (st *Streamed) CallKeys(response string) []string {
	var keys []string
	for i := range st.Calls {
		if c := &st.Calls[i]; c.By != "" && !c.derived {
			keys = append(keys, StreamCallKey(response, i))
		}
	}
	return keys
}

// streamHead is what StreamKey holds: a Streamed without its calls' bodies.
type streamHead struct {
	N        int                   `json:"n,omitempty"`
	Final    bool                  `json:"final,omitempty"`
	OnError  OnError               `json:"on_error,omitempty"`
	End      *messages.ResultError `json:"end,omitempty"`
	Together []byte                `json:"together,omitempty"`
	Answered []byte                `json:"answered,omitempty"`
	Failed   []byte                `json:"failed,omitempty"`
	Output   string                `json:"output,omitempty"`
	// FailedTool is the tool of the first call answered with a failure, when its answer
	// named it.
	FailedTool string `json:"failed_tool,omitempty"`
	// Runs cover the calls in order: each run the calls released by one message (By;
	// "" while they wait), End when with the end's error.
	Runs []streamRun `json:"runs,omitempty"`
	// Waiting are the calls not released, in order, as settled.
	Waiting []messages.ToolCall `json:"waiting,omitempty"`

	// released are the calls released since the state this was made from, to be
	// created in their keys before it is written.
	released map[int]messages.ToolCall
}

// streamRun is a run of calls released by one message; Derived: by one that settles
// them again (Streamed.Derive), so their bodies have no keys.
type streamRun struct {
	By      string `json:"b,omitempty"`
	N       int    `json:"n"`
	End     bool   `json:"e,omitempty"`
	Derived bool   `json:"d,omitempty"`
}

func setBit(b []byte, i int) []byte {
	if n := i/8 + 1; len(b) < n {
		b = append(b, make([]byte, n-len(b))...)
	}
	b[i/8] |= 1 << (i % 8)
	return b
}

func bit(b []byte, i int) bool { return i/8 < len(b) && b[i/8]&(1<<(i%8)) != 0 }

// headOf is the header of st; released are the calls st released that the header st
// was read from holds as waiting or not at all, by index: their keys are created before
// the header is written.
func headOf(st *Streamed) (h streamHead, released map[int]messages.ToolCall) {
	h = streamHead{N: len(st.Calls), Final: st.Final, OnError: st.OnError, End: st.End, Output: st.Output, FailedTool: st.failedTool}
	for i := range st.Calls {
		c := &st.Calls[i]
		if c.Together {
			h.Together = setBit(h.Together, i)
		}
		if c.Answered {
			h.Answered = setBit(h.Answered, i)
		}
		if c.Failed {
			h.Failed = setBit(h.Failed, i)
		}
		if r := len(h.Runs) - 1; r >= 0 && h.Runs[r].By == c.By && h.Runs[r].End == c.ended && h.Runs[r].Derived == c.derived {
			h.Runs[r].N++
		} else {
			h.Runs = append(h.Runs, streamRun{By: c.By, N: 1, End: c.ended, Derived: c.derived})
		}
		switch {
		case c.settled == nil:
			// Released before: a stub, its key written then.
		case c.By == "":
			h.Waiting = append(h.Waiting, *c.settled)
		case c.derived:
			// Settled again, not read, by a redelivery of what released it.
		default:
			if released == nil {
				released = map[int]messages.ToolCall{}
			}
			released[i] = *c.settled
		}
	}
	return h, released
}

// streamed is the state h holds, its released calls stubs.
func (h *streamHead) streamed() Streamed {
	st := Streamed{Final: h.Final, OnError: h.OnError, End: h.End, Output: h.Output, Calls: make([]StreamCall, h.N), failedTool: h.FailedTool}
	i := 0
	for _, r := range h.Runs {
		for range r.N {
			if i < h.N {
				st.Calls[i].By, st.Calls[i].ended, st.Calls[i].derived = r.By, r.End, r.Derived
			}
			i++
		}
	}
	waiting := h.Waiting
	for i := range st.Calls {
		c := &st.Calls[i]
		c.Together, c.Answered, c.Failed = bit(h.Together, i), bit(h.Answered, i), bit(h.Failed, i)
		if c.By == "" && len(waiting) > 0 {
			c.Call, waiting = waiting[0], waiting[1:]
			settled := c.Call
			c.settled = &settled
			continue
		}
		c.Call.Index, c.stub = i, true
	}
	return st
}

// Update applies fn to the state of response (by its scoped id, messages.ScopedID) with
// compare-and-set on its first key and returns the state as stored (the calls released
// before as stubs: their count, what released them, which are answered). The calls fn
// releases are created in their keys before the state that says so is written; a call
// released before that fn releases again (a redelivery) is read from its key. A state
// it creates for a response answered meanwhile is deleted again, the calls' keys with
// it: ErrAnswered ([Created]).
//
// The updates the workers of this process make to one response at once take turns, each
// turn applying every update queued meanwhile, in order, and writing them in one
// compare-and-set ([bus.Combiner]); each update returns the state as it left it. fn may
// run more than once (again on the state as stored, when another writer wrote first);
// one that returns an error must leave the state as it found it: the turn's other
// updates are written.
func (s StreamStore) Update(ctx context.Context, response string, fn func(*Streamed) (bool, error)) (Streamed, error) {
	key := StreamKey(response)
	var bodies map[int]messages.ToolCall // a call's key never changes: read once across retries
	load := func(i int) (messages.ToolCall, error) {
		if c, ok := bodies[i]; ok {
			return c, nil
		}
		if bodies == nil {
			bodies = map[int]messages.ToolCall{}
		}
		k := StreamCallKey(response, i)
		e, err := s.KV.Get(ctx, k)
		if err != nil {
			// Not there: read from a replica behind, or the response was answered since.
			return messages.ToolCall{}, fmt.Errorf("%s/%s: call %d of the stream state: %w", s.KV.Bucket(), k, i, err)
		}
		var c messages.ToolCall
		if err := json.Unmarshal(e.Value(), &c); err != nil {
			return c, fmt.Errorf("%s/%s: %w", s.KV.Bucket(), k, err)
		}
		bodies[i] = c
		return c, nil
	}
	var created []string
	op := &streamOp{fn: fn}
	if err := s.turns.Do(ctx, key, op, bus.Turn[streamHead, *streamOp]{
		Read: func() (streamHead, uint64, error) { return bus.GetJSON[streamHead](ctx, s.KV, key) },
		Apply: func(h streamHead, rev uint64, ops []*streamOp) (streamHead, bool, error) {
			// An update that could not read a call's body it needs fails alone: the
			// turn's others are applied again without it.
			unread := map[*streamOp]error{}
			var st Streamed
			changed := false
			for again := true; again; {
				again, changed = false, false
				st = h.streamed()
				st.load = load
				var last *streamOp
				for _, op := range ops {
					if err := unread[op]; err != nil {
						op.st, op.err = Streamed{}, err
						continue
					}
					st.derive = nil
					c, err := op.fn(&st)
					if st.loadErr != nil {
						unread[op], again = st.loadErr, true
						break
					}
					op.err, changed = err, changed || c && err == nil
					op.st, last = st.snapshot(), op
				}
				if !again && last != nil {
					st.load, st.derive = nil, nil
					last.st = st
				}
			}
			if len(unread) == len(ops) {
				return h, false, nil // each failed alone
			}
			if !changed {
				if rev == 0 && len(st.Calls) == 0 {
					// No state: not started, or answered and deleted. What comes for a
					// response answered (a result redelivered) has nothing left to do.
					answered, err := Answered(ctx, s.KV, response)
					if err == nil && answered {
						err = ErrAnswered
					}
					return h, false, err
				}
				return h, false, nil
			}
			next, released := headOf(&st)
			next.released = released
			return next, true, nil
		},
		Write: func(h streamHead, rev uint64) (uint64, error) {
			keys, err := s.createCalls(ctx, response, h.released)
			created = append(created, keys...)
			if err != nil {
				return 0, err
			}
			val, err := json.Marshal(h)
			if err != nil {
				return 0, err
			}
			newRev, err := bus.CompareAndSet(ctx, s.KV, key, val, rev)
			if err == nil && rev == 0 {
				// A state written over one that was there cannot be an answered
				// response's: no state changes once every call is answered, and Finish
				// deletes the calls it names after the state that named them last was
				// written. A state this created may be, and so may the calls created
				// with it.
				err = Created(ctx, s.KV, response, append([]string{key}, created...)...)
			}
			return newRev, err
		},
		Fail: func(ops []*streamOp, err error) {
			for _, op := range ops {
				op.err = err
			}
		},
	}); err != nil {
		return Streamed{}, err
	}
	return op.st, op.err
}

// streamOp is one update of a turn: its function and, once written, the state it left
// and its error.
type streamOp struct {
	fn  func(*Streamed) (bool, error)
	st  Streamed
	err error
}

// createCalls creates the keys of calls (as settled, by their place in the response):
// a key there already (another writer released the call first, or this one before a
// retry) stands. It returns the keys.
func (s StreamStore) createCalls(ctx context.Context, response string, calls map[int]messages.ToolCall) ([]string, error) {
	vals := make(map[string][]byte, len(calls))
	keys := make([]string, 0, len(calls))
	for i, c := range calls {
		v, err := json.Marshal(c)
		if err != nil {
			return nil, err
		}
		k := StreamCallKey(response, i)
		keys, vals[k] = append(keys, k), v
	}
	err := eachKey(keys, func(k string) error {
		if _, err := s.KV.Create(ctx, k, vals[k]); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("%s/%s: %w", s.KV.Bucket(), k, err)
		}
		return nil
	})
	return keys, err
}
