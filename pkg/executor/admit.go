package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/claims"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/policy"
	"github.com/toolbus/toolbus/pkg/telemetry"
	"go.opentelemetry.io/otel/codes"
)

// Denied is the error a model reads for calling name, which the policy's decision d
// refuses: not_allowed, naming the rule and its condition.
func Denied(name string, d policy.Decision) *messages.ToolError {
	return &messages.ToolError{Code: messages.CodeNotAllowed,
		Message: fmt.Sprintf("the call to %q is not allowed by the policy: %s", messages.EchoName(name), d.Reason())}
}

// checkPolicy asks the rules in force ([Executor.Policy]) of a routed call, once
// routed and before it is claimed, on every delivery: a call never runs without the
// policy in force allowing it. A denial is answered not_allowed, naming the rule, with
// nothing claimed; a rule that asks a person leaves the call to awaitApproval.
func (s *Stage) checkPolicy(ctx context.Context, c *callState) verdict {
	if !c.admit {
		return proceed()
	}
	p := s.Exec.Policy.Load()
	if c.policy = p; p == nil {
		return proceed()
	}
	if rev := p.Revision(); rev != "" && c.recording {
		c.span.SetAttributes(telemetry.PolicyRevision.String(rev))
	}
	if c.decision = p.Decide(c.policyCall()); c.decision.Effect == policy.Deny {
		return s.refuse(ctx, c, Denied(c.call.Tool, c.decision), false)
	}
	return proceed()
}

// countLimits counts an allowed call against the configured limits ([Executor.Limits])
// on its first delivery only: a call is counted once. One over a limit is answered
// rate_limited. An error from the limits bucket hands the call back.
func (s *Stage) countLimits(ctx context.Context, c *callState) verdict {
	if !c.admit || c.d.Delivered > 1 || !s.Exec.Limits.Active() {
		return proceed()
	}
	var le *policy.LimitedError
	switch err := s.Exec.Limits.Take(ctx, c.policyCall()); {
	case errors.As(err, &le):
		return s.refuse(ctx, c, le.ToolError(), true)
	case err != nil:
		return handBack(bus.Retry(fmt.Errorf("call %s: %w", c.call.ID, err), s.redeliveryDelay()))
	}
	return proceed()
}

// takePlaces takes the call's places under the limits of calls at once, on every
// delivery that runs it, held at most as long as the call may take and its result be
// stored, and given back once it is answered ([callState.end]). A first delivery that
// finds no place is answered rate_limited; a redelivery is handed back instead (tried
// before, it may have run in part, and is not refused for waiting).
func (s *Stage) takePlaces(ctx context.Context, c *callState) verdict {
	if !c.admit || !s.Exec.Limits.Concurrent() {
		return proceed()
	}
	hold := time.Until(s.Exec.Budget(c.call, c.route, time.Now())) + s.storeWait()
	var le *policy.LimitedError
	release, err := s.Exec.Limits.Acquire(ctx, c.policyCall(), c.call.ID, hold)
	switch {
	case errors.As(err, &le) && c.d.Delivered > 1:
		return handBack(bus.Retry(fmt.Errorf("call %s: %w", c.call.ID, err), s.redeliveryDelay()))
	case errors.As(err, &le):
		return s.refuse(ctx, c, le.ToolError(), true)
	case err != nil:
		return handBack(bus.Retry(fmt.Errorf("call %s: %w", c.call.ID, err), s.redeliveryDelay()))
	}
	c.release = release
	return proceed()
}

// refuse answers a call its admission refused, with nothing run: the reason masked with
// its server's secrets, its span and log line a failure's, counted in the metrics. A
// call over a limit (limited) has its answer stored in its claim too, so that a
// redelivery answers it again rather than run it uncounted.
func (s *Stage) refuse(ctx context.Context, c *callState, refusal *messages.ToolError, limited bool) verdict {
	refusal.Message = s.Exec.Redact.For(strings.TrimPrefix(c.route.Server, "mcp:")).String(refusal.Message)
	res := messages.ResultFor(c.call).Fail(refusal)
	c.span.SetStatus(codes.Error, string(refusal.Code))
	if c.recording {
		c.span.SetAttributes(telemetry.ErrorCode.String(string(refusal.Code)))
	}
	s.logCall(ctx, slog.LevelWarn, &c.call, c.tool, c.route.Label(), &res)
	s.Exec.recordCall(ctx, &c.call, &c.route, nil, &res, c.admitted)
	if !limited {
		return reply(s.answer(c.call, res, false))
	}
	c.digest = claims.Digest(c.call.Tool, c.call.Arguments)
	if _, err := s.Claims.Begin(ctx, c.call.ID, c.digest); err != nil {
		return handBack(bus.Retry(err, s.redeliveryDelay()))
	}
	return reply(s.finish(ctx, c, res, true, false))
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
