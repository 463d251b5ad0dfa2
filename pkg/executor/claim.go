package executor

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/claims"
	"github.com/toolbus/toolbus/pkg/messages"
)

// claimCall takes the call's id in the calls bucket ([Stage.Claims]) when running it
// twice could do harm or must be known: a call with side effects, an approved call (it
// runs once, whatever it is) and every redelivery (answered from a stored result, its
// attempts counted across deliveries). A read-only or idempotent call's first delivery
// is not claimed: two key-value writes fewer on the hot path. A claim that cannot be
// taken hands the call back.
func (s *Stage) claimCall(ctx context.Context, c *callState) verdict {
	c.safe = c.route.Info.ReadOnly || c.route.Info.Idempotent
	c.claimed = c.d.Delivered > 1 || !c.safe || c.approved
	if !c.claimed {
		return proceed()
	}
	c.digest = claims.Digest(c.call.Tool, c.call.Arguments)
	var err error
	if c.claim, err = s.Claims.Begin(ctx, c.call.ID, c.digest); err != nil {
		return handBack(bus.Retry(err, s.redeliveryDelay()))
	}
	return proceed()
}

// awaitRunning waits for a call whose claim looks abandoned but which this process is
// running still (a delivery handed back, or the call forwarded here again), rather than
// call it abandoned, and hands it back: its outcome is in the claim then, and the next
// delivery answers with it (or runs a released call again), as any redelivery does.
func (s *Stage) awaitRunning(ctx context.Context, c *callState) verdict {
	if c.claim.Abandoned == nil {
		return proceed()
	}
	running, ok := s.Exec.running.Load(c.call.ID)
	if !ok {
		return proceed()
	}
	select {
	case <-running.(chan struct{}):
	case <-ctx.Done():
		return handBack(bus.Retry(fmt.Errorf("call %s is still running here", c.call.ID), s.redeliveryDelay()))
	}
	return handBack(bus.Retry(fmt.Errorf("call %s was running here; its outcome is stored", c.call.ID), 50*time.Millisecond))
}

// answerStored answers a call its claim says was answered before (the ack or the
// publish was lost, or the response was sent again) with the stored result,
// de-duplicated by its message id; a claim whose call had another tool or arguments
// means its id answered another call (its response's id used again): refused.
func (s *Stage) answerStored(ctx context.Context, c *callState) verdict {
	switch {
	case c.claim.Result == nil:
		return proceed()
	case !claims.Same(c.claim.Digest, c.digest):
		res := messages.ResultFor(c.call).Fail(reusedID(c.call))
		s.Exec.recordCall(ctx, &c.call, &c.route, c.routeErr, &res, time.Now())
		s.logCall(ctx, slog.LevelWarn, &c.call, c.tool, c.route.Label(), &res)
		return reply(s.answer(c.call, res, false))
	}
	return reply(s.answer(c.call, *c.claim.Result, false))
}

// takeOver decides a call whose claim's executor stopped before it answered: a call
// safe to repeat is taken over and goes on (handed back when another replica took it
// first); one with side effects is handed back while that executor may be alive still
// (storing its result through a NATS outage), then answered outcome_unknown, never run
// again.
func (s *Stage) takeOver(ctx context.Context, c *callState) verdict {
	ab := c.claim.Abandoned
	switch {
	case ab == nil:
		return proceed()
	case c.safe:
		if err := s.Claims.TakeOver(ctx, c.call.ID, &c.claim); err != nil {
			// Another replica took it over; let JetStream sort out who answers.
			return handBack(bus.Retry(err, s.redeliveryDelay()))
		}
		return proceed()
	}
	if alive := s.Exec.Budget(c.call, c.route, ab.Started).Add(s.storeWait()); !c.d.Last && time.Now().Before(alive) {
		return handBack(bus.Retry(fmt.Errorf("call %s is claimed by %s since %s", c.call.ID, ab.Owner,
			ab.Started.Format(time.RFC3339)), s.redeliveryDelay()))
	}
	res := messages.ResultFor(c.call).Fail(messages.Errorf(messages.CodeOutcomeUnknown,
		"the call to %q was started by an executor that stopped before it finished (%s, started %s); "+
			"the tool may or may not have run, and it is not idempotent, so it was not run again: check its effect before calling it again",
		messages.EchoName(c.call.Tool), ab.Owner, ab.Started.Format(time.RFC3339)))
	res.Attempts = max(c.claim.PriorAttempts, 1)
	s.Exec.recordCall(ctx, &c.call, &c.route, c.routeErr, &res, ab.Started)
	return reply(s.finish(ctx, c, res, true, false))
}

// startBudget says when the call's time budget began: at its first attempt, which a
// claim carries from an earlier delivery, or now.
func (s *Stage) startBudget(_ context.Context, c *callState) verdict {
	c.first = c.claim.FirstAttempt
	if c.first.IsZero() {
		c.first = time.Now()
	}
	return proceed()
}

// reusedID is the refusal of a call whose id answered another call before: its
// response's id was used by an earlier response (sent again after the duplicate window,
// or under another message id) whose call at this index had another tool or arguments.
// Answering with the stored result would tell the model that its call ran; running it
// would make one id name two calls.
func reusedID(call messages.ToolCall) *messages.ToolError {
	return messages.Errorf(messages.CodeNotAllowed,
		"the call to %q was not run: its id %q (response %q, call %d) already answered another call, with other arguments or another tool — "+
			"a response id names one response; send the response again under a new id", messages.EchoName(call.Tool), call.ID, call.ResponseID, call.Index)
}
