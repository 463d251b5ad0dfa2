package executor

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/claims"
	"github.com/toolbus/toolbus/pkg/mcpwire"
	"github.com/toolbus/toolbus/pkg/telemetry"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// runCall runs the call on its route with retries ([Executor.ExecuteRoute]), its
// attempts counted on from earlier deliveries'. A claimed call is marked running in this
// process until its result is stored, so that a redelivery here waits for it.
func (s *Stage) runCall(ctx context.Context, c *callState) verdict {
	if c.claimed {
		c.running = make(chan struct{})
		s.Exec.running.Store(c.call.ID, c.running)
	}
	c.res, c.oc = s.Exec.ExecuteRoute(mcpwire.WithReport(ctx, &c.session), c.call, c.route, c.routeErr,
		Earlier{First: c.first, Attempts: c.claim.PriorAttempts, Sent: c.claim.PriorSent, Last: c.d.Last})
	if c.safe && c.claimed && c.d.Delivered > 1 && c.claim.PriorAttempts == 0 && c.routeErr == nil {
		// A read-only or idempotent call is not claimed on its first delivery, so a
		// delivery that ran it and was handed back after (its answer not published, its
		// ack lost, its executor stopped) left no record: the answer counts each as one
		// attempt (the retry bound counts only recorded ones).
		c.res.Attempts += c.d.Delivered - 1
	}
	return proceed()
}

// tellModel makes the result what the model reads: it says that the call ran in a new
// session when the conversation's previous one was lost, and its words are masked with
// the secrets of the server that wrote them (and the shared ones), not with every
// server's.
func (s *Stage) tellModel(_ context.Context, c *callState) verdict {
	res := &c.res
	notice := ""
	if c.route.Session != "" { // only a conversation's own session has anything to say
		notice = s.notice(c.route.Session, c.session, c.lease)
	}
	if notice == "" && res.Error == nil {
		return proceed()
	}
	mask := s.Exec.Redact.For(strings.TrimPrefix(c.route.Server, "mcp:"))
	if notice != "" {
		res.Notice = strings.TrimSuffix(mask.String(notice)+"; "+res.Notice, "; ")
	}
	if res.Error != nil {
		res.Error.Message = mask.String(res.Error.Message)
	}
	return proceed()
}

// markSpan writes the outcome on the call's span: a failure's status (as the model is
// told: Jaeger's error filter finds it), code and reason, as an event where an operator
// looks later; the server and the attempts.
func (s *Stage) markSpan(_ context.Context, c *callState) verdict {
	res := &c.res
	if res.Error != nil {
		c.span.SetStatus(codes.Error, string(res.Error.Code))
	}
	if !c.recording {
		return proceed()
	}
	c.span.SetAttributes(telemetry.Server.String(label(res.Backend)), telemetry.Attempt.Int(res.Attempts))
	if res.Error != nil {
		c.span.SetAttributes(telemetry.ErrorCode.String(string(res.Error.Code)))
		c.span.AddEvent("toolbus.call.failed", trace.WithAttributes(telemetry.ErrorCode.String(string(res.Error.Code)),
			telemetry.ErrorMessage.String(res.Error.Message)))
	}
	return proceed()
}

// retryLater hands back a failure that a later delivery tries again (transient, safe
// to repeat, its attempts and budget not used up, this not the last delivery), its
// claim released with what was tried: that delivery's answer is the call's outcome, and
// is what is logged (one line per call answered), this one only at debug level.
func (s *Stage) retryLater(ctx context.Context, c *callState) verdict {
	res := &c.res
	if res.Success || !c.oc.Retryable || c.d.Last {
		return proceed()
	}
	s.logCall(ctx, slog.LevelDebug, &c.call, c.tool, label(res.Backend), res)
	if err := s.Claims.Release(ctx, c.call.ID, claims.Progress{Attempts: res.Attempts, Sent: c.oc.Sent, First: c.first}); err != nil {
		s.logger().Warn("release claim", "call", c.call.ID, "err", err)
	}
	return handBack(bus.Retry(fmt.Errorf("call %s: %s", c.call.ID, res.Error.Message), s.redeliveryDelay()))
}

// fitResult makes a result too large to travel inline fit ([Stage.MaxInlineResultBytes]):
// stored whole in [Stage.Results], a preview passed on.
func (s *Stage) fitResult(ctx context.Context, c *callState) verdict {
	if !s.fits(&c.res) {
		c.res = s.fit(ctx, c.res)
	}
	return proceed()
}

// publish answers the call: its one log line (arguments and results never: they may
// hold secrets; a failure a warning with its code and masked reason), the metrics, the
// breaker told of a call it let through, the conversation's session recorded as opened,
// and a claimed call's result stored before it is published, with a dead-letter copy
// when its retries or deliveries ran out.
func (s *Stage) publish(ctx context.Context, c *callState) verdict {
	res := &c.res
	level := slog.LevelInfo
	if len(s.QuietTools) > 0 && s.quiet(c.call.Tool, c.route) { // no Route copied for none
		level = slog.LevelDebug
	}
	if res.Error != nil {
		level = slog.LevelWarn
	}
	s.logCall(ctx, level, &c.call, c.tool, label(res.Backend), res)
	if s.Owners != nil && c.route.Session != "" && (c.session.Opened || c.lease.Ended != "") {
		// Said in this answer: later calls of the conversation run in the session as usual.
		s.Owners.Opened(ctx, c.lease)
	}
	s.Exec.recordCall(ctx, &c.call, &c.route, c.routeErr, res, c.first) // once, answered
	s.Exec.Answered(*res, c.oc)
	return reply(s.finish(ctx, c, *res, c.claimed, !res.Success && (c.oc.Retryable || c.oc.Exhausted)))
}
