package parser

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/order"
)

// TextStore keeps the text of streamed responses in a key-value bucket (the gather
// bucket), one key per response ([TextKey]), updated with compare-and-set: the chunks
// read in order, whether the last was among them or why the response ended without it,
// and the chunks that came before their predecessor, which wait in the same value until
// it comes. One key, so that a chunk's reading and the chunks waiting for it are one
// write on one revision: on a cluster, a reader of two keys may see one of them behind
// the other, and a chunk could wait for ever for a predecessor that was read.
//
// Make one with [NewTextStore].
type TextStore struct {
	KV jetstream.KeyValue

	turns *bus.Combiner[storedText, *textOp]
}

// NewTextStore keeps the text of streamed responses in kv, the gather bucket.
func NewTextStore(kv jetstream.KeyValue) TextStore {
	return TextStore{KV: kv, turns: bus.NewCombiner[storedText, *textOp]()}
}

// TextKey is where the text of a streamed response (by its scoped id) is kept.
func TextKey(response string) string { return order.TextKey(response) }

// Append implements [Texts].
func (s TextStore) Append(ctx context.Context, response string, n int, chunk []byte, final bool, limit int, first Reading) (Streamed, error) {
	return s.update(ctx, response, func(t *streamText, _ time.Time) (bool, error) {
		if t.ended() || n <= t.Read || t.waiting(n) {
			return false, nil
		}
		if t.size()+len(chunk)+pieceOverhead > limit {
			return false, fmt.Errorf("chunk %d of %s: %w", n, response, ErrTooLong)
		}
		if n == 1 {
			t.Reading = first
		}
		if t.Watch == 0 {
			t.Watch = n // this chunk publishes the watch
		}
		t.add(n, chunk, final, nil)
		return true, nil
	})
}

// EndAt implements [Texts].
func (s TextStore) EndAt(ctx context.Context, response string, n int, first Reading, why *messages.ResultError) (Streamed, error) {
	return s.update(ctx, response, func(t *streamText, _ time.Time) (bool, error) {
		if t.ended() || n <= t.Read || t.waiting(n) {
			return false, nil
		}
		if n == 1 {
			t.Reading = first
		}
		if t.Watch == 0 {
			t.Watch = n // this chunk publishes the watch: the chunks before it may never come
		}
		t.add(n, nil, false, why)
		return true, nil
	})
}

// End implements [Texts].
func (s TextStore) End(ctx context.Context, response, by string, why *messages.ResultError) (Streamed, error) {
	return s.update(ctx, response, func(t *streamText, _ time.Time) (bool, error) {
		if t.ended() {
			return false, nil
		}
		t.end(by, why)
		return true, nil
	})
}

// Expire implements [Texts].
func (s TextStore) Expire(ctx context.Context, response string, idle time.Duration, why func(Streamed, time.Duration) *messages.ResultError) (Streamed, time.Duration, error) {
	var left time.Duration
	read, err := s.update(ctx, response, func(t *streamText, written time.Time) (bool, error) {
		left = 0
		if t.ended() {
			return false, nil
		}
		if since := time.Since(written); since < idle {
			left = idle - since
			return false, nil
		}
		t.end(ByWatch, why(t.streamed(), idle))
		return true, nil
	})
	return read, left, err
}

// Finish implements [Texts].
func (s TextStore) Finish(ctx context.Context, response string) error {
	return order.Finish(ctx, s.KV, response, order.StreamKeys(response)...)
}

// Refinish implements [Texts].
func (s TextStore) Refinish(ctx context.Context, response string) error {
	return order.Refinish(ctx, s.KV, response)
}

// update applies fn to the text of response (written: when it was last written) with
// compare-and-set. A response with no text yet whose output is stored is not started
// again: order.ErrAnswered.
//
// The updates the workers of this process make to one response at once take turns, each
// turn applying every update queued meanwhile, in order, and writing them in one
// compare-and-set ([bus.Combiner]): chunks that come together cost one read and one
// write, not a read and a failed write each. fn may run more than once (again on the
// text as stored, when another writer wrote first); one that returns an error must
// leave the text as it found it.
func (s TextStore) update(ctx context.Context, response string, fn func(t *streamText, written time.Time) (bool, error)) (Streamed, error) {
	key := TextKey(response)
	op := &textOp{fn: fn}
	if err := s.turns.Do(ctx, key, op, bus.Turn[storedText, *textOp]{
		Read: func() (storedText, uint64, error) {
			stored := storedText{written: time.Now()}
			e, err := s.KV.Get(ctx, key)
			switch {
			case errors.Is(err, jetstream.ErrKeyNotFound):
				answered, err := order.Answered(ctx, s.KV, response)
				if err == nil && answered {
					err = order.ErrAnswered
				}
				return stored, 0, err
			case err != nil:
				return stored, 0, fmt.Errorf("%s/%s: %w", s.KV.Bucket(), key, err)
			}
			if err := stored.t.decode(e.Value()); err != nil {
				return stored, 0, fmt.Errorf("%s/%s: %w", s.KV.Bucket(), key, err)
			}
			stored.written = e.Created()
			return stored, e.Revision(), nil
		},
		Apply: func(stored storedText, rev uint64, ops []*textOp) (storedText, bool, error) {
			t := stored.t
			t.Pieces = slices.Clone(t.Pieces)
			t.Times = slices.Clip(t.Times)
			changed := false
			for _, op := range ops {
				c, err := op.fn(&t, stored.written)
				op.err = err
				c = c && err == nil
				changed = changed || c
				op.read = t.streamed()
				op.read.Changed = c
			}
			for _, op := range ops {
				op.read.Found = rev != 0 || changed // written by the turn, or failed with it
			}
			if changed {
				stored.written = time.Now()
			}
			return storedText{t: t, written: stored.written}, changed, nil
		},
		Write: func(stored storedText, rev uint64) (uint64, error) {
			newRev, err := bus.CompareAndSet(ctx, s.KV, key, stored.t.encode(), rev)
			if err == nil && rev == 0 {
				// The first write of the text: a response answered meanwhile keeps no text.
				err = order.Created(ctx, s.KV, response, key)
			}
			return newRev, err
		},
		Fail: func(ops []*textOp, err error) {
			for _, op := range ops {
				op.read, op.err = Streamed{}, err
			}
		},
	}); err != nil {
		return Streamed{}, err
	}
	return op.read, op.err
}

// textOp is one update of a turn: its function and, once written, the response as it
// left it and its error.
type textOp struct {
	fn   func(t *streamText, written time.Time) (bool, error)
	read Streamed
	err  error
}

// storedText is a response's text as its key holds it, and when it was written.
type storedText struct {
	t       streamText
	written time.Time
}

// ByWatch names the idle timeout's watch as what ended a response.
const ByWatch = "watch"

// pieceOverhead is what a waiting chunk costs besides its bytes (its entry in the
// value's header), counted against the size limit so that the value always fits.
const pieceOverhead = 32

// streamText is the value at TextKey: a line of JSON (the fields), then the text read
// so far, then the bytes of each waiting piece in order.
type streamText struct {
	// Read counts the chunks read in order; Final: the last of them was the last one.
	Read  int  `json:"read"`
	Final bool `json:"final,omitempty"`
	// End says why the response ended without its last chunk, and By what ended it (a
	// chunk, order.ByChunk, or ByWatch).
	End *messages.ResultError `json:"end,omitempty"`
	By  string                `json:"by,omitempty"`
	// Watch is the chunk that publishes the idle timeout's watch of the response: the
	// first one written.
	Watch   int     `json:"watch,omitempty"`
	Reading Reading `json:"reading,omitzero"`
	// Size is the length of the text, Pieces the chunks that wait for their
	// predecessors, by number.
	Size   int     `json:"size"`
	Pieces []piece `json:"pieces,omitempty"`
	// Times are when the first MaxChunkEvents chunks were read, in Unix milliseconds:
	// the events of the response's span.
	Times []int64 `json:"times,omitempty"`

	text []byte
}

// MaxChunkEvents bounds the chunks a streamed response's span tells one by one: its
// span stays of one size however long the answer.
const MaxChunkEvents = 100

// read records that chunk n was read now, for the response's span.
func (t *streamText) read(n int) {
	if n <= MaxChunkEvents && len(t.Times) < n {
		t.Times = append(t.Times, time.Now().UnixMilli())
	}
}

// piece is a chunk that came before its predecessor. End, when set, ends the response
// with it when the piece's turn comes, instead of its text.
type piece struct {
	N     int                   `json:"n"`
	Size  int                   `json:"size"`
	Final bool                  `json:"final,omitempty"`
	End   *messages.ResultError `json:"end,omitempty"`
	data  []byte
}

func (t *streamText) ended() bool { return t.Final || t.End != nil }

// waiting reports whether chunk n waits already.
func (t *streamText) waiting(n int) bool {
	_, found := slices.BinarySearchFunc(t.Pieces, n, func(p piece, n int) int { return p.N - n })
	return found
}

// size is what the value holds of the response: the text and the waiting chunks.
func (t *streamText) size() int {
	n := len(t.text)
	for _, p := range t.Pieces {
		n += len(p.data) + pieceOverhead
	}
	return n
}

// add takes in chunk n (after t.Read, not waiting yet): the next one is read, with the
// chunks waiting after it; a later one waits. A chunk with end set ends the response
// with it when its turn comes, its text not read.
func (t *streamText) add(n int, chunk []byte, final bool, end *messages.ResultError) {
	if n > t.Read+1 {
		i, _ := slices.BinarySearchFunc(t.Pieces, n, func(p piece, n int) int { return p.N - n })
		t.Pieces = slices.Insert(t.Pieces, i, piece{N: n, Size: len(chunk), Final: final, End: end, data: chunk})
		return
	}
	if end != nil {
		t.end(order.ByChunk(n), end)
		return
	}
	t.text = append(t.text[:len(t.text):len(t.text)], chunk...)
	t.Read, t.Final = n, final
	t.read(n)
	for !t.ended() && len(t.Pieces) > 0 && t.Pieces[0].N == t.Read+1 {
		p := t.Pieces[0]
		t.Pieces = t.Pieces[1:]
		if p.End != nil {
			t.end(order.ByChunk(p.N), p.End)
			break
		}
		t.text = append(t.text, p.data...)
		t.Read, t.Final = p.N, p.Final
		t.read(p.N)
	}
	if t.Final {
		t.Pieces = nil // numbered after the last chunk: not part of the response
	}
	t.Size = len(t.text)
}

// end ends the response without its last chunk; the chunks still waiting are dropped.
func (t *streamText) end(by string, why *messages.ResultError) {
	t.End, t.By, t.Pieces = why, by, nil
}

func (t *streamText) streamed() Streamed {
	return Streamed{Text: string(t.text), Read: t.Read, Final: t.Final, End: t.End, By: t.By, Watch: t.Watch, Reading: t.Reading, Times: t.Times}
}

func (t *streamText) encode() []byte {
	t.Size = len(t.text)
	for i := range t.Pieces {
		t.Pieces[i].Size = len(t.Pieces[i].data)
	}
	head, _ := json.Marshal(t) // plain fields: always encodes, and never holds a raw line break
	b := make([]byte, 0, len(head)+1+t.size())
	b = append(append(append(b, head...), '\n'), t.text...)
	for _, p := range t.Pieces {
		b = append(b, p.data...)
	}
	return b
}

var errNotText = errors.New("not a streamed response's text")

// decode reads a value encode wrote; anything else is an error.
func (t *streamText) decode(v []byte) error {
	head, rest, ok := bytes.Cut(v, []byte("\n"))
	*t = streamText{}
	if !ok || json.Unmarshal(head, t) != nil || t.Read < 0 || t.Size < 0 || t.Size > len(rest) {
		*t = streamText{}
		return errNotText
	}
	t.text, rest = rest[:t.Size:t.Size], rest[t.Size:]
	last := t.Read
	for i := range t.Pieces {
		p := &t.Pieces[i]
		if p.N <= last+boolInt(i == 0) || p.Size < 0 || p.Size > len(rest) {
			*t = streamText{}
			return errNotText
		}
		p.data, rest = rest[:p.Size:p.Size], rest[p.Size:]
		last = p.N
	}
	if len(rest) != 0 {
		*t = streamText{}
		return errNotText
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
