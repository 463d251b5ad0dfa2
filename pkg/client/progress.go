package client

import (
	"encoding/json"

	"github.com/nats-io/nats.go"
	"github.com/toolbus/toolbus/pkg/messages"
)

// OnCallProgress calls fn with what MCP servers report of the calls of conversation
// while they run (notifications/progress: a step, a total, a message), as toolbus
// publishes it on the conversation's progress subject. Best effort, as the servers'
// notifications are: a report may be missed, never a result. Unsubscribe to stop.
func (c *Client) OnCallProgress(conversation string, fn func(messages.CallProgress)) (*nats.Subscription, error) {
	if err := messages.ValidateConversation(conversation); err != nil {
		return nil, err
	}
	return c.nc.Subscribe(messages.ProgressSubject(conversation), func(m *nats.Msg) {
		var p messages.CallProgress
		// Only a call's progress of this conversation: a copy of another tenant's
		// message delivered here names its own.
		if m.Header.Get(messages.HeaderProgressOf) == "" || m.Header.Get(messages.HeaderConversation) != conversation ||
			json.Unmarshal(m.Data, &p) != nil || p.Conversation != conversation {
			return
		}
		fn(p)
	})
}

// OnCallLog calls fn with what MCP servers log while the calls of conversation run on
// them (notifications/message: a level, a logger, data), as toolbus publishes it on the
// conversation's progress subject. Best effort, as the servers' notifications are.
// Unsubscribe to stop.
func (c *Client) OnCallLog(conversation string, fn func(messages.CallLog)) (*nats.Subscription, error) {
	if err := messages.ValidateConversation(conversation); err != nil {
		return nil, err
	}
	return c.nc.Subscribe(messages.ProgressSubject(conversation), func(m *nats.Msg) {
		var l messages.CallLog
		// Only a log of this conversation: a copy of another tenant's message delivered
		// here names its own.
		if m.Header.Get(messages.HeaderLogOf) == "" || m.Header.Get(messages.HeaderConversation) != conversation ||
			json.Unmarshal(m.Data, &l) != nil || l.Conversation != conversation {
			return
		}
		fn(l)
	})
}

// OnResourceUpdated calls fn with each update of a resource the conversation subscribed
// to (a server's resources_subscribe tool, under its "subscriptions": true), as the
// executor whose session subscribed passes it on (best effort), until the subscription
// is unsubscribed.
func (c *Client) OnResourceUpdated(conversation string, fn func(messages.ResourceUpdated)) (*nats.Subscription, error) {
	if err := messages.ValidateConversation(conversation); err != nil {
		return nil, err
	}
	return c.nc.Subscribe(messages.ProgressSubject(conversation), func(m *nats.Msg) {
		var u messages.ResourceUpdated
		if m.Header.Get(messages.HeaderResourceUpdated) == "" || m.Header.Get(messages.HeaderConversation) != conversation ||
			json.Unmarshal(m.Data, &u) != nil || u.Conversation != conversation {
			return
		}
		fn(u)
	})
}
