package console

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/policy"
)

// Approval is a call waiting for a person's decision (or decided), as the console shows
// it: the request and its decision, never the call itself, whose arguments are not
// masked.
type Approval struct {
	messages.ApprovalRequest
	State     string `json:"state"`
	DecidedBy string `json:"decided_by,omitempty"`
	Reason    string `json:"reason,omitempty"`
	DecidedAt string `json:"decided_at,omitempty"`
}

func (c *Console) approvals(ctx context.Context) (*policy.Approvals, error) {
	kv, err := c.JS.KeyValue(ctx, messages.BucketApprovals)
	if err != nil {
		return nil, fmt.Errorf("the %s bucket: %w", messages.BucketApprovals, err)
	}
	return &policy.Approvals{KV: kv}, nil
}

// Approvals lists the calls waiting for a decision, the oldest first; with all, the
// decided ones kept too. Their arguments (masked by the executor) and reasons are masked
// again with the console's secrets.
func (c *Console) Approvals(ctx context.Context, all bool) ([]Approval, error) {
	a, err := c.approvals(ctx)
	if err != nil {
		return nil, err
	}
	list, err := a.List(ctx)
	if err != nil {
		return nil, err
	}
	out := []Approval{}
	for _, rec := range list {
		if all || rec.State == messages.ApprovalPending {
			out = append(out, c.shown(rec))
		}
	}
	return out, nil
}

// Decide approves or denies the call waiting under id with reason, for the arguments
// whose digest is sha256 (those the page showed; the request's when empty), by asking
// the executors as the console's NATS user (client.Decide): an approved call runs once,
// a denied one is answered not_allowed with the reason.
func (c *Console) Decide(ctx context.Context, id string, approve bool, reason, sha256 string) (Approval, error) {
	if sha256 == "" {
		a, err := c.approvals(ctx)
		if err != nil {
			return Approval{}, err
		}
		rec, _, err := a.Get(ctx, id)
		if err != nil {
			return Approval{}, err
		}
		sha256 = rec.ArgumentsSHA256
	}
	if c.Client == nil {
		return Approval{}, fmt.Errorf("the console has no NATS client to decide with")
	}
	user := client.ConnUser(c.NC)
	if user == "anonymous" && c.NC != nil {
		user = "console" // a server without users: the console names itself
	}
	d, err := c.Client.DecideAs(ctx, user, id, approve, reason, sha256)
	if err != nil {
		return Approval{}, err
	}
	return c.shown(messages.Approval{ApprovalRequest: d.ApprovalRequest, State: d.State, DecidedBy: d.DecidedBy, Reason: d.Reason, DecidedAt: d.DecidedAt}), nil
}

func (c *Console) shown(rec messages.Approval) Approval {
	req := rec.ApprovalRequest
	masked := c.Redact.String(string(req.Arguments))
	if json.Valid([]byte(masked)) {
		req.Arguments = json.RawMessage(masked)
	} else {
		req.Arguments, _ = json.Marshal(masked)
	}
	a := Approval{ApprovalRequest: req, State: rec.State, DecidedBy: rec.DecidedBy, Reason: c.Redact.String(rec.Reason)}
	if !rec.DecidedAt.IsZero() {
		a.DecidedAt = rec.DecidedAt.Format("2006-01-02T15:04:05.000Z07:00")
	}
	return a
}
