package parser

import (
	"context"
	"fmt"
	"time"

	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/order"
)

// Responses records which message first used each response id of a conversation, and
// marks answered the responses the parser answers itself ([order.Store] does, in the
// gather bucket, in the response's key).
type Responses interface {
	// Claim records o as the message that uses the id of response (by its scoped id)
	// unless another did first, and returns what the id's key says ([order.Claim]).
	Claim(ctx context.Context, response string, o order.Origin) (order.Use, error)
	// Answered marks response answered, its origin o kept, once its output is stored
	// ([order.FinishFrom]).
	Answered(ctx context.Context, response string, o order.Origin) error
}

// responses is where the parser records response ids: Responses, else Plans when it
// keeps them too (order.Store does); nil records nothing.
func (s *Stage) responses() Responses {
	if s.Responses != nil {
		return s.Responses
	}
	r, _ := s.Plans.(Responses)
	return r
}

// claim records d, whose origin is o, as the message that uses the id of response (by
// its scoped id), and decides what a message that finds the id used by another does.
// With done false the message is the response its id names — the first to use it, or
// a redelivery of that one (the same stream sequence), before its output or after —
// and is handled as it always was; use is what the id's key said. With done true, out
// and err are the delivery's answer:
//
//   - the id was used by another message whose response is answered: nothing is run,
//     and out is an output refusing this one, saying why (not_allowed). It goes where
//     the orchestrator waits for the id's output — the same subject and message id as
//     the earlier output — so that the orchestrator that sent it again is answered.
//     Within JetStream's duplicate window after the earlier output that message id is
//     a duplicate and would be dropped: the refusal is handed back until the window
//     (DuplicateWindow) has passed.
//   - the id is used by another message whose response is not answered yet: its
//     output, when it comes, is that response's and carries the id's message id, so a
//     refusal output would take its place. Nothing is run, and err rejects this
//     message: the runner files it in the dead-letter stream and tells its sender on
//     toolbus.rejected.<tenant>, with the reason.
//
// Refusing, rather than running the message as a response of its own, is what its
// sender can rely on: every output, progress message and stored result is named by the
// response id and its calls' ids, de-duplicated and gathered by them. A second response
// of the same id would have its calls taken for the first's (each call id is claimed
// once, its result stored once: the executor answers it with the earlier call's
// result, having asked for approval again), and its output gathered into a response
// that is answered already, which produces nothing: the orchestrator would wait for
// ever. An id is the response's; a new response needs a new one.
//
// A key that records no origin (written before origins were recorded, or the mark of
// a streamed response that ended by its idle timeout before its chunk 1 came) cannot
// tell: an answered response's id used by a message on its first delivery is refused
// (a redelivery of the first message after its output is what it was before: its
// output's message id makes a refusal a duplicate within the window); on a later
// delivery, and for a response not answered, the message is handled as it always was.
func (s *Stage) claim(ctx context.Context, d *bus.Delivery, meta bus.Meta, response string, o order.Origin) (use order.Use, out []bus.Outgoing, done bool, err error) {
	r := s.responses()
	if r == nil {
		return order.Use{Origin: o}, nil, false, nil
	}
	use, err = r.Claim(ctx, response, o)
	if err != nil {
		return use, nil, true, bus.Retry(err, time.Second)
	}
	switch {
	case use.Origin.Same(o):
		return use, nil, false, nil
	case !use.Origin.Recorded() && (!use.Answered || d.Delivered > 1):
		return use, nil, false, nil
	case !use.Answered:
		return use, nil, true, fmt.Errorf("response id %q of conversation %q is in use: %s is not answered yet, and the output this id gets is that response's. "+
			"This response (%s) was not run: a response needs an id of its own — send it again with a new %s",
			meta.ResponseID, meta.Conversation, first(use), what(o), messages.HeaderResponseID)
	}
	if hold := s.refusalHold(use); hold > 0 && !d.Last {
		return use, nil, true, bus.Retry(fmt.Errorf("response id %q was answered at %s, and this response (%s) uses it again: its refusal waits %v "+
			"for the duplicate window after that output to pass, within which its message id would be dropped as a duplicate",
			meta.ResponseID, stamp(use.AnsweredAt), what(o), hold.Round(time.Millisecond)), hold)
	}
	m := meta
	m.MsgID = response
	answered := ""
	if !use.AnsweredAt.IsZero() {
		answered = " at " + stamp(use.AnsweredAt)
	}
	refusal := messages.RefusedOutput(meta.ResponseID, meta.Conversation, messages.Errorf(messages.CodeNotAllowed,
		"response id %q was answered already: %s was answered%s. This response (%s) uses the id again and was not run: "+
			"a response needs an id of its own — send it again with a new %s. The earlier output stays on %s, message id %q",
		meta.ResponseID, first(use), answered, what(o), messages.HeaderResponseID, messages.OutputSubject(meta.Conversation), response))
	return use, []bus.Outgoing{{Subject: messages.OutputSubject(meta.Conversation), Meta: m, Body: messages.AppendOutput(nil, &refusal)}}, true, nil
}

// refusalHold is how long the refusal of a message reusing the id of the response
// use describes waits: until DuplicateWindow after its output (when known).
func (s *Stage) refusalHold(use order.Use) time.Duration {
	if s.DuplicateWindow <= 0 || use.AnsweredAt.IsZero() {
		return 0
	}
	return time.Until(use.AnsweredAt.Add(s.DuplicateWindow))
}

// first names the response that first used the id of use, as far as its key knows.
func first(use order.Use) string {
	if !use.Origin.Recorded() {
		return "the response that first used it"
	}
	return fmt.Sprintf("the response that first used it (%s, read at %s)", what(use.Origin), stamp(use.Origin.At))
}

// stamp writes t as the refusals do: UTC, to the millisecond.
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// what names the message of origin o.
func what(o order.Origin) string {
	if o.Chunk {
		return fmt.Sprintf("chunk 1 of a streamed response, stream sequence %d", o.Seq)
	}
	return fmt.Sprintf("stream sequence %d", o.Seq)
}

// answered marks response (by its scoped id), whose output d publishes, answered once
// that output is stored, its origin o kept: a message that uses its id again is then
// refused rather than taken for a response in flight.
func (s *Stage) answered(d *bus.Delivery, response string, o order.Origin) {
	if r := s.responses(); r != nil {
		d.OnPublished(func(ctx context.Context) error { return r.Answered(ctx, response, o) })
	}
}
