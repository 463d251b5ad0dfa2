package executor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolbus/toolbus/pkg/affinity"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/mcpwire"
	"github.com/toolbus/toolbus/pkg/messages"
)

// reachSession keeps a call of a conversation-scoped server ([Route.Session]) on the
// replica that holds the conversation's session with it ([Stage.Owners]): it goes on
// here when this replica holds it (taking over from a holder that is gone), and is
// answered with what the holder answered when another replica ran it there.
func (s *Stage) reachSession(ctx context.Context, c *callState) verdict {
	if c.routeErr != nil || c.route.Session == "" || s.Owners == nil {
		return proceed()
	}
	out, there, lease, err := s.place(ctx, c.route.Session, c.call, c.route, c.d)
	c.lease = lease
	if err != nil || there {
		return reply(out, err)
	}
	return proceed()
}

// place finds the replica that holds the conversation's session with server: this one
// (there false, with the lease), or another, which ran the call (there true, with what
// it answered). A holder that is gone is replaced by this replica.
func (s *Stage) place(ctx context.Context, server string, call messages.ToolCall, route Route, d *bus.Delivery) (out []bus.Outgoing, there bool, l affinity.Lease, err error) {
	// Whatever goes wrong here is handed back, never answered: the call has not run.
	retry := func(err error) error {
		return bus.Retry(fmt.Errorf("the conversation's session with %q: %w", server, err), s.redeliveryDelay())
	}
	l, err = s.Owners.Acquire(ctx, server, call.Conversation)
	if err != nil {
		return nil, false, l, retry(err)
	}
	if l.Mine || affinity.Forwarded(ctx) {
		// A forwarded call runs here, whoever the bucket names by now.
		return nil, false, l, nil
	}
	// The holder answers within the call's budget, or hands it back; beyond that (and
	// the time it may take to store a result through an outage) its answer was lost.
	wait := max(time.Until(s.Exec.Budget(call, route, time.Now())), 0) + s.storeWait()
	for range 3 {
		out, err = s.Owners.Forward(ctx, l.Owner, d, wait)
		switch {
		case err == nil:
			return out, true, l, nil
		case !errors.Is(err, affinity.ErrGone):
			var re *bus.RetryError
			if errors.As(err, &re) {
				return nil, true, l, err // the holder handed it back
			}
			return nil, true, l, retry(err)
		}
		if l, err = s.Owners.TakeOver(ctx, l, server, call.Conversation); err != nil {
			return nil, false, l, retry(err)
		}
		if l.Mine {
			return nil, false, l, nil
		}
	}
	return nil, false, l, retry(errors.New("its holder keeps changing"))
}

// notice is what the result of a call must say of its session: that it ran in a new
// session of server, the conversation's previous one lost, when the pool opened one for
// it after an earlier one (r) or the holder's record says one was lost (l).
func (s *Stage) notice(server string, r mcpwire.SessionReport, l affinity.Lease) string {
	why := ""
	switch {
	case r.Opened && (r.Ended != "" || l.Opened):
		why = cmp.Or(r.Ended, l.Ended, "it was closed")
	case l.Ended != "" && l.Mine:
		why = l.Ended // taken over on an earlier delivery, not yet said
	default:
		return ""
	}
	return fmt.Sprintf("this call ran in a new session of the server %q: the conversation's previous session ended (%s), "+
		"so whatever earlier calls set in it (a working directory, an open page, an activated mode) is gone and may need to be set again",
		server, why)
}
