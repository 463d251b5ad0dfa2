// Package order keeps the calls of one response in the order the model wrote them.
//
// A response's calls are cut into segments: a run of consecutive calls that are safe to
// run together (read-only ones, under the default policy) is one segment, and every other
// call is a segment of its own. A segment starts only when every call before it has been
// answered; the calls within one segment run concurrently. Each call carries the index of
// the first call of the next segment (messages.ToolCall.Next), and so does its result.
//
// The flow, across replicas and crashes:
//
//   - The parser splits the calls ([Split]). When there is more than one segment it saves
//     every segment after the first in the gather bucket ([Store.Save]), then the first,
//     with create-only semantics, and publishes the first segment's calls. A redelivered
//     response finds the saved plan and publishes that plan's first segment again (the
//     calls' message ids make the second publish a no-op), so a plan never changes once a
//     call of it may have run.
//   - The executors run calls as they always do; a result carries its call's Next.
//   - The formatter gathers results. When the result it gathers completes every call before
//     its Next, it loads that segment ([Store.Load]) and publishes its calls, before it acks
//     the result. A redelivered result publishes them again; their message ids (and the
//     executors' claims beyond the duplicate window) make that harmless.
//
// Nothing lives only in one process's memory: the plan is in the bucket and every step is
// driven by a message that is acked only after its successors are stored.
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

// Mode says which calls of a response may run together.
type Mode string

const (
	// Safe (the default): consecutive read-only calls run together, every other call runs
	// alone, after every call before it is answered.
	Safe Mode = "safe"
	// Ordered: every call runs alone, one at a time, in order.
	Ordered Mode = "ordered"
	// All: every call of a response runs at once.
	All Mode = "all"
)

// ParseMode reads a mode; "" is [Safe].
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case "", Safe:
		return Safe, nil
	case Ordered, All:
		return Mode(s), nil
	}
	return "", fmt.Errorf("parallel %q: use \"safe\", \"ordered\" or \"all\"", s)
}

// OnError says what happens to the calls after one that failed.
type OnError string

const (
	// Continue (the default): they run; the model asked for them.
	Continue OnError = "continue"
	// Skip: they are answered with code skipped, naming the call that failed.
	Skip OnError = "skip"
)

// ParseOnError reads an on_error setting; "" is [Continue].
func ParseOnError(s string) (OnError, error) {
	switch OnError(s) {
	case "", Continue:
		return Continue, nil
	case Skip:
		return Skip, nil
	}
	return "", fmt.Errorf("on_error %q: use \"continue\" or \"skip\"", s)
}

// Split cuts calls into segments, in place: it sets each call's Next and returns the
// index of the first call of every segment (the first is 0). together reports whether a
// call may run alongside its neighbours that may too.
func Split(calls []messages.ToolCall, together func(c *messages.ToolCall) bool) []int {
	if len(calls) == 0 {
		return nil
	}
	starts := []int{0}
	run := together(&calls[0])
	for i := 1; i < len(calls); i++ {
		t := together(&calls[i])
		if !(run && t) {
			starts = append(starts, i)
		}
		run = t
	}
	for s, start := range starts {
		next := 0
		if s+1 < len(starts) {
			next = starts[s+1]
		}
		end := len(calls)
		if next != 0 {
			end = next
		}
		for i := start; i < end; i++ {
			calls[i].Next = next
		}
	}
	return starts
}

// Segment is the calls of one segment, as the bucket keeps them.
type Segment struct {
	Calls []messages.ToolCall `json:"calls"`
	// OnError is the response's policy for the calls after a failed one.
	OnError OnError `json:"on_error,omitempty"`
}

// Segments groups calls by the starts [Split] returned.
func Segments(calls []messages.ToolCall, starts []int, onError OnError) []Segment {
	segs := make([]Segment, len(starts))
	for i, start := range starts {
		end := len(calls)
		if i+1 < len(starts) {
			end = starts[i+1]
		}
		segs[i] = Segment{Calls: calls[start:end:end], OnError: onError}
	}
	return segs
}

// Store keeps the segments of responses in a key-value bucket (the gather bucket: a plan
// lives as long as the results gathered for it).
type Store struct{ KV jetstream.KeyValue }

// Key is where the segment starting at call start of a response (by its scoped id,
// messages.ScopedID) is kept. Response keys never hold a '.', so segment keys never
// collide with the gathered results' keys.
func Key(response string, start int) string {
	return bus.Key(response) + ".segment." + strconv.Itoa(start)
}

// Save stores the segments of a response (by its scoped id, messages.ScopedID) and
// returns the first one as stored: segs[0], or the first segment of a plan saved before
// for the same response (by an earlier delivery), which then stands. A plan saved for a
// response answered meanwhile (its output stored, and its plan deleted, before a
// redelivery of it came) is deleted again: ErrAnswered ([Created]).
func (s Store) Save(ctx context.Context, response string, segs []Segment) (Segment, error) {
	if len(segs) == 0 {
		return Segment{}, errors.New("order: no segment to save")
	}
	first := Key(response, 0)
	if saved, rev, err := bus.GetJSON[Segment](ctx, s.KV, first); err != nil || rev != 0 {
		return saved, err
	}
	for _, seg := range segs[1:] {
		if err := s.put(ctx, Key(response, seg.Calls[0].Index), seg, false); err != nil {
			return Segment{}, err
		}
	}
	err := s.put(ctx, first, segs[0], true)
	if errors.Is(err, jetstream.ErrKeyExists) { // another delivery saved its plan first
		saved, _, err := bus.GetJSON[Segment](ctx, s.KV, first)
		return saved, err
	}
	if err == nil {
		keys := make([]string, len(segs))
		for i, seg := range segs {
			keys[i] = Key(response, seg.Calls[0].Index)
		}
		err = Created(ctx, s.KV, response, keys...)
	}
	return segs[0], err
}

func (s Store) put(ctx context.Context, key string, seg Segment, create bool) error {
	body, err := json.Marshal(seg)
	if err != nil {
		return err
	}
	if create {
		_, err = s.KV.Create(ctx, key, body)
	} else {
		_, err = s.KV.Put(ctx, key, body)
	}
	if err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("%s/%s: %w", s.KV.Bucket(), key, err)
	}
	return err
}

// Load reads the segment of the response (by its scoped id) that starts at call start.
func (s Store) Load(ctx context.Context, response string, start int) (Segment, error) {
	seg, rev, err := bus.GetJSON[Segment](ctx, s.KV, Key(response, start))
	if err == nil && rev == 0 {
		err = fmt.Errorf("order: segment %d of response %q is not in %s (expired?)", start, response, s.KV.Bucket())
	}
	return seg, err
}

// Policy is the configuration of ordering: executor.parallel, each server's parallel and
// executor.on_error.
type Policy struct {
	// Parallel applies to every tool whose server has no mode of its own. "" is [Safe].
	Parallel Mode
	// Servers are the modes of single servers, by configured name.
	Servers map[string]Mode
	OnError OnError
}

// Mode is the mode of the tools of server.
func (p *Policy) Mode(server string) Mode {
	if m, ok := p.Servers[server]; ok && m != "" {
		return m
	}
	if p.Parallel == "" {
		return Safe
	}
	return p.Parallel
}

// Unordered reports whether every call runs at once whatever its tool: no segments.
func (p *Policy) Unordered() bool {
	if p.Mode("") != All {
		return false
	}
	for _, m := range p.Servers {
		if m != All {
			return false
		}
	}
	return true
}
