package bus

import (
	"context"
	"errors"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// Combiner makes the compare-and-set writes that the workers of one process make to one
// key take turns, and each turn many writes: while one worker writes a key, the others
// that come to write it queue, and the first of them then writes everything queued
// meanwhile at once, with its own context, one read at most (none when the turn before
// wrote the key and nobody else has since) and one compare-and-set.
//
// Without it, n workers writing one key at once each read it, and all but one fail
// their compare-and-set and read it again: about n² round trips for n writes, each
// decoding the value. With it, about two per turn. Writers in other processes are
// still met by compare-and-set: a turn that loses reads the key again and applies its
// writes to what it holds.
//
// S is what the key holds, decoded; O a pending write (a pointer, holding its inputs
// and, once written, its results). A nil Combiner gives each write a turn of its own.
type Combiner[S, O any] struct {
	mu     sync.Mutex
	queues map[string]*combineQueue[S, O]
}

// NewCombiner returns an empty Combiner.
func NewCombiner[S, O any]() *Combiner[S, O] {
	return &Combiner[S, O]{queues: map[string]*combineQueue[S, O]{}}
}

// Known is what a key held when the process last read or wrote it, kept from one turn
// to the next while writes of the key keep coming.
type Known[S any] struct {
	Value S
	// Rev is Value's revision; 0: the key did not exist.
	Rev uint64
	// OK: Value and Rev are what the key held after the last turn. A turn sets it false
	// when it does not know (a write failed), and the next reads the key first.
	OK bool
}

type combineQueue[S, O any] struct {
	waiting []*combineWait[S, O]
	known   Known[S]
}

type combineWait[S, O any] struct {
	op   O
	done chan struct{}
	// batch, when set, is the turn this waiter is to write (itself first) in queue.
	batch []*combineWait[S, O]
	queue *combineQueue[S, O]
	err   error
}

// Turn is how a turn of a [Combiner] reads, changes and writes its key.
type Turn[S, O any] struct {
	// Read reads the key: its value and revision (0: the key is not there).
	Read func() (S, uint64, error)
	// Apply applies ops, in order, to v (the value at revision rev; it must not change
	// v), sets each op's results, and returns the value to write and whether it differs
	// from v. An error fails every op of the turn.
	Apply func(v S, rev uint64, ops []O) (S, bool, error)
	// Write writes v over revision rev (0: creates the key) and returns its revision. A
	// compare-and-set that finds another's write first returns jetstream.ErrKeyExists or
	// ErrKeyRevisionMismatch: the turn then reads the key again and applies its ops
	// again.
	Write func(v S, rev uint64) (uint64, error)
	// Fail sets err as the result of every op.
	Fail func(ops []O, err error)
}

// Do has op written in a turn of key, by this caller or by the one whose turn op
// joined, and returns once it is written, or failed: its results are set then. A turn
// reads the key unless the turn before left it known, applies its ops, and writes the
// result with compare-and-set, again from a fresh read while another writer wins. A
// turn whose ops change nothing in what was known answers them from a fresh read (the
// key may have changed or gone since: a redelivery must see what is there now).
// ctx bounds the turn this caller writes; ErrTurnPanicked when the turn's write
// panicked (op's results are not set then; the panic goes on in the writer).
func (c *Combiner[S, O]) Do(ctx context.Context, key string, op O, t Turn[S, O]) error {
	if c == nil {
		var known Known[S]
		turn(ctx, &known, []O{op}, t)
		return nil
	}
	w := &combineWait[S, O]{op: op, done: make(chan struct{})}
	q, batch := c.join(key, w)
	if q == nil {
		<-w.done
		if w.batch == nil {
			return w.err // written in the turn before
		}
		q, batch = w.queue, w.batch
	}
	ops := make([]O, len(batch))
	for i, b := range batch {
		ops[i] = b.op
	}
	completed := false
	defer func() {
		if !completed {
			q.known = Known[S]{}
		}
		next := c.handOff(key, q)
		for _, b := range batch {
			if b != w {
				if !completed {
					b.err = ErrTurnPanicked
				}
				close(b.done)
			}
		}
		if next != nil {
			close(next.done)
		}
	}()
	turn(ctx, &q.known, ops, t)
	completed = true
	return nil
}

// turn writes ops to a key of which known is known.
func turn[S, O any](ctx context.Context, known *Known[S], ops []O, t Turn[S, O]) {
	fail := func(err error) {
		known.OK = false
		t.Fail(ops, err)
	}
	for {
		fresh := false
		if !known.OK {
			v, rev, err := t.Read()
			if err != nil {
				fail(err)
				return
			}
			*known, fresh = Known[S]{Value: v, Rev: rev, OK: true}, true
		}
		next, changed, err := t.Apply(known.Value, known.Rev, ops)
		switch {
		case err != nil:
			fail(err)
			return
		case !changed && !fresh:
			known.OK = false
			continue
		case !changed:
			return
		}
		rev, err := t.Write(next, known.Rev)
		switch {
		case err == nil:
			*known = Known[S]{Value: next, Rev: rev, OK: true}
			return
		case !errors.Is(err, jetstream.ErrKeyExists) && !errors.Is(err, jetstream.ErrKeyRevisionMismatch):
			fail(err)
			return
		case ctx.Err() != nil:
			fail(ctx.Err())
			return
		}
		known.OK = false // another writer wrote first
	}
}

// ErrTurnPanicked: the write of a turn panicked, so the writes in it are not known to
// be written.
var ErrTurnPanicked = errors.New("the write of this key's turn panicked")

// join returns the queue of key and w's turn when nobody writes key (w writes it now),
// or nothing after queueing w for the next turn.
func (c *Combiner[S, O]) join(key string, w *combineWait[S, O]) (*combineQueue[S, O], []*combineWait[S, O]) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if q := c.queues[key]; q != nil {
		q.waiting = append(q.waiting, w)
		return nil, nil
	}
	q := &combineQueue[S, O]{}
	c.queues[key] = q
	return q, []*combineWait[S, O]{w}
}

// Waiting is how many writes of key wait for its next turn (not counting the turn
// under way): what a test that must queue writes behind a turn waits for.
func (c *Combiner[S, O]) Waiting(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if q := c.queues[key]; q != nil {
		return len(q.waiting)
	}
	return 0
}

// handOff ends a turn of q: the writes queued meanwhile are the next turn, for the first
// of them to write (returned; its done is the caller's to close). With none, the queue
// is dropped, and with it what is known of the key.
func (c *Combiner[S, O]) handOff(key string, q *combineQueue[S, O]) *combineWait[S, O] {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(q.waiting) == 0 {
		delete(c.queues, key)
		return nil
	}
	next := q.waiting[0]
	next.batch, next.queue, q.waiting = q.waiting, q, nil
	return next
}
