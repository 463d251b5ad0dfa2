package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/internal/bus"
	"github.com/toolbus/toolbus/pkg/messages"
)

// callRecord is what the calls bucket holds for one call id.
type callRecord struct {
	// State is "running" while an executor works on the call and "done" after.
	State   string    `json:"state"`
	Owner   string    `json:"owner,omitempty"`
	Started time.Time `json:"started,omitzero"`
	// Attempts counts the attempts of earlier deliveries.
	Attempts int `json:"attempts,omitempty"`
	// Result is the stored answer once done.
	Result *messages.ToolResult `json:"result,omitempty"`
}

const (
	stateRunning  = "running"
	stateReleased = "released"
	stateDone     = "done"
)

// Claim is the outcome of [Claims.Begin].
type Claim struct {
	// Result is set when the call was finished before: answer with it, do not run.
	Result *messages.ToolResult
	// Abandoned is set when an earlier delivery claimed the call and never finished it:
	// its executor died, and whether the tool ran is unknown.
	Abandoned *callRecord
	// PriorAttempts counts the attempts of earlier deliveries that failed safely.
	PriorAttempts int
	rev           uint64
}

// Claims records, per call id, that a call is being run and its result once it is done,
// so that a redelivered call is answered from the store and never run twice.
type Claims struct {
	KV jetstream.KeyValue
	// Owner names this executor in its claims.
	Owner string
}

// Begin claims call id (create-if-absent). When another delivery got there first, the
// returned Claim says what it left behind.
func (c Claims) Begin(ctx context.Context, id string) (Claim, error) {
	key := bus.Key(id)
	rec, _ := json.Marshal(callRecord{State: stateRunning, Owner: c.Owner, Started: time.Now().UTC()})
	rev, err := c.KV.Create(ctx, key, rec)
	if err == nil {
		return Claim{rev: rev}, nil
	}
	if !errors.Is(err, jetstream.ErrKeyExists) {
		return Claim{}, fmt.Errorf("claim %s: %w", id, err)
	}
	prev, prevRev, err := bus.GetJSON[callRecord](ctx, c.KV, key)
	if err != nil {
		return Claim{}, fmt.Errorf("claim %s: %w", id, err)
	}
	switch {
	case prev.State == stateDone && prev.Result != nil:
		return Claim{Result: prev.Result}, nil
	case prev.State == stateReleased:
		cl := Claim{rev: prevRev, PriorAttempts: prev.Attempts}
		if err := c.TakeOver(ctx, id, &cl); err != nil {
			return Claim{}, err
		}
		return cl, nil
	}
	return Claim{Abandoned: &prev, rev: prevRev}, nil
}

// TakeOver claims an abandoned call for this executor, to run it again. It fails when
// another executor took it over first.
func (c Claims) TakeOver(ctx context.Context, id string, cl *Claim) error {
	rec, _ := json.Marshal(callRecord{State: stateRunning, Owner: c.Owner, Started: time.Now().UTC()})
	rev, err := c.KV.Update(ctx, bus.Key(id), rec, cl.rev)
	if err != nil {
		return fmt.Errorf("take over %s: %w", id, err)
	}
	cl.rev, cl.Abandoned = rev, nil
	return nil
}

// Finish stores the result of call id.
func (c Claims) Finish(ctx context.Context, id string, r messages.ToolResult) error {
	rec, err := json.Marshal(callRecord{State: stateDone, Owner: c.Owner, Result: &r})
	if err != nil {
		return err
	}
	if _, err := c.KV.Put(ctx, bus.Key(id), rec); err != nil {
		return fmt.Errorf("store result %s: %w", id, err)
	}
	return nil
}

// Release gives up the claim of a call whose failure is safe to retry, so its next
// delivery runs it again; attempts is the number of attempts made so far.
func (c Claims) Release(ctx context.Context, id string, attempts int) error {
	rec, _ := json.Marshal(callRecord{State: stateReleased, Owner: c.Owner, Attempts: attempts})
	_, err := c.KV.Put(ctx, bus.Key(id), rec)
	return err
}
