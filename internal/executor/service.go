package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"github.com/toolbus/toolbus/internal/bus"
	"github.com/toolbus/toolbus/internal/telemetry"
	"github.com/toolbus/toolbus/pkg/messages"
	"go.opentelemetry.io/otel/trace"
)

// Options configures a [Service].
type Options struct {
	// Concurrency is the number of calls run at once by this replica. Default 16.
	Concurrency int
	// Heartbeat marks long calls in progress so they are not redelivered. Default: a
	// third of the consumer's AckWait.
	Heartbeat time.Duration
	// RedeliveryDelay is how long a call handed back after a transient failure waits
	// before another delivery. Default 2s.
	RedeliveryDelay time.Duration
	// Owner names this replica in call claims. Default: a unique id.
	Owner string
	// QuietTools are logged at debug level instead of info (tools polled often).
	QuietTools []string
	Tracer     trace.Tracer
	// Middleware wraps the stage's handler (see bus.ConsumeOptions).
	Middleware func(bus.Handler) bus.Handler
	// Metrics, when set, counts and times the stage's messages.
	Metrics *telemetry.Metrics
	Logger  *slog.Logger
}

// Service runs the executor stage on a JetStream connection.
//
// Per call: claim its id in the calls bucket, run it (or answer from the stored result
// when a redelivery finds one), store the result, publish it with Nats-Msg-Id = call id,
// acknowledge. A transient failure that is safe to repeat is handed back to JetStream
// with a delay until the consumer's MaxDeliver; the last delivery publishes the error
// and copies the call to the dead-letter stream.
type Service struct {
	js     jetstream.JetStream
	exec   *Executor
	claims Claims
	opts   Options
}

// New returns an executor service running calls with exec.
func New(ctx context.Context, js jetstream.JetStream, exec *Executor, opts *Options) (*Service, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 16
	}
	if o.RedeliveryDelay <= 0 {
		o.RedeliveryDelay = 2 * time.Second
	}
	if o.Owner == "" {
		o.Owner = "executor-" + nuid.Next()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	kv, err := js.KeyValue(ctx, messages.BucketCalls)
	if err != nil {
		return nil, fmt.Errorf("executor: calls bucket: %w", err)
	}
	return &Service{js: js, exec: exec, claims: Claims{KV: kv, Owner: o.Owner}, opts: o}, nil
}

// Run consumes calls until ctx is done.
func (s *Service) Run(ctx context.Context) error {
	c, err := s.js.Consumer(ctx, messages.StreamCalls, messages.ConsumerExecutor)
	if err != nil {
		return fmt.Errorf("executor: %w", err)
	}
	cfg := c.CachedInfo().Config
	heartbeat := s.opts.Heartbeat
	if heartbeat <= 0 {
		heartbeat = max(cfg.AckWait/3, 100*time.Millisecond)
	}
	return bus.Consume(ctx, c, func(ctx context.Context, msg jetstream.Msg) error {
		return s.handle(ctx, msg, cfg.MaxDeliver)
	}, bus.ConsumeOptions{Concurrency: s.opts.Concurrency, Heartbeat: heartbeat, SpanName: "execute", Tracer: s.opts.Tracer, Middleware: s.opts.Middleware, Metrics: s.opts.Metrics, Logger: s.opts.Logger})
}

func (s *Service) handle(ctx context.Context, msg jetstream.Msg, maxDeliver int) error {
	meta := bus.MetaOf(msg)
	delivered := 1
	if md, err := msg.Metadata(); err == nil {
		delivered = int(md.NumDelivered)
	}
	lastDelivery := maxDeliver > 0 && delivered >= maxDeliver

	var call messages.ToolCall
	if err := messages.DecodeCall(msg.Data(), &call); err != nil || call.ID == "" {
		// Answer from the headers, so the response is not left waiting.
		if meta.ResponseID == "" || meta.Count <= 0 {
			return fmt.Errorf("undecodable call without routing headers: %v", err)
		}
		call = messages.ToolCall{
			ID: messages.CallID(meta.ResponseID, meta.Index), ResponseID: meta.ResponseID,
			Conversation: meta.Conversation, Index: meta.Index, Count: meta.Count,
		}
		return s.finish(ctx, meta, call, messages.ResultFor(call).Fail(
			messages.Errorf(messages.CodeInternal, "the call message could not be decoded: %v", err)), true, false)
	}

	span := trace.SpanFromContext(ctx)
	span.SetName("execute " + call.Tool)
	span.SetAttributes(telemetry.Tool.String(call.Tool))
	if call.Error != nil {
		// The parser's verdict: answer it, run nothing.
		span.SetAttributes(telemetry.ErrorCode.String(string(call.Error.Code)))
		res := messages.ResultFor(call)
		res.Error = call.Error
		s.exec.Metrics.Call(ctx, call.Tool, "parser", string(call.Error.Code), 0)
		return s.publish(ctx, meta, call, res)
	}

	// A read-only or idempotent call does no harm when run twice, so its first delivery
	// skips the claim: two key-value writes fewer on the hot path. Redeliveries claim, to
	// answer from a stored result and to count attempts across deliveries.
	backend, info, routeErr := s.exec.Router.Resolve(call.Tool)
	claimed := delivered > 1 || !(info.ReadOnly || info.Idempotent)
	var claim Claim
	if claimed {
		var err error
		if claim, err = s.claims.Begin(ctx, call.ID); err != nil {
			return bus.Retry(err, s.opts.RedeliveryDelay)
		}
	}
	switch {
	case claim.Result != nil:
		// Done before (the ack or the publish was lost): answer again, de-duplicated.
		return s.publish(ctx, meta, call, *claim.Result)
	case claim.Abandoned != nil:
		if !info.ReadOnly && !info.Idempotent {
			res := messages.ResultFor(call).Fail(messages.Errorf(messages.CodeOutcomeUnknown,
				"the call to %q was started by an executor that stopped before it finished (%s, started %s); "+
					"the tool may or may not have run, and it is not idempotent, so it was not run again: check its effect before calling it again",
				call.Tool, claim.Abandoned.Owner, claim.Abandoned.Started.Format(time.RFC3339)))
			res.Attempts = delivered
			return s.finish(ctx, meta, call, res, true, false)
		}
		if err := s.claims.TakeOver(ctx, call.ID, &claim); err != nil {
			// Another replica took it over; let JetStream sort out who answers.
			return bus.Retry(err, s.opts.RedeliveryDelay)
		}
	}

	res, oc := s.exec.ExecuteResolved(ctx, call, backend, info, routeErr)
	res.Attempts += claim.PriorAttempts
	span.SetAttributes(telemetry.Server.String(res.Backend), telemetry.Attempt.Int(res.Attempts))
	outcome := "ok"
	if res.Error != nil {
		outcome = string(res.Error.Code)
		span.SetAttributes(telemetry.ErrorCode.String(outcome))
	}
	// Arguments and results are never logged: they may hold secrets.
	level := slog.LevelInfo
	if slices.Contains(s.opts.QuietTools, call.Tool) {
		level = slog.LevelDebug
	}
	s.opts.Logger.Log(ctx, level, "call", "call", call.ID, "tool", call.Tool, "server", res.Backend,
		"outcome", outcome, "attempts", res.Attempts, "ms", res.DurationMS)
	if !res.Success && oc.Retryable && !lastDelivery {
		if err := s.claims.Release(ctx, call.ID, res.Attempts); err != nil {
			s.opts.Logger.Warn("release claim", "call", call.ID, "err", err)
		}
		return bus.Retry(fmt.Errorf("call %s: %s", call.ID, res.Error.Message), s.opts.RedeliveryDelay)
	}
	return s.finish(ctx, meta, call, res, claimed, !res.Success && oc.Retryable)
}

// finish stores the result of a claimed call, copies exhausted calls to the dead-letter
// stream and publishes the result.
func (s *Service) finish(ctx context.Context, meta bus.Meta, call messages.ToolCall, res messages.ToolResult, claimed, exhausted bool) error {
	if claimed {
		if err := s.claims.Finish(ctx, call.ID, res); err != nil {
			return bus.Retry(err, s.opts.RedeliveryDelay)
		}
	}
	if exhausted {
		dead := struct {
			Call   messages.ToolCall   `json:"call"`
			Result messages.ToolResult `json:"result"`
		}{call, res}
		body, _ := json.Marshal(dead)
		m := meta
		m.MsgID = call.ID
		if err := bus.Publish(ctx, s.js, messages.DeadSubject(call.Conversation), m, body); err != nil {
			s.opts.Logger.Warn("dead-letter copy failed", "call", call.ID, "err", err)
		}
	}
	return s.publish(ctx, meta, call, res)
}

func (s *Service) publish(ctx context.Context, meta bus.Meta, call messages.ToolCall, res messages.ToolResult) error {
	body, err := json.Marshal(res)
	if err != nil {
		return err
	}
	meta.ResponseID, meta.Conversation, meta.MsgID = call.ResponseID, call.Conversation, call.ID
	meta.Index, meta.Count = call.Index, call.Count
	if err := bus.Publish(ctx, s.js, messages.ResultSubject(call.Conversation), meta, body); err != nil {
		return bus.Retry(err, s.opts.RedeliveryDelay)
	}
	return nil
}
