package order

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/bus"
)

// ErrAnswered: the response's output is stored already; what still comes for it (a
// redelivered result, a chunk after its end) has nothing left to do.
var ErrAnswered = errors.New("the response is answered already")

// Retry hands a delivery back after err, with delay, except ErrAnswered, which the
// stage reads as "nothing left to do": the parser and the formatter alike.
func Retry(err error, delay time.Duration) error {
	if errors.Is(err, ErrAnswered) {
		return err
	}
	return bus.Retry(err, delay)
}

// answeredMark is what a response's key (bus.Key of its scoped id: which of its calls
// the formatter has gathered) holds once its output is stored. The formatter's value
// reads the same field.
type answeredMark struct {
	Answered bool `json:"answered"`
	// Keys are the response's other keys, which Finish deletes after writing the mark
	// and Refinish deletes again when they are still there.
	Keys []string `json:"keys,omitempty"`
}

// Answered reports whether the output of response (by its scoped id) is stored: its
// key in the gather bucket holds the mark [Finish] leaves.
func Answered(ctx context.Context, kv jetstream.KeyValue, response string) (bool, error) {
	m, _, err := bus.GetJSON[answeredMark](ctx, kv, bus.Key(response))
	return m.Answered, err
}

// Finish is called once the output of response (by its scoped id) is stored: it
// replaces the response's key in the gather bucket (which of its calls are answered)
// with the answered mark, kept until the bucket's TTL so that whatever still comes for
// the response finds it answered, then deletes keys, the others the response left
// there (its results, [ResultKeys]; [StreamKeys] of a streamed response, the segments
// of an ordered one). The mark is written first: a delivery that finds the keys gone
// finds the mark.
func Finish(ctx context.Context, kv jetstream.KeyValue, response string, keys ...string) error {
	mark, _ := json.Marshal(answeredMark{Answered: true, Keys: keys})
	if _, err := kv.Put(ctx, bus.Key(response), mark); err != nil {
		return fmt.Errorf("%s/%s: %w", kv.Bucket(), bus.Key(response), err)
	}
	return deleteKeys(ctx, kv, keys)
}

// Created is called by a writer that has just created keys of response (by its scoped
// id) that [Finish] deletes: a delivery that started before the response's output was
// stored (a redelivery, or a message handled twice at once) may create them after
// Finish deleted them, and they would stay until the bucket's TTL. Finish writes the mark
// before it deletes; the writer reads the mark after it created. Either Finish's delete
// came after the create, and the key is gone, or the create came after the mark, and
// Created reads it: the response is answered, the keys are deleted again, and Created
// returns ErrAnswered.
func Created(ctx context.Context, kv jetstream.KeyValue, response string, keys ...string) error {
	answered, err := Answered(ctx, kv, response)
	if err != nil || !answered {
		return err
	}
	if err := deleteKeys(ctx, kv, keys); err != nil {
		return err
	}
	return ErrAnswered
}

// Refinish deletes again the keys an answered response's mark names that are still
// there: a delivery that wrote the mark may have died before it deleted them, and its
// redelivery finds the response answered. A response not answered is left alone.
func Refinish(ctx context.Context, kv jetstream.KeyValue, response string) error {
	m, _, err := bus.GetJSON[answeredMark](ctx, kv, bus.Key(response))
	if err != nil || !m.Answered {
		return err
	}
	// Deleted without reading them first: a read served by a replica behind could miss
	// a key that is still there.
	return deleteKeys(ctx, kv, m.Keys)
}

// deleteKeys deletes keys, several at a time: a wide response leaves a key per result,
// and the runner that calls Finish acknowledges nothing else meanwhile.
func deleteKeys(ctx context.Context, kv jetstream.KeyValue, keys []string) error {
	return eachKey(keys, func(k string) error { return deleteKey(ctx, kv, k) })
}

func deleteKey(ctx context.Context, kv jetstream.KeyValue, k string) error {
	if err := kv.Delete(ctx, k); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("%s/%s: %w", kv.Bucket(), k, err)
	}
	return nil
}

// eachKey runs f on every key, at most 16 at a time, and returns the first error.
func eachKey(keys []string, f func(string) error) error {
	if len(keys) <= 1 {
		for _, k := range keys {
			if err := f(k); err != nil {
				return err
			}
		}
		return nil
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		slots = make(chan struct{}, 16)
	)
	for _, k := range keys {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			if err := f(k); err != nil {
				mu.Lock()
				first = cmp.Or(first, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return first
}

// ResultKey is where the formatter keeps the result of call index of a response (by
// its scoped id) until the response's output is stored: one key per result, written
// once, so that gathering a result costs the same however many calls the response has.
func ResultKey(response string, index int) string {
	return bus.Key(response) + ".result." + strconv.Itoa(index)
}

// ResultKeys are the keys of the results of the calls 0 to n-1 of a response.
func ResultKeys(response string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = ResultKey(response, i)
	}
	return keys
}

// TextKey is where the parser keeps the text of a streamed response (by its scoped id)
// as its chunks are read.
func TextKey(response string) string { return bus.Key(response) + ".text" }

// StreamKeys are the keys of a streamed response (by its scoped id) besides its
// gathered results: its text and its state.
func StreamKeys(response string) []string { return []string{TextKey(response), StreamKey(response)} }
