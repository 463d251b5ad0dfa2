package client

import (
	"encoding/json"

	"github.com/nats-io/nats.go"
	"github.com/toolbus/toolbus/pkg/messages"
)

// OnApproval calls fn with each call of conversation that waits for a person's decision
// (a policy rule with effect "approve"), as the executor announces it: to tell the user
// why the answer is late. Deciding is for `toolbus approve`, `toolbus deny` and the
// console; the request is kept in the approvals bucket whether or not anyone listens.
// Unsubscribe to stop.
func (c *Client) OnApproval(conversation string, fn func(messages.ApprovalRequest)) (*nats.Subscription, error) {
	if err := messages.ValidateConversation(conversation); err != nil {
		return nil, err
	}
	return c.nc.Subscribe(messages.ApprovalSubject(conversation), func(m *nats.Msg) {
		var req messages.ApprovalRequest
		// Only a request of this conversation: a copy of another tenant's message
		// delivered here names its own.
		if json.Unmarshal(m.Data, &req) != nil || req.Conversation != conversation {
			return
		}
		fn(req)
	})
}
