package bus

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// countingKV counts the compare-and-set writes made through it.
type countingKV struct {
	jetstream.KeyValue
	writes atomic.Int64
}

func (c *countingKV) Create(ctx context.Context, key string, v []byte, o ...jetstream.KVCreateOpt) (uint64, error) {
	c.writes.Add(1)
	return c.KeyValue.Create(ctx, key, v, o...)
}

func (c *countingKV) Update(ctx context.Context, key string, v []byte, rev uint64) (uint64, error) {
	c.writes.Add(1)
	return c.KeyValue.Update(ctx, key, v, rev)
}

type counter struct{ N int }

// increment is one write of a counter: once written, n is the count it made.
type increment struct {
	n   int
	err error
}

func counterTurn(ctx context.Context, kv jetstream.KeyValue, key string) Turn[counter, *increment] {
	return Turn[counter, *increment]{
		Read: func() (counter, uint64, error) { return GetJSON[counter](ctx, kv, key) },
		Apply: func(v counter, _ uint64, ops []*increment) (counter, bool, error) {
			for _, op := range ops {
				v.N++
				op.n, op.err = v.N, nil
			}
			return v, true, nil
		},
		Write: func(v counter, rev uint64) (uint64, error) {
			b, _ := json.Marshal(v)
			return CompareAndSet(ctx, kv, key, b, rev)
		},
		Fail: func(ops []*increment, err error) {
			for _, op := range ops {
				op.err = err
			}
		},
	}
}

// Two processes, 16 workers each, increment one key 640 times: no increment is lost or
// counted twice (each sees a count of its own, as if they ran one after another), and
// the workers of a process take turns, many increments a write, rather than each
// retrying against the others — fewer writes than increments.
func TestCombinerTurns(t *testing.T) {
	_, js := testJS(t)
	ctx := context.Background()
	bucket, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "combine"})
	if err != nil {
		t.Fatal(err)
	}
	kv := &countingKV{KeyValue: bucket}
	processes := []*Combiner[counter, *increment]{NewCombiner[counter, *increment](), NewCombiner[counter, *increment]()}
	const workers, each = 32, 20
	var (
		mu   sync.Mutex
		seen []int
		wg   sync.WaitGroup
	)
	for w := range workers {
		c := processes[w%2]
		wg.Go(func() {
			for range each {
				op := &increment{}
				if err := c.Do(ctx, "k", op, counterTurn(ctx, kv, "k")); err != nil || op.err != nil {
					t.Errorf("increment: %v %v", err, op.err)
					return
				}
				mu.Lock()
				seen = append(seen, op.n)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.Sort(seen)
	for i, n := range seen {
		if n != i+1 {
			t.Fatalf("increment %d saw count %d: counts lost or made twice", i, n)
		}
	}
	v, _, err := GetJSON[counter](ctx, kv, "k")
	if err != nil || v.N != workers*each {
		t.Fatalf("count %d (%v), want %d", v.N, err, workers*each)
	}
	if w := kv.writes.Load(); w >= workers*each {
		t.Errorf("%d writes for %d increments: the workers did not take turns", w, workers*each)
	}
	t.Logf("%d writes for %d increments", kv.writes.Load(), workers*each)
}

// A turn whose write panics fails the other writes in it with ErrTurnPanicked, and the
// key's next turn is written as usual.
func TestCombinerTurnPanics(t *testing.T) {
	_, js := testJS(t)
	ctx := context.Background()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "combine"})
	if err != nil {
		t.Fatal(err)
	}
	c := NewCombiner[counter, *increment]()
	waiting := func(n int) { waitQueued(c, "k", n) }
	// The first turn holds the key while two writes queue: they are the next turn, and
	// its write panics.
	entered, release := make(chan struct{}), make(chan struct{})
	first := counterTurn(ctx, kv, "k")
	apply := first.Apply
	first.Apply = func(v counter, rev uint64, ops []*increment) (counter, bool, error) {
		close(entered)
		<-release
		return apply(v, rev, ops)
	}
	panicking := counterTurn(ctx, kv, "k")
	panicking.Apply = func(counter, uint64, []*increment) (counter, bool, error) { panic("boom") }
	go func() { _ = c.Do(ctx, "k", &increment{}, first) }()
	<-entered
	panicked := make(chan any)
	go func() {
		defer func() { panicked <- recover() }()
		_ = c.Do(ctx, "k", &increment{}, panicking)
	}()
	waiting(1)
	queued := make(chan error)
	op := &increment{}
	go func() { queued <- c.Do(ctx, "k", op, counterTurn(ctx, kv, "k")) }()
	waiting(2)
	close(release)
	if p := <-panicked; p != "boom" {
		t.Fatalf("the writer's panic: %v", p)
	}
	if err := <-queued; !errors.Is(err, ErrTurnPanicked) {
		t.Fatalf("a write in the turn that panicked: %v, want ErrTurnPanicked", err)
	}
	next := &increment{}
	if err := c.Do(ctx, "k", next, counterTurn(ctx, kv, "k")); err != nil || next.err != nil || next.n != 2 {
		t.Fatalf("the next turn: %v %v, count %d, want 2", err, next.err, next.n)
	}
}

// A turn whose writes change nothing in what the turn before left known answers them
// from a fresh read: another process may have written the key since.
func TestCombinerUnchangedReadsAgain(t *testing.T) {
	_, js := testJS(t)
	ctx := context.Background()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "combine"})
	if err != nil {
		t.Fatal(err)
	}
	c := NewCombiner[counter, *increment]()
	first := counterTurn(ctx, kv, "k")
	write := first.Write
	entered, release := make(chan struct{}), make(chan struct{})
	first.Write = func(v counter, rev uint64) (uint64, error) {
		r, err := write(v, rev)
		close(entered)
		<-release
		// Another process writes after this turn's write: what this one knows is stale.
		if _, err := kv.Put(ctx, "k", []byte(`{"N":41}`)); err != nil {
			t.Error(err)
		}
		return r, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.Do(ctx, "k", &increment{}, first)
	}()
	<-entered
	read := &increment{}
	look := counterTurn(ctx, kv, "k")
	look.Apply = func(v counter, _ uint64, ops []*increment) (counter, bool, error) {
		for _, op := range ops {
			op.n = v.N
		}
		return v, false, nil
	}
	answered := make(chan error)
	go func() { answered <- c.Do(ctx, "k", read, look) }()
	waitQueued(c, "k", 1)
	close(release)
	<-done
	if err := <-answered; err != nil || read.n != 41 {
		t.Fatalf("an unchanging write saw %d (%v), want 41, the key as another process left it", read.n, err)
	}
}

// waitQueued returns once n writes wait for the turn of key.
func waitQueued[S, O any](c *Combiner[S, O], key string, n int) {
	for c.Waiting(key) != n {
		runtime.Gosched()
	}
}
