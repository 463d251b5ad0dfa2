package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/claims"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/policy"
	"github.com/toolbus/toolbus/pkg/telemetry"
	"go.opentelemetry.io/otel/trace"
)

// awaitApproval has a person's say on a call a rule of the policy asks them to approve
// ([Stage.ask]): a call not decided yet is parked — answered with nothing, its delivery
// acked, nothing claimed — until a decision sends it again; an approved call goes on,
// to be claimed whatever its annotations, so that it runs once; a denied or expired one
// is refused not_allowed. An error from the approvals bucket hands the call back.
func (s *Stage) awaitApproval(ctx context.Context, c *callState) verdict {
	if !c.admit || c.decision.Effect != policy.Approve {
		return proceed()
	}
	refusal, waiting, err := s.ask(ctx, c.call, c.route, c.decision, c.policy.Revision(), c.d)
	switch {
	case err != nil:
		return handBack(bus.Retry(fmt.Errorf("call %s: approval: %w", c.call.ID, err), s.redeliveryDelay()))
	case waiting:
		if c.recording {
			c.span.AddEvent("toolbus.call.awaiting_approval", trace.WithAttributes(telemetry.PolicyRule.String(c.decision.Rule)))
		}
		s.logger().LogAttrs(ctx, slog.LevelInfo, "call waits for approval", slog.String("call", c.call.ID), slog.String("tool", c.tool),
			slog.String("rule", c.decision.Rule), slog.String("approval", policy.ApprovalID(c.call.ID)))
		return reply(nil, nil)
	case refusal != nil:
		return s.refuse(ctx, c, refusal, false)
	}
	c.approved = true
	return proceed()
}

// maxApprovalArguments bounds the arguments an approval request shows: a quarter of the
// payload limit, the record holding them besides the call itself. Arguments beyond it
// (rare: a response is at most 1 MiB) are shown cut, marked Truncated everywhere they are
// shown, and a decision still names the digest of the whole.
const maxApprovalArguments = 256 << 10

// ask is the say of a person on a call the rule of dec asks them to approve, kept
// in Exec.Approvals under the call's policy.ApprovalID: a call not asked about yet (or
// asked about under another policy revision, or with other arguments) is recorded as
// waiting and announced, and its delivery acked (waiting): it holds no worker while it
// waits, and its time budget has not begun. A decision sends the call again
// (policy.Approvals.Follow); then an approved call runs (refusal nil), a denied or
// expired one is refused not_allowed, saying who denied it and why.
func (s *Stage) ask(ctx context.Context, call messages.ToolCall, route Route, dec policy.Decision, revision string, d *bus.Delivery) (refusal *messages.ToolError, waiting bool, err error) {
	name := messages.EchoName(call.Tool)
	a := s.Exec.Approvals
	if a == nil {
		return messages.Errorf(messages.CodeNotAllowed, "the call to %q needs a person's approval (the rule %q), and this executor has no approvals bucket to ask in", name, dec.Rule), false, nil
	}
	id := policy.ApprovalID(call.ID)
	hash := policy.ArgumentsHash(call.Arguments)
	for range 5 {
		rec, rev, err := a.Get(ctx, id)
		switch {
		case errors.Is(err, policy.ErrNoApproval):
			rev = 0
		case err != nil:
			return nil, false, err
		case rec.Revision != revision || rec.ArgumentsSHA256 != hash:
			// Decided (or asked) under another policy, or for other arguments: ask again.
		default:
			refusal, waiting := s.decided(ctx, call, rec, d)
			return refusal, waiting, nil
		}
		// A call whose id was answered before (its response sent again) is not asked
		// about: the claim answers it with its result, or refuses it if the id answered
		// another call; nothing runs either way.
		res, was, err := s.Claims.Stored(ctx, call.ID)
		switch {
		case err != nil:
			return nil, false, err
		case res != nil && !claims.Same(was, claims.Digest(call.Tool, call.Arguments)):
			return reusedID(call), false, nil
		case res != nil:
			return nil, false, nil
		}
		req := s.request(call, route, dec, revision, hash)
		err = a.Ask(ctx, messages.Approval{ApprovalRequest: req, Call: call}, rev)
		switch {
		case errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch):
			continue // another delivery asked, a person decided, or the record was marked sent again: read it again
		case err != nil:
			return nil, false, err
		}
		s.announce(ctx, req)
		return nil, true, nil
	}
	return nil, false, fmt.Errorf("approval %s kept changing", id)
}

// decided is what the approval record rec, asked for this call's arguments under the
// policy in force, says: still pending (waiting; announced again on a redelivery, as
// the delivery that asked may have stopped before it announced), approved (no
// refusal), or refused, saying who denied it and why, or why it was not run.
func (s *Stage) decided(ctx context.Context, call messages.ToolCall, rec messages.Approval, d *bus.Delivery) (refusal *messages.ToolError, waiting bool) {
	name := messages.EchoName(call.Tool)
	switch rec.State {
	case messages.ApprovalPending:
		if d.Delivered > 1 {
			s.announce(ctx, rec.ApprovalRequest)
		}
		return nil, true
	case messages.ApprovalApproved:
		return nil, false
	case messages.ApprovalDenied:
		by := ""
		if rec.DecidedBy != "" {
			by = " by " + rec.DecidedBy
		}
		why := ""
		if rec.Reason != "" {
			why = ": " + rec.Reason
		}
		return messages.Errorf(messages.CodeNotAllowed, "the call to %q was denied%s (the rule %q asks a person to approve it)%s", name, by, rec.Rule, why), false
	}
	return messages.Errorf(messages.CodeNotAllowed, "the call to %q was not run: the rule %q asks a person to approve it, and %s", name, rec.Rule, rec.Reason), false
}

// request is the approval request of a call the rule of dec asks a person to approve,
// under the policy's revision, for the arguments whose digest is hash.
func (s *Stage) request(call messages.ToolCall, route Route, dec policy.Decision, revision, hash string) messages.ApprovalRequest {
	now := time.Now()
	ref := route.ref()
	req := messages.ApprovalRequest{ID: policy.ApprovalID(call.ID), CallID: call.ID, Conversation: call.Conversation, ResponseID: call.ResponseID,
		Tool: route.Canonical(), Server: ref.Server, ArgumentsSHA256: hash, Rule: dec.Rule, When: dec.When,
		Revision: revision, RequestedAt: now, Deadline: now.Add(dec.Timeout)}
	req.Arguments, req.Truncated = s.shownArguments(route, call.Arguments)
	return req
}

// shownArguments are a call's arguments as a person deciding sees them: every
// configured secret masked, cut to maxApprovalArguments (then a JSON string).
func (s *Stage) shownArguments(route Route, args json.RawMessage) (json.RawMessage, bool) {
	text := s.Exec.Redact.For(strings.TrimPrefix(route.Server, "mcp:")).String(string(args))
	if len(text) <= maxApprovalArguments && json.Valid([]byte(text)) {
		return json.RawMessage(text), false
	}
	cut := len(text) > maxApprovalArguments
	if cut {
		text = strings.ToValidUTF8(text[:maxApprovalArguments], "")
	}
	b, _ := json.Marshal(text)
	return b, cut
}

// announce tells whoever watches the conversation's approvals that a call waits.
func (s *Stage) announce(ctx context.Context, req messages.ApprovalRequest) {
	if s.Exec.Announce != nil {
		s.Exec.Announce(ctx, req)
	}
}
