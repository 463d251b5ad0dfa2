package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/toolbus/toolbus/pkg/bus"
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

// Decide approves or denies the call waiting under approval id (from OnApproval or
// `toolbus approvals ls`) with reason, for the arguments whose digest is argumentsSHA256
// (the request's ArgumentsSHA256: what the person saw). It asks the executors, on the
// subject of the NATS user this client connected as (messages.DecideSubject): the
// decision is recorded as that user's, and a tenant's user decides its tenant's calls
// only. An error says why nothing was decided (decided already, other arguments, no
// such call).
func (c *Client) Decide(ctx context.Context, id string, approve bool, reason, argumentsSHA256 string) (messages.Decision, error) {
	return c.DecideAs(ctx, ConnUser(c.nc), id, approve, reason, argumentsSHA256)
}

// DecideAs is Decide on the subject of user: on a server with users, only the user's own
// is allowed (deploy/nats.conf); on one without (the embedded server), a program that
// decides for its people (the console) names itself.
func (c *Client) DecideAs(ctx context.Context, user, id string, approve bool, reason, argumentsSHA256 string) (messages.Decision, error) {
	body, err := json.Marshal(messages.DecideRequest{Approve: approve, Reason: reason, ArgumentsSHA256: argumentsSHA256})
	if err != nil {
		return messages.Decision{}, err
	}
	m, err := c.nc.RequestWithContext(ctx, messages.DecideSubject(user, id), body)
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			return messages.Decision{}, fmt.Errorf("client: decide %s: no executor answers decisions (is toolbus running, with its executors?)", id)
		}
		return messages.Decision{}, fmt.Errorf("client: decide %s: %w", id, err)
	}
	var r messages.DecideReply
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return messages.Decision{}, fmt.Errorf("client: decide %s: the answer %q: %w", id, m.Data, err)
	}
	if r.Error != nil {
		return messages.Decision{}, &messages.ToolError{Code: r.Error.Code, Message: r.Error.Message}
	}
	if r.Decision == nil {
		return messages.Decision{}, fmt.Errorf("client: decide %s: an answer without a decision", id)
	}
	return *r.Decision, nil
}

// ConnUser is the NATS user nc connected as: the user of its URLs, else of its options,
// else "anonymous" (a server without users).
func ConnUser(nc *nats.Conn) string {
	if nc == nil {
		return "anonymous"
	}
	if u := bus.URLUser(strings.Join(append([]string{nc.Opts.Url}, nc.Opts.Servers...), ",")); u != "" {
		return u
	}
	if nc.Opts.User != "" {
		return nc.Opts.User
	}
	return "anonymous"
}
