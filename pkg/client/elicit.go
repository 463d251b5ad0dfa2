package client

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/toolbus/toolbus/pkg/messages"
)

// Elicitor answers a server's question to the user, asked in the middle of a call of
// the conversation (servers configured with "elicitation": "ask"): show req.Message,
// collect content fitting req.RequestedSchema, and return "accept" with it, or
// "decline" or "cancel". ctx ends at req.Deadline, the call's own time.
type Elicitor func(ctx context.Context, req messages.ElicitRequest) messages.ElicitResponse

// OnElicit answers the conversation's elicitation requests with fn until the returned
// subscription is unsubscribed. A conversation nobody answers for has its requests
// declined.
func (c *Client) OnElicit(conversation string, fn Elicitor) (*nats.Subscription, error) {
	if err := messages.ValidateConversation(conversation); err != nil {
		return nil, err
	}
	answers := messages.AnswerSubject(conversation, "")
	return c.nc.Subscribe(messages.ElicitSubject(conversation), func(m *nats.Msg) {
		// Only a request of this conversation, to be answered on its answer subject: a
		// copy of another tenant's message delivered here (NATS lets a push consumer
		// deliver anywhere) names another conversation, or no answer subject.
		if m.Header.Get(messages.HeaderConversation) != conversation || !strings.HasPrefix(m.Reply, answers) || strings.Contains(m.Reply[len(answers):], ".") {
			return
		}
		go answer(m, fn) // a user's answer takes its time: the next question need not wait
	})
}

func answer(m *nats.Msg, fn Elicitor) {
	resp := messages.ElicitResponse{Action: "decline"}
	var req messages.ElicitRequest
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
		body = []byte(`{"action":"decline"}`)
	}
	_ = m.Respond(body) // a reply that cannot go: the call's ask times out and declines
}
