package client

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/toolbus/toolbus/pkg/messages"
)

// Sampler answers a server's request for a model's completion, made in the middle of a
// call of the conversation (servers configured with "sampling": "ask"): run req.Messages
// (with req.SystemPrompt, at most req.MaxTokens) through a model and return its message
// — Content an MCP block such as {"type": "text", "text": "…"} — or Error to refuse.
// ctx ends at req.Deadline, the call's own time.
type Sampler func(ctx context.Context, req messages.SampleRequest) messages.SampleResponse

// OnSample answers the conversation's sampling requests with fn until the returned
// subscription is unsubscribed. A conversation nobody answers for has its requests
// refused.
func (c *Client) OnSample(conversation string, fn Sampler) (*nats.Subscription, error) {
	return answerServers(c, conversation, messages.SampleSubject(conversation),
		func(r messages.SampleRequest) time.Time { return r.Deadline },
		messages.SampleResponse{Error: "the orchestrator could not read the request, or encode its answer"}, fn)
}
