package formatter

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/dialect"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/order"
	"github.com/toolbus/toolbus/pkg/results"
)

// Gatherer collects the results of responses of several calls.
type Gatherer interface {
	// Add records results of one response, each once (a result already held, a
	// redelivery, is not added again), and says what is answered of the response once
	// they are. It gives order.ErrAnswered once the response's output is stored.
	Add(ctx context.Context, rs ...messages.ToolResult) (Gathered, error)
	// Results returns the results of the calls 0 to n-1 of a response, in call order,
	// or order.ErrAnswered once its output is stored (with n 0, only that is read).
	Results(ctx context.Context, conversation, responseID string, n int) ([]messages.ToolResult, error)
	// Store keeps the result of a call of a streamed response, once (a result already
	// held, a redelivery, stands), without marking it answered: the response's stream
	// state says which calls are ([Streams]).
	Store(ctx context.Context, r messages.ToolResult) error
}

// Finisher is a [Gatherer] that also clears a response away once its output is stored:
// it marks the response answered, so that Add and Results give order.ErrAnswered for
// it from then on, and deletes the keys the response left (order.Finish).
type Finisher interface {
	Finish(ctx context.Context, response string, keys ...string) error
	// Refinish deletes the keys Finish was given that are still there (the delivery
	// that finished the response died before it deleted them).
	Refinish(ctx context.Context, response string) error
}

// Streams keeps the state of streamed responses ([order.StreamStore]).
type Streams interface {
	Update(ctx context.Context, response string, fn func(*order.Streamed) (bool, error)) (order.Streamed, error)
}

// Plans holds the segments of responses whose calls run in order (see package order),
// by the response's scoped id (messages.ScopedID).
type Plans interface {
	Load(ctx context.Context, response string, start int) (order.Segment, error)
}

// Stage is the formatter.
type Stage struct {
	// Gather collects the results of responses of several calls. When it is a
	// [Finisher] too ([KVGatherer] is), a response's keys are cleared away once its
	// output is stored.
	Gather Gatherer
	// Plans holds the later segments of responses whose calls run in order: the formatter
	// releases a segment once every call before it is answered.
	Plans Plans
	// RetryDelay is the delay of a result handed back because the gatherer failed.
	// Default 1s.
	RetryDelay time.Duration
	// MaxOutputBytes bounds an output message (the connection's payload limit, less a
	// margin for headers): the results of a response too large for it together are
	// stored whole in Results and travel as previews, shorter until the output fits.
	// Default 1 MB less 64 KiB.
	MaxOutputBytes int
	// Results keeps large results whole ([results.Store]); without it they are only cut
	// to previews (messages.CapResult).
	Results results.Fitter
	// Streams holds the state of streamed responses: the formatter marks each result
	// answered there and releases the calls that may run after it.
	Streams Streams
}

// Decode reads a result message; one nobody can place cannot complete any output.
func Decode(d *bus.Delivery) (messages.ToolResult, error) {
	var r messages.ToolResult
	if err := messages.DecodeResult(d.Data, &r); err != nil {
		return r, err
	}
	if r.ResponseID == "" || r.Count <= 0 && !r.Stream {
		return r, fmt.Errorf("a result without its response id or call count")
	}
	return r, nil
}

// Format takes one result and returns the response's output once every result of the
// response is in; or, when the result completes every call before the next segment of
// its response, that segment's calls; else nothing. A response of one call needs no
// gathering.
//
// Every delivery that finds the response complete returns the output again (a result
// redelivered because its ack was lost): the output's message id makes the second
// publish a no-op, and nothing is lost when the first publish failed. The same holds for
// a segment's calls.
//
// Once the output of a gathered response is stored, the response is marked answered
// and its keys are deleted ([Finisher]): a result that comes after that (redelivered
// when its ack was lost) finds the mark and produces nothing.
func (s *Stage) Format(ctx context.Context, r messages.ToolResult, d *bus.Delivery) ([]bus.Outgoing, error) {
	out, err := s.format(ctx, r, d)
	if errors.Is(err, order.ErrAnswered) {
		if d != nil && d.Delivered == 1 && !r.End {
			// A result's first delivery after its response's output: a response that
			// used the id of an answered one (the executor published the result once; a
			// second publish within the duplicate window is dropped). It is refused.
			return []bus.Outgoing{reusedID(r.ResponseID, r.Conversation)}, nil
		}
		// An earlier delivery that stored the output may have died between the mark
		// and the deletes: what is left is deleted now.
		if f, ok := s.Gather.(Finisher); ok && d != nil && d.Delivered > 1 {
			response := messages.ScopedID(r.Conversation, r.ResponseID)
			d.OnPublished(func(ctx context.Context) error { return f.Refinish(ctx, response) })
		}
		return nil, nil
	}
	return out, err
}

func (s *Stage) format(ctx context.Context, r messages.ToolResult, d *bus.Delivery) ([]bus.Outgoing, error) {
	if r.Stream {
		return s.streamed(ctx, r, d)
	}
	results := []messages.ToolResult{r}
	if r.Count > 1 {
		// Each result gets its share of the output: the output fits one message.
		r, err := s.fit(ctx, r, s.limit()/(r.Count+1))
		if err != nil {
			return nil, bus.Retry(err, s.retryDelay())
		}
		g, err := s.Gather.Add(ctx, r)
		if err != nil {
			return nil, order.Retry(err, s.retryDelay())
		}
		if g.Answered < r.Count && r.Next > 0 && g.Before(r.Next) {
			var calls []bus.Outgoing
			if g, calls, err = s.release(ctx, r, g); err != nil || calls != nil {
				return calls, err
			}
		}
		if g.Answered < r.Count {
			return nil, nil
		}
		// The result that answers the last call (or its redelivery) reads the
		// response's results, once.
		if results, err = s.Gather.Results(ctx, r.Conversation, r.ResponseID, r.Count); err != nil {
			return nil, order.Retry(err, behindDelay)
		}
		response := messages.ScopedID(r.Conversation, r.ResponseID)
		s.finish(d, response, finishKeys(response, results)...)
	}
	body, err := s.output(ctx, r.ResponseID, r.Conversation, results)
	if err != nil {
		return nil, bus.Retry(err, s.retryDelay())
	}
	return []bus.Outgoing{{Subject: messages.OutputSubject(r.Conversation), Meta: bus.Meta{
		ResponseID: r.ResponseID, Conversation: r.Conversation, MsgID: messages.ScopedID(r.Conversation, r.ResponseID),
	}, Body: body}}, nil
}

// reusedID is the output refusing a response that used the id of an answered one
// (messages.ReusedOutput), under the id's output message id.
func reusedID(responseID, conversation string) bus.Outgoing {
	out := messages.ReusedOutput(responseID, conversation)
	return bus.Outgoing{Subject: messages.OutputSubject(conversation), Meta: bus.Meta{
		ResponseID: responseID, Conversation: conversation, MsgID: messages.ScopedID(conversation, responseID),
	}, Body: messages.AppendOutput(nil, &out)}
}

// streamShare is the share of the output limit a result of a streamed response is fitted
// to before it is gathered: the count of calls is not known until the response ends.
const streamShare = 16

// progressBytes bounds the result a progress message carries.
const progressBytes = 4 << 10

// streamed takes a result of a streamed response, or its end: it gathers the result,
// marks it answered in the response's stream state, and returns the calls that may run
// now, the result as progress, and the output once the response ended and every call is
// answered.
func (s *Stage) streamed(ctx context.Context, r messages.ToolResult, d *bus.Delivery) ([]bus.Outgoing, error) {
	if s.Streams == nil {
		return nil, fmt.Errorf("result %s is of a streamed response, but the formatter keeps no stream state", r.CallID)
	}
	response := messages.ScopedID(r.Conversation, r.ResponseID)
	var out []bus.Outgoing
	by := order.ByEnd
	if r.End {
		// Answered already? Then the state below is gone, and must not be started again.
		if _, err := s.Gather.Results(ctx, r.Conversation, r.ResponseID, 0); err != nil {
			return nil, order.Retry(err, s.retryDelay())
		}
	} else {
		by = order.ByResult(r.Index)
		fitted, err := s.fit(ctx, r, s.limit()/streamShare)
		if err != nil {
			return nil, bus.Retry(err, s.retryDelay())
		}
		// Stored, not marked: the state below marks it answered. (A result stored for a
		// response answered before, which the state finds, is deleted by Refinish when
		// it comes again, or leaves with the bucket's TTL.)
		if err := s.Gather.Store(ctx, fitted); err != nil {
			return nil, order.Retry(err, s.retryDelay())
		}
		progress := messages.CapResult(fitted, progressBytes)
		out = append(out, bus.Outgoing{Subject: messages.ProgressSubject(r.Conversation), Meta: bus.Meta{
			ResponseID: r.ResponseID, Conversation: r.Conversation, MsgID: r.CallID + "/progress", Index: r.Index,
		}, Body: messages.AppendResult(nil, &progress)})
	}
	var released []messages.ToolCall
	answers := false // this message answers the response
	st, err := s.Streams.Update(ctx, response, func(st *order.Streamed) (bool, error) {
		changed := !r.End && st.Answer(r.Index, r.Success, r.Tool)
		var rel bool
		released, rel = st.Release(by)
		answers = false
		if st.Complete() {
			if st.Output == "" {
				st.Output, changed = by, true
			}
			answers = st.Output == by
		}
		return changed || rel, nil
	})
	if err != nil {
		return nil, order.Retry(err, s.retryDelay())
	}
	// A result comes only for a call its response's state holds, and the end only once
	// the state is final: a state without them was read from a replica of the bucket
	// that is behind (on a cluster), and deciding on it could leave the response
	// unanswered. Read again later.
	if r.End && !st.Final || !r.End && r.Index >= len(st.Calls) {
		return nil, bus.Retry(fmt.Errorf("response %s: its state was read before the %s that it must hold", response, by), 100*time.Millisecond)
	}
	for i := range released {
		c := &released[i]
		out = append(out, bus.Outgoing{Subject: messages.CallSubject(c.Conversation), Meta: bus.Meta{
			ResponseID: c.ResponseID, Conversation: c.Conversation, MsgID: c.ID, Index: c.Index,
		}, Body: messages.AppendCall(make([]byte, 0, 192+len(c.Arguments)), c)})
	}
	if !answers {
		// Not complete, or answered by the message that found it complete first (the
		// last result, or the end when every result came before it).
		return out, nil
	}
	// Every call is answered, so every result was gathered first: a result missing is
	// a read served by a replica behind.
	all, err := s.Gather.Results(ctx, r.Conversation, r.ResponseID, len(st.Calls))
	if err != nil {
		return nil, order.Retry(err, behindDelay)
	}
	keys := append(order.StreamKeys(response), order.ResultKeys(response, len(st.Calls))...)
	keys = append(keys, st.CallKeys(response)...)
	if st.End != nil {
		// The response ended without its last chunk: the output says why, after the
		// results of its calls.
		all = append(all, messages.ToolResult{ResponseID: r.ResponseID, Conversation: r.Conversation, Index: len(st.Calls), Stream: true}.Fail(
			&messages.ToolError{Code: st.End.Code, Message: st.End.Message}))
	}
	body, err := s.output(ctx, r.ResponseID, r.Conversation, all)
	if err != nil {
		return nil, bus.Retry(err, s.retryDelay())
	}
	s.finish(d, response, keys...)
	return append(out, bus.Outgoing{Subject: messages.OutputSubject(r.Conversation), Meta: bus.Meta{
		ResponseID: r.ResponseID, Conversation: r.Conversation, MsgID: response,
	}, Body: body}), nil
}

// finish clears response (by its scoped id) and keys away once the output d produces
// is stored, when the gatherer can ([Finisher]).
func (s *Stage) finish(d *bus.Delivery, response string, keys ...string) {
	f, ok := s.Gather.(Finisher)
	if !ok || d == nil {
		return
	}
	d.OnPublished(func(ctx context.Context) error { return f.Finish(ctx, response, keys...) })
}

// finishKeys are the keys a response (by its scoped id) whose results are all leaves
// besides its own: its results and segments.
func finishKeys(response string, all []messages.ToolResult) []string {
	return append(segmentKeys(response, all), order.ResultKeys(response, len(all))...)
}

// segmentKeys are the keys of the segments of the response (by its scoped id) whose
// results are all: each result names the start of the segment after its own (Next).
func segmentKeys(response string, all []messages.ToolResult) []string {
	var keys []string
	seen := map[int]bool{}
	for _, r := range all {
		if r.Next > 0 && !seen[r.Next] {
			if len(keys) == 0 {
				keys = append(keys, order.Key(response, 0))
			}
			seen[r.Next] = true
			keys = append(keys, order.Key(response, r.Next))
		}
	}
	return keys
}

// behindDelay is the delay of a delivery that read a response's results from a replica
// of the bucket that is behind.
const behindDelay = 50 * time.Millisecond

// release returns the calls of r's response's segment that starts at r.Next; g is what
// is answered of the response. Under the on_error "skip" policy, when a call before it
// failed, it instead answers every call left with skipped and returns what is answered
// then (every call).
func (s *Stage) release(ctx context.Context, r messages.ToolResult, g Gathered) (Gathered, []bus.Outgoing, error) {
	if s.Plans == nil {
		return g, nil, fmt.Errorf("result %s names a next segment (%d), but the formatter keeps no plans", r.CallID, r.Next)
	}
	response := messages.ScopedID(r.Conversation, r.ResponseID)
	seg, err := s.Plans.Load(ctx, response, r.Next)
	if err != nil {
		return g, nil, bus.Retry(err, s.retryDelay())
	}
	if g.Failed >= 0 && g.Failed < r.Next && seg.OnError == order.Skip {
		before, err := s.Gather.Results(ctx, r.Conversation, r.ResponseID, g.Failed+1)
		if err != nil {
			return g, nil, order.Retry(err, behindDelay)
		}
		skipped, err := s.skip(ctx, response, seg, &before[g.Failed])
		if err != nil {
			return g, nil, bus.Retry(err, s.retryDelay())
		}
		g, err := s.Gather.Add(ctx, skipped...)
		if err != nil {
			return g, nil, order.Retry(err, s.retryDelay())
		}
		return g, nil, nil
	}
	out := make([]bus.Outgoing, 0, len(seg.Calls))
	for i := range seg.Calls {
		c := &seg.Calls[i]
		out = append(out, bus.Outgoing{Subject: messages.CallSubject(c.Conversation), Meta: bus.Meta{
			ResponseID: c.ResponseID, Conversation: c.Conversation, MsgID: c.ID, Index: c.Index, Count: c.Count, Next: c.Next,
		}, Body: messages.AppendCall(make([]byte, 0, 192+len(c.Arguments)), c)})
	}
	return g, out, nil
}

// skip answers the calls of seg and of every segment after it with skipped; response is
// the response's scoped id.
func (s *Stage) skip(ctx context.Context, response string, seg order.Segment, failed *messages.ToolResult) ([]messages.ToolResult, error) {
	var skipped []messages.ToolResult
	for {
		for _, c := range seg.Calls {
			skipped = append(skipped, messages.ResultFor(c).Fail(messages.Errorf(messages.CodeSkipped,
				"not run: call %d (%s) of this response failed before it, and the configuration skips the calls after a failure", failed.Index, failed.Tool)))
		}
		next := seg.Calls[len(seg.Calls)-1].Next
		if next == 0 {
			return skipped, nil
		}
		var err error
		if seg, err = s.Plans.Load(ctx, response, next); err != nil {
			return nil, err
		}
	}
}

// output encodes the output of results. When it is over the limit, the results larger
// than an equal share of it are stored whole and travel as previews, and the share
// shrinks until the output fits: every response is answered, whatever its results weigh.
func (s *Stage) output(ctx context.Context, responseID, conversation string, results []messages.ToolResult) ([]byte, error) {
	limit := s.limit()
	share := limit / (len(results) + 1)
	for {
		o := messages.RenderOutput(responseID, conversation, results)
		native(&o, results)
		body := messages.AppendOutput(make([]byte, 0, len(o.Text)+128*len(results)+128), &o)
		if len(body) <= limit || share < 256 {
			return body, nil
		}
		fitted := make([]messages.ToolResult, len(results))
		for i, r := range results {
			var err error
			if fitted[i], err = s.fit(ctx, r, share); err != nil {
				return nil, err
			}
		}
		results, share = fitted, share/2
	}
}

// native adds to o the next turn in the API its calls asked for (their OutputFormat),
// if any: within the fitting of the output, so that it counts towards the output's
// size and its large results are the previews the text holds.
func native(o *messages.Output, results []messages.ToolResult) {
	format := ""
	answers := make([]messages.ToolResult, 0, len(results))
	for _, r := range results {
		if r.End || r.ModelID == "" {
			// No call's (a streamed response's end, the reason it ended early): the
			// text says it; the API has nothing to answer.
			continue
		}
		format = cmp.Or(format, r.OutputFormat)
		answers = append(answers, r)
	}
	if format == "" || len(answers) == 0 {
		return
	}
	slices.SortStableFunc(answers, func(a, b messages.ToolResult) int { return cmp.Compare(a.Index, b.Index) })
	turn, err := dialect.Turn(dialect.Dialect(format), answers)
	if err != nil {
		// The parser writes only the formats Turn knows: a bug, said in the output.
		turn, _ = json.Marshal(map[string]string{"error": err.Error()})
		turn = append(append([]byte{'['}, turn...), ']')
	}
	o.NativeFormat, o.Native = format, turn
}

// fit makes r fit max bytes: stored whole in Results when it is larger, or cut.
func (s *Stage) fit(ctx context.Context, r messages.ToolResult, max int) (messages.ToolResult, error) {
	if s.Results == nil {
		return messages.CapResult(r, max), nil
	}
	return s.Results.Fit(ctx, r, max)
}

func (s *Stage) limit() int { return cmp.Or(s.MaxOutputBytes, 1<<20-64<<10) }

func (s *Stage) retryDelay() time.Duration {
	if s.RetryDelay > 0 {
		return s.RetryDelay
	}
	return time.Second
}
