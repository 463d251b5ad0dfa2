package client

import (
	"context"
	"encoding/json"
	"strings"
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
	if err := messages.ValidateConversation(conversation); err != nil {
		return nil, err
	}
	answers := messages.AnswerSubject(conversation, "")
	return c.nc.Subscribe(messages.SampleSubject(conversation), func(m *nats.Msg) {
		// Only a request of this conversation, to be answered on its answer subject.
		if m.Header.Get(messages.HeaderConversation) != conversation || !strings.HasPrefix(m.Reply, answers) || strings.Contains(m.Reply[len(answers):], ".") {
			return
		}
		go sample(m, fn) // a model takes its time: the next request need not wait
	})
}

func sample(m *nats.Msg, fn Sampler) {
	resp := messages.SampleResponse{Error: "the orchestrator could not read the request"}
	var req messages.SampleRequest
	if err := json.Unmarshal(m.Data, &req); err == nil {
		deadline := req.Deadline
		if deadline.IsZero() {
			deadline = time.Now().Add(time.Minute)
		}
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		resp = fn(ctx, req)
		cancel()
	}
	body, err := json.Marshal(resp)
	if err != nil {
		body = []byte(`{"error":"the orchestrator's answer could not be encoded"}`)
	}
	_ = m.Respond(body) // a reply that cannot go: the server's request times out and is refused
}
