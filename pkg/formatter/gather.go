package formatter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/order"
)

// Gathered says what is answered of a response once results were added to it.
type Gathered struct {
	// Answered counts the calls answered.
	Answered int
	// Prefix is the number of calls at the start of the response that are all answered:
	// the index of the first call not answered.
	Prefix int
	// Failed is the index of the first call answered with a failure, -1 when none is.
	Failed int
}

// Before reports whether every call before index n is answered.
func (g Gathered) Before(n int) bool { return g.Prefix >= n }

// progress is what the response's key in the gather bucket holds while its results
// come in: which calls are answered, not their results (each is in a key of its own,
// order.ResultKey), so that a result changes a few bytes however wide its response is.
// Once the output is stored, order.Finish replaces it with the answered mark, which
// reads the same field.
type progress struct {
	Answered bool `json:"answered,omitempty"`
	// Got has bit i%8 of byte i/8 set when call i is answered.
	Got []byte `json:"got,omitempty"`
	// Failed is 1 + the index of the first call answered with a failure (0: none).
	Failed int `json:"failed,omitempty"`
}

// add marks call index answered (failed when !ok) and reports whether p changed.
func (p *progress) add(index int, ok bool) bool {
	if index < 0 || p.has(index) {
		return false
	}
	if n := index/8 + 1; len(p.Got) < n {
		p.Got = append(p.Got, make([]byte, n-len(p.Got))...)
	}
	p.Got[index/8] |= 1 << (index % 8)
	if !ok && (p.Failed == 0 || index+1 < p.Failed) {
		p.Failed = index + 1
	}
	return true
}

func (p *progress) has(index int) bool {
	return index/8 < len(p.Got) && p.Got[index/8]&(1<<(index%8)) != 0
}

func (p *progress) gathered() Gathered {
	g := Gathered{Failed: p.Failed - 1, Prefix: -1}
	for i, b := range p.Got {
		g.Answered += bits.OnesCount8(b)
		if g.Prefix < 0 && b != 0xff {
			g.Prefix = i*8 + bits.TrailingZeros8(^b)
		}
	}
	if g.Prefix < 0 {
		g.Prefix = len(p.Got) * 8
	}
	return g
}

// KVGatherer keeps gathering state in the gather key-value bucket: each result in a key
// of its own (order.ResultKey), created once, and which calls of the response are
// answered in the response's key, updated with compare-and-set so that replicas never
// overwrite each other. Make one with [NewKVGatherer]: results of one response that
// the workers of one process hold at once are then marked with one compare-and-set
// rather than each retrying against the others.
type KVGatherer struct {
	KV jetstream.KeyValue

	marks *bus.Combiner[progress, *markWait]
}

// NewKVGatherer gathers in kv, the gather bucket.
func NewKVGatherer(kv jetstream.KeyValue) KVGatherer {
	return KVGatherer{KV: kv, marks: bus.NewCombiner[progress, *markWait]()}
}

// Results implements [Gatherer]: it reads the n results at once ([each]). A
// response answered since its last call was marked has lost its result keys: a key
// missing hands the delivery back, and the next finds the mark. With n 0 it reads the
// response's key.
func (s KVGatherer) Results(ctx context.Context, conversation, responseID string, n int) ([]messages.ToolResult, error) {
	response := messages.ScopedID(conversation, responseID)
	if n == 0 {
		p, _, err := bus.GetJSON[progress](ctx, s.KV, bus.Key(response))
		if err == nil && p.Answered {
			err = order.ErrAnswered
		}
		return nil, err
	}
	out := make([]messages.ToolResult, n)
	errs := make([]error, n)
	each(n, func(i int) {
		key := order.ResultKey(response, i)
		e, err := s.KV.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			// Marked answered after it was stored: a read served by a replica
			// behind, or the response was answered since and its keys deleted.
			errs[i] = fmt.Errorf("%s/%s: the result of call %d is not there", s.KV.Bucket(), key, i)
		case err != nil:
			errs[i] = fmt.Errorf("%s/%s: %w", s.KV.Bucket(), key, err)
		default:
			if err := messages.DecodeResult(e.Value(), &out[i]); err != nil {
				errs[i] = fmt.Errorf("%s/%s: %w", s.KV.Bucket(), key, err)
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// each runs f(0) to f(n-1), 64 at a time: a response's keys are read and written
// together, bounded however wide it is.
func each(n int, f func(int)) {
	if n == 1 {
		f(0)
		return
	}
	var wg sync.WaitGroup
	slots := make(chan struct{}, 64)
	for i := range n {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			f(i)
		})
	}
	wg.Wait()
}

// Add implements [Gatherer]: each result is stored in its key (a result whose key
// exists is a redelivery, and the first stands), then marked answered. A result added
// to a response already answered is deleted again.
func (s KVGatherer) Add(ctx context.Context, rs ...messages.ToolResult) (Gathered, error) {
	if len(rs) == 0 {
		return Gathered{Failed: -1}, nil
	}
	response := messages.ScopedID(rs[0].Conversation, rs[0].ResponseID)
	created := make([]bool, len(rs))
	errs := make([]error, len(rs))
	store := func(i int) {
		r := &rs[i]
		_, err := s.KV.Create(ctx, order.ResultKey(response, r.Index), messages.AppendResult(nil, r))
		switch {
		case err == nil:
			created[i] = true
		case !errors.Is(err, jetstream.ErrKeyExists):
			errs[i] = fmt.Errorf("%s/%s: %w", s.KV.Bucket(), order.ResultKey(response, r.Index), err)
		}
	}
	each(len(rs), store)
	if err := errors.Join(errs...); err != nil {
		return Gathered{}, err
	}
	g, err := s.mark(ctx, bus.Key(response), rs)
	if errors.Is(err, order.ErrAnswered) {
		var keys []string
		for i, r := range rs {
			if created[i] {
				keys = append(keys, order.ResultKey(response, r.Index))
			}
		}
		for _, k := range keys {
			if err := s.KV.Delete(ctx, k); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
				return Gathered{}, fmt.Errorf("%s/%s: %w", s.KV.Bucket(), k, err)
			}
		}
	}
	return g, err
}

// Store implements [Gatherer].
func (s KVGatherer) Store(ctx context.Context, r messages.ToolResult) error {
	key := order.ResultKey(messages.ScopedID(r.Conversation, r.ResponseID), r.Index)
	if _, err := s.KV.Create(ctx, key, messages.AppendResult(nil, &r)); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("%s/%s: %w", s.KV.Bucket(), key, err)
	}
	return nil
}

// Finish implements [Finisher].
func (s KVGatherer) Finish(ctx context.Context, response string, keys ...string) error {
	return order.Finish(ctx, s.KV, response, keys...)
}

// Refinish implements [Finisher].
func (s KVGatherer) Refinish(ctx context.Context, response string) error {
	return order.Refinish(ctx, s.KV, response)
}

// mark marks rs answered in key with compare-and-set, together with what the other
// workers of this process mark in the same key meanwhile (bus.Combiner), and returns
// what is answered once rs are.
func (s KVGatherer) mark(ctx context.Context, key string, rs []messages.ToolResult) (Gathered, error) {
	w := &markWait{rs: rs}
	if err := s.marks.Do(ctx, key, w, bus.Turn[progress, *markWait]{
		Read: func() (progress, uint64, error) { return bus.GetJSON[progress](ctx, s.KV, key) },
		Apply: func(p progress, _ uint64, batch []*markWait) (progress, bool, error) {
			if p.Answered {
				return p, false, order.ErrAnswered
			}
			p.Got = slices.Clone(p.Got)
			changed := false
			for _, w := range batch {
				for _, r := range w.rs {
					changed = p.add(r.Index, r.Success) || changed
				}
				w.g, w.err = p.gathered(), nil
			}
			return p, changed, nil
		},
		Write: func(p progress, rev uint64) (uint64, error) {
			val, err := json.Marshal(&p)
			if err != nil {
				return 0, err
			}
			return bus.CompareAndSet(ctx, s.KV, key, val, rev)
		},
		Fail: func(batch []*markWait, err error) {
			for _, w := range batch {
				w.err = err
			}
		},
	}); err != nil {
		return Gathered{}, err
	}
	return w.g, w.err
}

// markWait is one mark of a turn: its results, and once written what is answered.
type markWait struct {
	rs  []messages.ToolResult
	g   Gathered
	err error
}
