package parser

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/catalog"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/order"
	"github.com/toolbus/toolbus/pkg/telemetry"
	"github.com/toolbus/toolbus/pkg/toolcall"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Stage is the parser.
type Stage struct {
	// Extract configures extraction and repair: the format pin and the limits. Known tools
	// and schemas come from Catalog.
	Extract *toolcall.Options
	// Catalog, when set, names the tools and their input schemas; see [Catalog.Follow].
	Catalog *Catalog
	// Routed are tool names the configuration routes to a server explicitly: their
	// arguments are checked by that server, whatever other backends call a tool so.
	Routed []string
	// Order decides which calls of a response run together (see package order); Plans
	// keeps the later segments of a response for the formatter. Without Plans every call
	// of a response runs at once.
	Order order.Policy
	Plans Planner
	// Texts and Streams keep streamed responses (see [Stage.Chunk]): the text read so
	// far and which calls were released.
	Texts   Texts
	Streams Streams
	// held is how many calls the state of each streamed response held when this process
	// last wrote or read it ([Stage.settle]).
	held heldCalls
	// StreamIdle is how long a streamed response may go without a chunk before it is
	// answered as it stands (default DefaultStreamIdle, negative never); MaxChunks
	// bounds its chunks (default DefaultMaxChunks, negative no bound).
	StreamIdle time.Duration
	MaxChunks  int
	// Serves reports whether the deployment serves a conversation's tenant
	// (bus.Topology.Serves); nil serves every one. A response of another tenant has
	// no stream to answer into: it is dead-lettered.
	Serves func(conversation string) bool
	// Tracer records a streamed response's span, once it ended (its chunks have no
	// span each); nil means the global tracer provider.
	Tracer trace.Tracer
	// Offers, when set, reports whether a tool of the catalog is offered to a tenant's
	// models (the policy does not deny it outright there: policy.Policy.Offers). A tool
	// that is not is unknown to the parser for that tenant's responses — no bare call of
	// it recognised, no arguments checked — and its calls go to the executor, which
	// refuses them.
	Offers func(t catalog.Tool, tenant string) bool
	// OutputFormat is the hosted API whose native next turn every output carries
	// (toolcall.APIFormats; "" none), TenantOutputFormats a tenant's own; a response's
	// Toolbus-Output-Format header overrides both. The parser writes it on each call,
	// and the formatter renders it (pkg/dialect's Turn).
	OutputFormat        string
	TenantOutputFormats map[string]string
}

// outputFormat is the output format of a response of tenant whose header asks for
// asked: the header's when it names an API, else the tenant's, else the
// configuration's.
func (s *Stage) outputFormat(asked, tenant string) string {
	if f, err := toolcall.ParseOutputFormat(strings.TrimSpace(asked)); err == nil && f != "" {
		return string(f)
	}
	if f := s.TenantOutputFormats[tenant]; f != "" {
		return f
	}
	return s.OutputFormat
}

// WithOutputFormat sets the output format on every call of w.
func WithOutputFormat(w Work, format string) Work {
	if format == "" {
		return w
	}
	for i := range w.Calls {
		w.Calls[i].OutputFormat = format
	}
	return w
}

// check returns why a response or chunk on conversation cannot be answered at all, or
// nil.
func (s *Stage) check(conversation string) error {
	if err := messages.ValidateConversation(conversation); err != nil {
		return err
	}
	if s.Serves != nil && !s.Serves(conversation) {
		return fmt.Errorf("conversation %q: this deployment serves no tenant %q (tenants in the configuration)", conversation, messages.Tenant(conversation))
	}
	return nil
}

// Planner saves a response's segments and returns the first as stored ([order.Store]).
type Planner interface {
	Save(ctx context.Context, response string, segs []order.Segment) (order.Segment, error)
}

// ResponseID returns the id of a response message: the response id header, else its
// Nats-Msg-Id, else one derived from its stream sequence (stable across redeliveries).
func ResponseID(d *bus.Delivery) string { return d.Meta.ResponseIDAt(d.Sequence) }

// Parse takes one response and returns its calls, one message each to the executors
// (de-duplicated by the call's id), or the no_tool_call output of a response without
// a call.
func (s *Stage) Parse(ctx context.Context, d *bus.Delivery) ([]bus.Outgoing, error) {
	meta := d.Meta
	if err := s.check(meta.Conversation); err != nil {
		// No subject can be made of it to answer on: dead-lettered at once.
		return nil, fmt.Errorf("response on %s: %w", d.Subject, err)
	}
	meta.ResponseID = ResponseID(d)
	if meta.Spoofed != "" {
		// The subject is the authority: answer there, and run nothing.
		meta.MsgID = messages.ScopedID(meta.Conversation, meta.ResponseID)
		out := messages.RefusedOutput(meta.ResponseID, meta.Conversation, messages.Errorf(messages.CodeNotAllowed,
			"the response was published on conversation %q's subject, but its %s header names %q; its tool calls were not run",
			meta.Conversation, messages.HeaderConversation, meta.Spoofed))
		return []bus.Outgoing{{Subject: messages.OutputSubject(meta.Conversation), Meta: meta, Body: messages.AppendOutput(nil, &out)}}, nil
	}
	var deadline time.Time
	if v := d.Header.Get(messages.HeaderDeadline); v != "" {
		deadline, _ = time.Parse(time.RFC3339Nano, v)
	}
	opts := s.extractOptions(d.Header.Get(messages.HeaderFormat), d.Header.Get(messages.HeaderReasoning), messages.Tenant(meta.Conversation))
	w := Plan(meta.ResponseID, meta.Conversation, string(d.Data), deadline, &opts.Options)
	w = CheckArguments(w, opts.checks)
	w = WithOutputFormat(w, s.outputFormat(d.Header.Get(messages.HeaderOutputFormat), messages.Tenant(meta.Conversation)))
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(telemetry.ResponseID.String(meta.ResponseID), attribute.Int("toolbus.calls", len(w.Calls)))
	}

	if w.Output != nil {
		meta.MsgID = messages.ScopedID(meta.Conversation, meta.ResponseID)
		return []bus.Outgoing{{Subject: messages.OutputSubject(meta.Conversation), Meta: meta, Body: messages.AppendOutput(nil, w.Output)}}, nil
	}
	calls := w.Calls
	if s.Plans != nil && !s.Order.Unordered() {
		snap := s.snapshot()
		if starts := order.Split(calls, func(c *messages.ToolCall) bool { return s.together(snap, c) }); len(starts) > 1 {
			first, err := s.Plans.Save(ctx, messages.ScopedID(meta.Conversation, meta.ResponseID), order.Segments(calls, starts, s.Order.OnError))
			switch {
			case errors.Is(err, order.ErrAnswered) && d.Delivered == 1:
				// A response that uses the id of one answered before: refused, run not.
				return []bus.Outgoing{reused(meta)}, nil
			case errors.Is(err, order.ErrAnswered):
				// A redelivery of a response answered since: nothing left to do.
				return nil, nil
			case err != nil:
				return nil, bus.Retry(err, time.Second)
			}
			calls = first.Calls
			trace.SpanFromContext(ctx).SetAttributes(attribute.Int("toolbus.segments", len(starts)))
		}
	}
	out := make([]bus.Outgoing, 0, len(calls))
	subject := messages.CallSubject(meta.Conversation)
	for i := range calls {
		c := &calls[i]
		m := meta
		m.MsgID, m.Index, m.Count, m.Next = c.ID, c.Index, c.Count, c.Next
		out = append(out, bus.Outgoing{Subject: subject, Meta: m, Body: messages.AppendCall(make([]byte, 0, 192+len(c.Arguments)), c)})
	}
	return out, nil
}

// reused is the output refusing a response that uses the id of a response answered
// before (messages.ReusedOutput), under the id's output message id.
func reused(meta bus.Meta) bus.Outgoing {
	meta.MsgID = messages.ScopedID(meta.Conversation, meta.ResponseID)
	out := messages.ReusedOutput(meta.ResponseID, meta.Conversation)
	return bus.Outgoing{Subject: messages.OutputSubject(meta.Conversation), Meta: meta, Body: messages.AppendOutput(nil, &out)}
}

// together reports whether c may run alongside its neighbours: a call answered with the
// parser's error runs nothing; otherwise its server's mode decides, and under the safe
// mode, whether the tool's annotations make the call read-only. A tool the catalog does not know runs alone.
func (s *Stage) together(snap *snapshot, c *messages.ToolCall) bool {
	if c.Error != nil {
		return true
	}
	t, ok := snap.tool(c.Tool)
	if !ok {
		return s.Order.Mode("") == order.All
	}
	switch s.Order.Mode(t.Server) {
	case order.All:
		return true
	case order.Ordered:
		return false
	}
	return t.ReadOnly || t.ReadOnlyWhen.Holds(c.Arguments)
}

// Preview reads one response as Parse does, with the catalog it holds now and format
// as the response's format pin ("" for none), and returns the extraction and the calls
// Parse would send: arguments with their schema's defaults, or the error each is
// answered with. It publishes nothing (`toolbus parse --config`).
func (s *Stage) Preview(text, format string) (toolcall.Extraction, Work) {
	opts := s.extractOptions(format, "", "")
	ext := toolcall.Extract(text, &opts.Options)
	w := planOf(ext, "preview", "preview", time.Time{})
	return ext, CheckArguments(w, opts.checks)
}

func (s *Stage) snapshot() *snapshot {
	if s.Catalog == nil {
		return &snapshot{}
	}
	return s.Catalog.current()
}

type extractOptions struct {
	toolcall.Options
	checks map[string]*jsonschema.Resolved
}

// extractOptions are the configured options with the catalog's tools offered to tenant
// and a response's format pin and reasoning mode (headers; a value that names none is
// ignored).
func (s *Stage) extractOptions(format, reasoning, tenant string) extractOptions {
	var o extractOptions
	if s.Extract != nil {
		o.Options = *s.Extract
	}
	if s.Catalog != nil {
		snap := s.Catalog.current()
		if s.Offers != nil {
			snap = snap.offered(tenant, s.Offers)
		}
		o.KnownTools, o.Schemas, o.checks = snap.known, snap.schemas, snap.checks
		if len(s.Routed) > 0 {
			checks := make(map[string]*jsonschema.Resolved, len(o.checks))
			for name, r := range o.checks {
				if !slices.Contains(s.Routed, name) {
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
	if reasoning != "" {
		if r, err := toolcall.ParseReasoning(reasoning); err == nil {
			o.Reasoning = r
		}
	}
	return o
}
