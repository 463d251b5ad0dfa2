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
	return answerServers(c, conversation, messages.ElicitSubject(conversation),
		func(r messages.ElicitRequest) time.Time { return r.Deadline }, messages.ElicitResponse{Action: "decline"}, fn)
}

// answerServers answers the requests servers put to conversation's orchestrator on
// subject (a question, a request for a completion) with fn until the subscription is
// unsubscribed, each in a goroutine of its own (a person or a model takes its time: the
// next request need not wait), on the reply subject the request names, one of the
// conversation's answer subjects (messages.AnswerSubject). Only a request of this
// conversation is answered: a copy of another tenant's message delivered here (NATS lets
// a push consumer deliver anywhere) names another conversation, or no answer subject.
// fn's ctx ends at the request's deadline (a minute from now without one); a request
// that cannot be read, or an answer that cannot be encoded, is answered refused.
func answerServers[Req, Resp any](c *Client, conversation, subject string, deadline func(Req) time.Time, refused Resp, fn func(context.Context, Req) Resp) (*nats.Subscription, error) {
	if err := messages.ValidateConversation(conversation); err != nil {
		return nil, err
	}
	answers := messages.AnswerSubject(conversation, "")
	return c.nc.Subscribe(subject, func(m *nats.Msg) {
		if m.Header.Get(messages.HeaderConversation) != conversation || !strings.HasPrefix(m.Reply, answers) || strings.Contains(m.Reply[len(answers):], ".") {
			return
		}
		go func() {
			resp := refused
			var req Req
			if err := json.Unmarshal(m.Data, &req); err == nil {
				end := deadline(req)
				if end.IsZero() {
					end = time.Now().Add(time.Minute)
				}
				ctx, cancel := context.WithDeadline(context.Background(), end)
				resp = fn(ctx, req)
				cancel()
			}
			body, err := json.Marshal(resp)
			if err != nil {
				body, _ = json.Marshal(refused)
			}
			_ = m.Respond(body) // a reply that cannot go: the server's request times out and is refused
		}()
	})
}
