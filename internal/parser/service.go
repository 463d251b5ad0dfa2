package parser

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/internal/bus"
	"github.com/toolbus/toolbus/internal/telemetry"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolcall"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Options configures a [Service].
type Options struct {
	// Concurrency is the number of responses parsed at once. Default 16.
	Concurrency int
	// Extract configures extraction and repair: the format pin and the limits. Known tools
	// and schemas come from Catalog.
	Extract *toolcall.Options
	// Catalog, when set, names the tools and their input schemas; see [Catalog.Follow].
	Catalog *Catalog
	// Routed are tool names the configuration routes to a server explicitly: their
	// arguments are checked by that server, whatever other backends call a tool so.
	Routed []string
	Tracer trace.Tracer
	// Middleware wraps the stage's handler (see bus.ConsumeOptions).
	Middleware func(bus.Handler) bus.Handler
	// Metrics, when set, counts and times the stage's messages.
	Metrics *telemetry.Metrics
	Logger  *slog.Logger
}

// Service runs the parser stage on a JetStream connection.
type Service struct {
	js   jetstream.JetStream
	opts Options
}

// New returns a parser on js. The streams must be provisioned.
func New(js jetstream.JetStream, opts *Options) *Service {
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
	return &Service{js: js, opts: o}
}

// Run consumes responses until ctx is done.
func (s *Service) Run(ctx context.Context) error {
	c, err := s.js.Consumer(ctx, messages.StreamResponses, messages.ConsumerParser)
	if err != nil {
		return fmt.Errorf("parser: %w", err)
	}
	return bus.Consume(ctx, c, s.handle, bus.ConsumeOptions{Concurrency: s.opts.Concurrency, SpanName: "parse", Tracer: s.opts.Tracer, Middleware: s.opts.Middleware, Metrics: s.opts.Metrics, Logger: s.opts.Logger})
}

// ResponseID returns the id of a response message: the response id header, else its
// Nats-Msg-Id, else one derived from its stream sequence (stable across redeliveries).
func ResponseID(msg jetstream.Msg) string {
	m := bus.MetaOf(msg)
	if m.ResponseID != "" {
		return m.ResponseID
	}
	if m.MsgID != "" {
		return m.MsgID
	}
	if md, err := msg.Metadata(); err == nil {
		return m.Conversation + "-" + strconv.FormatUint(md.Sequence.Stream, 10)
	}
	return m.Conversation + "-unknown"
}

func (s *Service) handle(ctx context.Context, msg jetstream.Msg) error {
	meta := bus.MetaOf(msg)
	meta.ResponseID = ResponseID(msg)
	var deadline time.Time
	if d := msg.Headers().Get(messages.HeaderDeadline); d != "" {
		deadline, _ = time.Parse(time.RFC3339Nano, d)
	}
	opts := s.extractOptions(msg.Headers().Get(messages.HeaderFormat))
	w := Plan(meta.ResponseID, meta.Conversation, string(msg.Data()), deadline, &opts.Options)
	w = CheckArguments(w, opts.checks)
	trace.SpanFromContext(ctx).SetAttributes(telemetry.ResponseID.String(meta.ResponseID),
		attribute.Int("toolbus.calls", len(w.Calls)))

	if w.Output != nil {
		meta.MsgID = meta.ResponseID
		return s.publish(ctx, messages.OutputSubject(meta.Conversation), meta, w.Output)
	}
	out, err := callMessages(meta, w)
	if err != nil {
		return err
	}
	// The message ids make the repeated publishes of a retry no-ops.
	if err := bus.PublishBatch(ctx, s.js, out); err != nil {
		return bus.Retry(err, time.Second)
	}
	return nil
}

// callMessages encodes a response's calls as the messages to the executors, one each,
// de-duplicated by the call's id.
func callMessages(meta bus.Meta, w Work) ([]bus.Outgoing, error) {
	out := make([]bus.Outgoing, 0, len(w.Calls))
	subject := messages.CallSubject(meta.Conversation)
	for _, c := range w.Calls {
		body, err := json.Marshal(c)
		if err != nil {
			return nil, err
		}
		m := meta
		m.MsgID, m.Index, m.Count = c.ID, c.Index, c.Count
		out = append(out, bus.Outgoing{Subject: subject, Meta: m, Body: body})
	}
	return out, nil
}

// publish sends v; a failure hands the response back, and the message ids make the
// repeated publishes of a retry no-ops.
func (s *Service) publish(ctx context.Context, subject string, m bus.Meta, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := bus.Publish(ctx, s.js, subject, m, body); err != nil {
		return bus.Retry(err, time.Second)
	}
	return nil
}

type extractOptions struct {
	toolcall.Options
	checks map[string]*jsonschema.Resolved
}

// extractOptions are the configured options with the catalog's tools and a response's
// format pin.
func (s *Service) extractOptions(format string) extractOptions {
	var o extractOptions
	if s.opts.Extract != nil {
		o.Options = *s.opts.Extract
	}
	if s.opts.Catalog != nil {
		snap := s.opts.Catalog.current()
		o.KnownTools, o.Schemas, o.checks = snap.known, snap.schemas, snap.checks
		if len(s.opts.Routed) > 0 {
			checks := make(map[string]*jsonschema.Resolved, len(o.checks))
			for name, r := range o.checks {
				if !slices.Contains(s.opts.Routed, name) {
					checks[name] = r
				}
			}
			o.checks = checks
		}
	}
	if format != "" {
		if f, err := toolcall.ParseFormat(format); err == nil {
			o.Format = f
		}
	}
	return o
}
