package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/internal/bus"
	"github.com/toolbus/toolbus/pkg/messages"
)

// Options configures a [Service].
type Options struct {
	// Concurrency is the number of calls run at once by this replica. Default 16.
	Concurrency int
	// Heartbeat marks long calls in progress so they are not redelivered. Default 10s.
	Heartbeat time.Duration
	Logger    *slog.Logger
}

// Service runs the executor stage on a JetStream connection.
type Service struct {
	js   jetstream.JetStream
	exec *Executor
	opts Options
}

// New returns an executor service running calls with exec.
func New(js jetstream.JetStream, exec *Executor, opts *Options) *Service {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 16
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{js: js, exec: exec, opts: o}
}

// Run consumes calls until ctx is done.
func (s *Service) Run(ctx context.Context) error {
	c, err := s.js.Consumer(ctx, messages.StreamCalls, messages.ConsumerExecutor)
	if err != nil {
		return fmt.Errorf("executor: %w", err)
	}
	return bus.Consume(ctx, c, s.handle, bus.ConsumeOptions{
		Concurrency: s.opts.Concurrency, Heartbeat: s.opts.Heartbeat, Logger: s.opts.Logger,
	})
}

func (s *Service) handle(ctx context.Context, msg jetstream.Msg) error {
	meta := bus.MetaOf(msg)
	var call messages.ToolCall
	var res messages.ToolResult
	if err := json.Unmarshal(msg.Data(), &call); err != nil || call.ID == "" {
		// Answer from the headers, so the response is not left waiting.
		if meta.ResponseID == "" || meta.Count <= 0 {
			return fmt.Errorf("undecodable call without routing headers: %v", err)
		}
		call = messages.ToolCall{
			ID: messages.CallID(meta.ResponseID, meta.Index), ResponseID: meta.ResponseID,
			Conversation: meta.Conversation, Index: meta.Index, Count: meta.Count,
		}
		res = messages.ResultFor(call).Fail(messages.Errorf(messages.CodeInternal, "the call message could not be decoded: %v", err))
	} else {
		res = s.exec.Execute(ctx, call)
	}
	if md, err := msg.Metadata(); err == nil {
		res.Attempts = int(md.NumDelivered)
	}
	body, err := json.Marshal(res)
	if err != nil {
		return err
	}
	meta.ResponseID, meta.Conversation, meta.MsgID = call.ResponseID, call.Conversation, call.ID
	meta.Index, meta.Count = call.Index, call.Count
	if err := bus.Publish(ctx, s.js, messages.ResultSubject(call.Conversation), meta, body); err != nil {
		return bus.Retry(err, time.Second)
	}
	return nil
}
