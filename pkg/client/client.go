// Package client is the Go client for orchestrators: publish a model's response to
// toolbus and wait for its output.
//
//	c, err := client.New(nc)
//	...
//	out, err := c.Ask(ctx, "conv-1", modelText, nil)
//	// feed out.Text back to the model
//
// A response may also be streamed as the model writes it ([Client.Stream]): each call
// then runs as soon as its block is complete, and Close returns the same output.
//
// A result's images, audio and embedded blobs (an MCP tool's) come in
// [messages.OutputResult].Content, named in their place in Text; [Client.FetchContent]
// returns their bytes for a model that takes them. A server's questions and its
// requests for a model's completion in the middle of a call are answered with
// [Client.OnElicit] and [Client.OnSample]; what servers report and log of a call under
// way comes to [Client.OnCallProgress] and [Client.OnCallLog].
//
// The package's examples run it whole, with toolbus on an embedded NATS.
package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/results"
	"github.com/toolbus/toolbus/pkg/telemetry"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Client submits responses and receives outputs over one NATS connection. It is safe
// for concurrent use; concurrent Asks in one conversation share one subscription.
type Client struct {
	nc *nats.Conn
	js jetstream.JetStream

	mu      sync.Mutex
	subs    map[string]*nats.Subscription // conversation → output subscription
	waiters map[string]chan []byte        // response id → its output
	users   map[string]int                // conversation → Asks in flight
	served  sync.Map                      // tenant → its output stream was found
}

// check returns an error for a conversation no output can answer: an invalid id, or a
// tenant's conversation where the tenant's output stream does not exist (a deployment
// that does not serve the tenant dead-letters its responses; waiting would only time
// out). A tenant found once is not asked for again.
func (c *Client) check(ctx context.Context, conversation string) error {
	if err := messages.ValidateConversation(conversation); err != nil {
		return fmt.Errorf("client: %w", err)
	}
	tenant := messages.Tenant(conversation)
	if tenant == "" {
		return nil
	}
	if _, ok := c.served.Load(tenant); ok {
		return nil
	}
	if _, err := c.js.Stream(ctx, messages.OutputStream(tenant)); err != nil {
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return fmt.Errorf("client: conversation %q: the deployment serves no tenant %q (no stream %s)", conversation, tenant, messages.OutputStream(tenant))
		}
		return fmt.Errorf("client: conversation %q: tenant %q's stream %s: %w", conversation, tenant, messages.OutputStream(tenant), err)
	}
	c.served.Store(tenant, true)
	return nil
}

// New returns a client on nc.
func New(nc *nats.Conn) (*Client, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return &Client{nc: nc, js: js, subs: map[string]*nats.Subscription{}, waiters: map[string]chan []byte{}, users: map[string]int{}}, nil
}

// SubmitOptions tunes one submission. The response continues the trace of the span in
// the context given to Submit or Ask (W3C traceparent header), or starts a new one.
type SubmitOptions struct {
	// ResponseID identifies the response; empty means a new unique id.
	ResponseID string
	// Deadline, when set, is when unfinished calls are answered with timeout.
	Deadline time.Time
	// Format pins the tool-call syntax of this response (see toolcall.Formats), or the
	// hosted API whose response, message or stream events it is ("openai",
	// "openai_responses", "anthropic", "gemini", "bedrock", "ollama").
	Format string
	// OutputFormat asks for that API's native next turn in the output (Output.Native,
	// each result answering its call by Output.Results[i].CallID), overriding the
	// configuration's parser.output_format.
	OutputFormat string
	// Reasoning says where the response's reasoning is: "auto", "tagged" or "open" (see
	// toolcall.Reasoning; the parser's configuration when empty).
	Reasoning string
}

// header returns the headers every message of a response carries.
func (o *SubmitOptions) header(conversation, id string) nats.Header {
	h := nats.Header{}
	h.Set(messages.HeaderResponseID, id)
	h.Set(messages.HeaderConversation, conversation)
	if o.Format != "" {
		h.Set(messages.HeaderFormat, o.Format)
	}
	if o.OutputFormat != "" {
		h.Set(messages.HeaderOutputFormat, o.OutputFormat)
	}
	if o.Reasoning != "" {
		h.Set(messages.HeaderReasoning, o.Reasoning)
	}
	if !o.Deadline.IsZero() {
		h.Set(messages.HeaderDeadline, o.Deadline.UTC().Format(time.RFC3339Nano))
	}
	return h
}

// Submit publishes text as a response of conversation and returns its id once JetStream
// has stored it. Submitting the same id again within the de-duplication window is a no-op.
func (c *Client) Submit(ctx context.Context, conversation, text string, o *SubmitOptions) (string, error) {
	id, _, err := c.submit(ctx, conversation, text, o)
	return id, err
}

// submit is Submit, saying too whether JetStream had the response already (a retried
// publish of the same id within the de-duplication window).
func (c *Client) submit(ctx context.Context, conversation, text string, o *SubmitOptions) (string, bool, error) {
	if err := c.check(ctx, conversation); err != nil {
		return "", false, err
	}
	var opts SubmitOptions
	if o != nil {
		opts = *o
	}
	id := opts.ResponseID
	if id == "" {
		id = nuid.Next()
	}
	msg := &nats.Msg{Subject: messages.ResponseSubject(conversation), Data: []byte(text), Header: opts.header(conversation, id)}
	msg.Header.Set(messages.HeaderMsgID, messages.ScopedID(conversation, id))
	// The response's trace: a child of the caller's span in ctx, or a new root.
	ctx, span := telemetry.TracerFor(ctx).Start(ctx, "send toolbus.responses", producerSpan...)
	defer span.End()
	if span.IsRecording() { // with tracing off, no attribute is built
		span.SetAttributes(telemetry.MessagingSystem.String(telemetry.MessagingSystemNATS), telemetry.MessagingOperation.String("send"),
			telemetry.MessagingOpName.String("send"), telemetry.MessagingDestination.String(msg.Subject), telemetry.MessagingMessageID.String(id),
			telemetry.Conversation.String(conversation), telemetry.ResponseID.String(id))
	}
	bus.InjectTrace(ctx, msg.Header)
	ack, err := c.js.PublishMsg(ctx, msg)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		return "", false, fmt.Errorf("client: submit: %w", err)
	}
	return id, ack.Duplicate, nil
}

// producerSpan is the option of a response's span, built once.
var producerSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindProducer)}

// Ask submits text and waits for its output until ctx is done. Asking again with the
// ResponseID of a response submitted earlier (a retry, within the de-duplication window)
// runs nothing again and returns that response's output, also one published before.
func (c *Client) Ask(ctx context.Context, conversation, text string, o *SubmitOptions) (*messages.Output, error) {
	if err := c.check(ctx, conversation); err != nil {
		return nil, err
	}
	var opts SubmitOptions
	if o != nil {
		opts = *o
	}
	// A response id of the caller's may have been answered before: after a NATS server
	// restart the responses stream, whose answered messages are gone, no longer knows
	// it, and takes the publish as new, while the output stream still holds the output
	// (and drops its second publish). Its output is looked for from any time too.
	chosen := opts.ResponseID != ""
	if !chosen {
		opts.ResponseID = nuid.Next()
	}
	// Listen before publishing so the output cannot slip past.
	ch, err := c.listen(conversation, opts.ResponseID)
	if err != nil {
		return nil, err
	}
	defer c.unlisten(conversation, opts.ResponseID)
	submitted := time.Now()
	_, dup, err := c.submit(ctx, conversation, text, &opts)
	if err != nil {
		return nil, err
	}
	if dup {
		// Submitted before: its output may be in the stream already, from any time.
		if out, err := c.find(ctx, conversation, opts.ResponseID, time.Time{}); err == nil && out != nil {
			return out, nil
		}
	}
	return c.await(ctx, conversation, opts.ResponseID, ch, submitted, chosen)
}

// await waits for the output of response id on ch, the subscription listen returned;
// with anyTime, the first look at the output stream reads it from the start.
func (c *Client) await(ctx context.Context, conversation, id string, ch chan []byte, submitted time.Time, anyTime bool) (*messages.Output, error) {
	// The subscription is the fast path. An output published while the connection was
	// down (a server restart) never reaches it, so the output stream is checked too, at
	// growing intervals.
	recheck := time.NewTimer(2 * time.Second)
	defer recheck.Stop()
	since, interval := submitted.Add(-time.Second), 2*time.Second
	for {
		select {
		case data := <-ch:
			return decode(data)
		case <-recheck.C:
			from := since
			if anyTime {
				from, anyTime = time.Time{}, false
			}
			if out, err := c.find(ctx, conversation, id, from); err == nil && out != nil {
				return out, nil
			}
			interval = min(interval*2, 30*time.Second)
			recheck.Reset(interval)
		case <-ctx.Done():
			return nil, fmt.Errorf("client: waiting for the output of %s: %w", id, ctx.Err())
		}
	}
}

// find looks for the output of response id in the output stream, from since on (from
// the start when since is zero).
func (c *Client) find(ctx context.Context, conversation, id string, since time.Time) (*messages.Output, error) {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{messages.OutputSubject(conversation)}}
	if !since.IsZero() {
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &since
	}
	cons, err := c.js.OrderedConsumer(ctx, messages.OutputStream(messages.Tenant(conversation)), cfg)
	if err != nil {
		return nil, err
	}
	for {
		batch, err := cons.FetchNoWait(256)
		if err != nil {
			return nil, err
		}
		n := 0
		for m := range batch.Messages() {
			n++
			if m.Headers().Get(messages.HeaderMsgID) == messages.ScopedID(conversation, id) {
				return decode(m.Data())
			}
		}
		if n == 0 || batch.Error() != nil {
			return nil, batch.Error()
		}
	}
}

func (c *Client) listen(conversation, id string) (chan []byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.subs[conversation]; !ok {
		sub, err := c.nc.Subscribe(messages.OutputSubject(conversation), c.deliver)
		if err != nil {
			return nil, fmt.Errorf("client: %w", err)
		}
		// Outputs are small and awaited: never drop them as a slow consumer.
		_ = sub.SetPendingLimits(-1, -1)
		c.subs[conversation] = sub
	}
	c.users[conversation]++
	ch := make(chan []byte, 1)
	c.waiters[messages.ScopedID(conversation, id)] = ch
	return ch, nil
}

func (c *Client) unlisten(conversation, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.waiters, messages.ScopedID(conversation, id))
	if c.users[conversation]--; c.users[conversation] <= 0 {
		delete(c.users, conversation)
		if sub := c.subs[conversation]; sub != nil {
			_ = sub.Unsubscribe()
			delete(c.subs, conversation)
		}
	}
}

// deliver hands an output to its waiter, by its message id: the response's scoped id,
// which names the conversation (a copy of another tenant's output delivered on this
// subject by a push consumer names the other's, and is dropped).
func (c *Client) deliver(m *nats.Msg) {
	id := m.Header.Get(messages.HeaderMsgID)
	c.mu.Lock()
	ch := c.waiters[id]
	delete(c.waiters, id)
	c.mu.Unlock()
	if ch != nil {
		ch <- m.Data
	}
}

// Wait returns the output of a response submitted earlier, reading the output stream
// from its start, so it finds outputs that arrived before the call.
func (c *Client) Wait(ctx context.Context, conversation, responseID string) (*messages.Output, error) {
	cons, err := c.js.OrderedConsumer(ctx, messages.OutputStream(messages.Tenant(conversation)), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{messages.OutputSubject(conversation)},
	})
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	for {
		batch, err := cons.Fetch(64, jetstream.FetchContext(ctx))
		if err != nil {
			return nil, fmt.Errorf("client: waiting for %s: %w", responseID, err)
		}
		for m := range batch.Messages() {
			if m.Headers().Get(messages.HeaderMsgID) == messages.ScopedID(conversation, responseID) {
				return decode(m.Data())
			}
		}
		if err := batch.Error(); err != nil && ctx.Err() != nil {
			return nil, fmt.Errorf("client: waiting for %s: %w", responseID, ctx.Err())
		}
	}
}

// decode reads an output, each result's value taken from its block of the text, where
// it travels.
func decode(data []byte) (*messages.Output, error) {
	var out messages.Output
	if err := messages.DecodeOutput(data, &out); err != nil {
		return nil, fmt.Errorf("client: undecodable output: %w", err)
	}
	if err := out.FillResults(); err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return &out, nil
}

// FetchResult reads the whole of a result too large to travel inline (an output result
// with Stored set) and checks its size and sha256.
func (c *Client) FetchResult(ctx context.Context, stored *messages.StoredResult) ([]byte, error) {
	b, err := results.Fetch(ctx, c.js, stored)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return b, nil
}

// FullResults replaces the preview of every stored result of out with the whole result,
// fetched and checked, and clears its Stored. Text, the model's view, is left as it is.
func (c *Client) FullResults(ctx context.Context, out *messages.Output) error {
	for i := range out.Results {
		r := &out.Results[i]
		if r.Stored == nil {
			continue
		}
		b, err := c.FetchResult(ctx, r.Stored)
		if err != nil {
			return err
		}
		r.Result, r.Stored = b, nil
	}
	return nil
}
