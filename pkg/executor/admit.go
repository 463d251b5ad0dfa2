package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/toolbus/toolbus/pkg/bus"
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
// it again rather than run it uncounted. An error from the limits bucket hands the call
// back.
func (s *Stage) admit(ctx context.Context, call messages.ToolCall, route Route, tool string, d *bus.Delivery, span trace.Span) (out []bus.Outgoing, done bool, err error) {
	start := time.Now()
	p := s.Exec.Policy.Load()
	limits := s.Exec.Limits.Active() && d.Delivered <= 1
	if p == nil && !limits {
		return nil, false, nil
	}
	if rev := p.Revision(); rev != "" && span.IsRecording() {
		span.SetAttributes(telemetry.PolicyRevision.String(rev))
	}
	ref := route.ref()
	pc := policy.Call{Tool: route.Canonical(), Server: ref.Server, Name: ref.Tool, Args: call.Arguments,
		Conversation: call.Conversation, Tenant: messages.Tenant(call.Conversation)}
	var refusal *messages.ToolError
	limited := false
	if dec := p.Decide(pc); dec.Effect == policy.Deny {
		refusal = Denied(call.Tool, dec)
	} else if limits {
		var le *policy.LimitedError
		switch err := s.Exec.Limits.Take(ctx, pc); {
		case errors.As(err, &le):
			refusal, limited = le.ToolError(), true
		case err != nil:
			return nil, true, bus.Retry(fmt.Errorf("call %s: %w", call.ID, err), s.redeliveryDelay())
		}
	}
	if refusal == nil {
		return nil, false, nil
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
		return out, true, err
	}
	if _, err := s.Claims.Begin(ctx, call.ID); err != nil {
		return nil, true, bus.Retry(err, s.redeliveryDelay())
	}
	out, err = s.finish(ctx, call, res, true, false)
	return out, true, err
}
