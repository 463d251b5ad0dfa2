// Package client is the Go client for orchestrators: publish a model's response to
// toolbus and wait for its output.
//
//	c := client.New(nc)
//	out, err := c.Ask(ctx, "conv-1", modelText)
//	// feed out.Text back to the model
package client

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"github.com/toolbus/toolbus/pkg/messages"
)

// Client submits responses and receives outputs over one NATS connection.
type Client struct {
	nc *nats.Conn
	js jetstream.JetStream
}

// New returns a client on nc.
func New(nc *nats.Conn) (*Client, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return &Client{nc: nc, js: js}, nil
}

// SubmitOptions tunes one submission.
type SubmitOptions struct {
	// ResponseID identifies the response; empty means a new unique id.
	ResponseID string
	// Deadline, when set, is when unfinished calls are answered with timeout.
	Deadline time.Time
	// Traceparent continues the caller's trace.
	Traceparent string
}

// Submit publishes text as a response of conversation and returns its id once JetStream
// has stored it. Submitting the same id again within the de-duplication window is a no-op.
func (c *Client) Submit(ctx context.Context, conversation, text string, o *SubmitOptions) (string, error) {
	if err := messages.ValidateConversation(conversation); err != nil {
		return "", fmt.Errorf("client: %w", err)
	}
	var opts SubmitOptions
	if o != nil {
		opts = *o
	}
	id := opts.ResponseID
	if id == "" {
		id = nuid.Next()
	}
	msg := nats.NewMsg(messages.ResponseSubject(conversation))
	msg.Data = []byte(text)
	msg.Header.Set(messages.HeaderResponseID, id)
	msg.Header.Set(messages.HeaderMsgID, id)
	msg.Header.Set(messages.HeaderConversation, conversation)
	if !opts.Deadline.IsZero() {
		msg.Header.Set(messages.HeaderDeadline, opts.Deadline.UTC().Format(time.RFC3339Nano))
	}
	if opts.Traceparent != "" {
		msg.Header.Set(messages.HeaderTraceparent, opts.Traceparent)
	}
	if _, err := c.js.PublishMsg(ctx, msg); err != nil {
		return "", fmt.Errorf("client: submit: %w", err)
	}
	return id, nil
}

// Ask submits text and waits for its output until ctx is done.
func (c *Client) Ask(ctx context.Context, conversation, text string, o *SubmitOptions) (*messages.Output, error) {
	if err := messages.ValidateConversation(conversation); err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	// Subscribe before publishing so the output cannot slip past.
	sub, err := c.nc.SubscribeSync(messages.OutputSubject(conversation))
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	defer sub.Unsubscribe()
	id, err := c.Submit(ctx, conversation, text, o)
	if err != nil {
		return nil, err
	}
	return c.wait(ctx, sub, id)
}

// Wait returns the output of a response submitted earlier, reading the output stream
// from its start, so it finds outputs that arrived before the call.
func (c *Client) Wait(ctx context.Context, conversation, responseID string) (*messages.Output, error) {
	cons, err := c.js.OrderedConsumer(ctx, messages.StreamOutput, jetstream.OrderedConsumerConfig{
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
			if m.Headers().Get(messages.HeaderMsgID) == responseID {
				return decode(m.Data())
			}
		}
		if err := batch.Error(); err != nil && ctx.Err() != nil {
			return nil, fmt.Errorf("client: waiting for %s: %w", responseID, ctx.Err())
		}
	}
}

func (c *Client) wait(ctx context.Context, sub *nats.Subscription, id string) (*messages.Output, error) {
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return nil, fmt.Errorf("client: waiting for the output of %s: %w", id, err)
		}
		if m.Header.Get(messages.HeaderMsgID) == id {
			return decode(m.Data)
		}
	}
}

func decode(data []byte) (*messages.Output, error) {
	var out messages.Output
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("client: undecodable output: %w", err)
	}
	return &out, nil
}
