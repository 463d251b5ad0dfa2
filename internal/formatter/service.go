package formatter

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/internal/bus"
	"github.com/toolbus/toolbus/internal/telemetry"
	"github.com/toolbus/toolbus/pkg/messages"
	"go.opentelemetry.io/otel/trace"
)

// Options configures a [Service].
type Options struct {
	// Concurrency is the number of results handled at once. Default 16.
	Concurrency int
	Tracer      trace.Tracer
	// Middleware wraps the stage's handler (see bus.ConsumeOptions).
	Middleware func(bus.Handler) bus.Handler
	// Metrics, when set, counts and times the stage's messages.
	Metrics *telemetry.Metrics
	Logger  *slog.Logger
}

// Service runs the formatter stage on a JetStream connection. Results of responses with
// several calls are gathered in the gather bucket; a response of one call is answered
// directly.
type Service struct {
	js     jetstream.JetStream
	store  gatherStore
	opts   Options
	logger *slog.Logger
}

// New returns a formatter on js. The streams and buckets must be provisioned.
func New(ctx context.Context, js jetstream.JetStream, opts *Options) (*Service, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 16
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	kv, err := js.KeyValue(ctx, messages.BucketGather)
	if err != nil {
		return nil, fmt.Errorf("formatter: gather bucket: %w", err)
	}
	return &Service{js: js, store: gatherStore{kv: kv}, opts: o, logger: o.Logger}, nil
}

// Run consumes results until ctx is done.
func (s *Service) Run(ctx context.Context) error {
	c, err := s.js.Consumer(ctx, messages.StreamResults, messages.ConsumerFormatter)
	if err != nil {
		return fmt.Errorf("formatter: %w", err)
	}
	return bus.Consume(ctx, c, s.handle, bus.ConsumeOptions{Concurrency: s.opts.Concurrency, SpanName: "format", Tracer: s.opts.Tracer, Middleware: s.opts.Middleware, Metrics: s.opts.Metrics, Logger: s.logger})
}

func (s *Service) handle(ctx context.Context, msg jetstream.Msg) error {
	var r messages.ToolResult
	if err := messages.DecodeResult(msg.Data(), &r); err != nil || r.ResponseID == "" || r.Count <= 0 {
		// A result nobody can place: it cannot complete any output.
		return fmt.Errorf("undecodable result on %s: %v", msg.Subject(), err)
	}
	// A response of one call needs no gathering: its output is published straight away,
	// and the output's Nats-Msg-Id makes a redelivered result's second publish a no-op.
	results := []messages.ToolResult{r}
	gathered := r.Count > 1
	if gathered {
		g, err := s.store.Add(ctx, r)
		if err != nil {
			return bus.Retry(err, time.Second)
		}
		if !g.complete() {
			return nil
		}
		results = g.Results
	}
	body, err := outputBody(r.ResponseID, r.Conversation, results)
	if err != nil {
		return err
	}
	meta := bus.MetaOf(msg)
	meta.MsgID, meta.Index, meta.Count = r.ResponseID, 0, 0
	if err := bus.Publish(ctx, s.js, messages.OutputSubject(r.Conversation), meta, body); err != nil {
		return bus.Retry(err, time.Second)
	}
	if !gathered {
		return nil
	}
	if err := s.store.MarkDone(ctx, r.ResponseID); err != nil {
		// The output is out; a redelivery would only publish it again, de-duplicated.
		s.logger.Warn("gather mark done failed", "response", r.ResponseID, "err", err)
	}
	return nil
}

// outputBody is the encoded output of a response's results.
func outputBody(responseID, conversation string, results []messages.ToolResult) ([]byte, error) {
	return json.Marshal(Render(responseID, conversation, results))
}
