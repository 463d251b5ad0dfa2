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
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Denied is the error a model reads for calling name, which the policy's decision d
// refuses: not_allowed, naming the rule and its condition.
func Denied(name string, d policy.Decision) *messages.ToolError {
	return &messages.ToolError{Code: messages.CodeNotAllowed,
		Message: fmt.Sprintf("the call to %q is not allowed by the policy: %s", messages.EchoName(name), d.Reason())}
}

// admit is the policy's say on a routed call, before it is claimed: the rules on every
// delivery (a call never runs without the policy in force allowing it), the limits on
// its first (a call is counted once). A refused call is answered here (done): a denial
// as it is, a call over a limit stored in its claim too, so that a redelivery answers
// it again rather than run it uncounted. A call a rule asks a person to approve is
// parked (done, nothing published: see approval) until decided; approved reports a call
// that was, which is then claimed whatever its annotations, so that it runs once. An
// error from the limits or approvals bucket hands the call back. A call under a limit
// of calls at once takes its places on every delivery that runs it, and gives them back
// with release (nil when it took none) once answered; a redelivery that finds no place
// is handed back rather than refused.
func (s *Stage) admit(ctx context.Context, call messages.ToolCall, route Route, tool string, d *bus.Delivery, span trace.Span) (out []bus.Outgoing, done, approved bool, release func(context.Context), err error) {
	start := time.Now()
	p := s.Exec.Policy.Load()
	limits := s.Exec.Limits.Active() && d.Delivered <= 1
	concurrent := s.Exec.Limits.Concurrent()
	if p == nil && !limits && !concurrent {
		return nil, false, false, nil, nil
	}
	if rev := p.Revision(); rev != "" && span.IsRecording() {
		span.SetAttributes(telemetry.PolicyRevision.String(rev))
	}
	ref := route.ref()
	pc := policy.Call{Tool: route.Canonical(), Server: ref.Server, Name: ref.Tool, Args: call.Arguments,
		Conversation: call.Conversation, Tenant: messages.Tenant(call.Conversation)}
	var refusal *messages.ToolError
	limited := false
	switch dec := p.Decide(pc); dec.Effect {
	case policy.Deny:
		refusal = Denied(call.Tool, dec)
	case policy.Approve:
		var waiting bool
		if refusal, waiting, err = s.approval(ctx, call, route, dec, p.Revision(), d); err != nil {
			return nil, true, false, nil, bus.Retry(fmt.Errorf("call %s: approval: %w", call.ID, err), s.redeliveryDelay())
		}
		if waiting {
			if span.IsRecording() {
				span.AddEvent("toolbus.call.awaiting_approval", trace.WithAttributes(telemetry.PolicyRule.String(dec.Rule)))
			}
			s.logger().LogAttrs(ctx, slog.LevelInfo, "call waits for approval", slog.String("call", call.ID), slog.String("tool", tool),
				slog.String("rule", dec.Rule), slog.String("approval", policy.ApprovalID(call.ID)))
			return nil, true, false, nil, nil
		}
		approved = refusal == nil
	}
	if refusal == nil && limits {
		var le *policy.LimitedError
		switch err := s.Exec.Limits.Take(ctx, pc); {
		case errors.As(err, &le):
			refusal, limited = le.ToolError(), true
		case err != nil:
			return nil, true, false, nil, bus.Retry(fmt.Errorf("call %s: %w", call.ID, err), s.redeliveryDelay())
		}
	}
	if refusal == nil && concurrent {
		// Held at most as long as the call may take and its result be stored.
		hold := time.Until(s.Exec.Budget(call, route, time.Now())) + s.storeWait()
		var le *policy.LimitedError
		switch release, err = s.Exec.Limits.Acquire(ctx, pc, call.ID, hold); {
		case errors.As(err, &le) && d.Delivered > 1:
			// Tried before: it may have run in part, and is not refused for waiting.
			return nil, true, false, nil, bus.Retry(fmt.Errorf("call %s: %w", call.ID, err), s.redeliveryDelay())
		case errors.As(err, &le):
			refusal, limited = le.ToolError(), true
		case err != nil:
			return nil, true, false, nil, bus.Retry(fmt.Errorf("call %s: %w", call.ID, err), s.redeliveryDelay())
		}
	}
	if refusal == nil {
		return nil, false, approved, release, nil
	}
	refusal.Message = s.Exec.Redact.For(strings.TrimPrefix(route.Server, "mcp:")).String(refusal.Message)
	res := messages.ResultFor(call).Fail(refusal)
	span.SetStatus(codes.Error, string(refusal.Code))
	if span.IsRecording() {
		span.SetAttributes(telemetry.ErrorCode.String(string(refusal.Code)))
	}
	s.logCall(ctx, slog.LevelWarn, call, tool, route.Label(), res)
	s.Exec.RecordCall(ctx, call, route, nil, res, start)
	if !limited {
		out, err = s.answer(call, res, false)
		return out, true, false, nil, err
	}
	if _, err := s.Claims.Begin(ctx, call.ID, claims.Digest(call.Tool, call.Arguments)); err != nil {
		return nil, true, false, nil, bus.Retry(err, s.redeliveryDelay())
	}
	out, err = s.finish(ctx, call, res, true, false)
	return out, true, false, nil, err
}

// maxApprovalArguments bounds the arguments an approval request shows: a quarter of the
// payload limit, the record holding them besides the call itself. Arguments beyond it
// (rare: a response is at most 1 MiB) are shown cut, marked Truncated everywhere they are
// shown, and a decision still names the digest of the whole.
const maxApprovalArguments = 256 << 10

// approval is the say of a person on a call the rule of dec asks them to approve, kept
// in Exec.Approvals under the call's policy.ApprovalID: a call not asked about yet (or
// asked about under another policy revision, or with other arguments) is recorded as
// waiting and announced, and its delivery acked (waiting): it holds no worker while it
// waits, and its time budget has not begun. A decision sends the call again
// (policy.Approvals.Follow); then an approved call runs (refusal nil), a denied or
// expired one is refused not_allowed, saying who denied it and why.
func (s *Stage) approval(ctx context.Context, call messages.ToolCall, route Route, dec policy.Decision, revision string, d *bus.Delivery) (refusal *messages.ToolError, waiting bool, err error) {
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
		case rec.State == messages.ApprovalPending:
			if d.Delivered > 1 { // the delivery that asked may have stopped before it announced
				s.announce(ctx, rec.ApprovalRequest)
			}
			return nil, true, nil
		case rec.State == messages.ApprovalApproved:
			return nil, false, nil
		case rec.State == messages.ApprovalDenied:
			by := ""
			if rec.DecidedBy != "" {
				by = " by " + rec.DecidedBy
			}
			why := ""
			if rec.Reason != "" {
				why = ": " + rec.Reason
			}
			return messages.Errorf(messages.CodeNotAllowed, "the call to %q was denied%s (the rule %q asks a person to approve it)%s", name, by, rec.Rule, why), false, nil
		default:
			return messages.Errorf(messages.CodeNotAllowed, "the call to %q was not run: the rule %q asks a person to approve it, and %s", name, rec.Rule, rec.Reason), false, nil
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
		now := time.Now()
		ref := route.ref()
		req := messages.ApprovalRequest{ID: id, CallID: call.ID, Conversation: call.Conversation, ResponseID: call.ResponseID,
			Tool: route.Canonical(), Server: ref.Server, ArgumentsSHA256: hash, Rule: dec.Rule, When: dec.When,
			Revision: revision, RequestedAt: now, Deadline: now.Add(dec.Timeout)}
		req.Arguments, req.Truncated = s.shownArguments(route, call.Arguments)
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

// Offered returns the tools a model of tenant may be offered: the router's (the lists
// applied) less those the policy denies outright there (policy.Policy.Offers), whatever
// a call's arguments.
func (e *Executor) Offered(ctx context.Context, tenant string) []messages.ToolInfo {
	tools := e.Router.Tools(ctx)
	p := e.Policy.Load()
	if p == nil {
		return tools
	}
	out := tools[:0:0]
	for _, t := range tools {
		route, err := e.Router.Resolve(ctx, t.Name)
		if err != nil {
			out = append(out, t)
			continue
		}
		ref := route.ref()
		if p.Offers(route.Canonical(), ref.Server, ref.Tool, tenant) {
			out = append(out, t)
		}
	}
	return out
}
