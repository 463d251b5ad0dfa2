// Package claimstest keeps call claims in memory, with the semantics of the calls bucket,
// for the tests of the stages that claim calls.
package claimstest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/toolbus/toolbus/pkg/claims"
	"github.com/toolbus/toolbus/pkg/messages"
)

// Memory implements claims.Store in memory and logs each operation ("begin id",
// "take over id", "finish id", "release id"). The zero value is ready.
type Memory struct {
	mu  sync.Mutex
	m   map[string]claims.Record
	log []string
}

// Set stores rec for id, as an earlier delivery would have left it.
func (c *Memory) Set(id string, rec claims.Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.put(id, rec)
}

// Log returns the operations so far.
func (c *Memory) Log() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.log)
}

func (c *Memory) put(id string, rec claims.Record) {
	if c.m == nil {
		c.m = map[string]claims.Record{}
	}
	c.m[id] = rec
}

// Begin implements claims.Store.
func (c *Memory) Begin(_ context.Context, id, digest string) (claims.Claim, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = append(c.log, "begin "+id)
	prev, ok := c.m[id]
	switch {
	case !ok:
		c.put(id, claims.Record{State: "running", Owner: "me", Started: time.Now(), Digest: digest})
		return claims.Claim{}, nil
	case prev.State == "done":
		return claims.Claim{Result: prev.Result, Digest: prev.Digest}, nil
	case prev.State == "released":
		c.put(id, claims.Record{State: "running", Owner: "me", Started: time.Now(), Digest: digest})
		return claims.Claim{PriorAttempts: prev.Attempts, PriorSent: prev.Sent, FirstAttempt: prev.FirstAttempt}, nil
	}
	first := prev.FirstAttempt
	if first.IsZero() {
		first = prev.Started
	}
	return claims.Claim{Abandoned: &prev, PriorAttempts: prev.Attempts + 1, PriorSent: prev.Sent + 1, FirstAttempt: first}, nil
}

// TakeOver implements claims.Store, with compare-and-set as the calls bucket does it: it
// fails when the record is no longer the abandoned one cl saw (another delivery took the
// call over, or finished it).
func (c *Memory) TakeOver(_ context.Context, id string, cl *claims.Claim) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = append(c.log, "take over "+id)
	if cur, ok := c.m[id]; cl.Abandoned == nil || !ok || cur.State != cl.Abandoned.State || cur.Owner != cl.Abandoned.Owner ||
		!cur.Started.Equal(cl.Abandoned.Started) || cur.Result != nil {
		return fmt.Errorf("claim %s: taken over or finished by another delivery", id)
	}
	c.put(id, claims.Record{State: "running", Owner: "me", Started: time.Now(), Attempts: cl.PriorAttempts, Sent: cl.PriorSent, FirstAttempt: cl.FirstAttempt})
	cl.Abandoned = nil
	return nil
}

// Finish implements claims.Store.
func (c *Memory) Finish(_ context.Context, id, digest string, r messages.ToolResult) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = append(c.log, "finish "+id)
	c.put(id, claims.Record{State: "done", Result: &r, Digest: digest})
	return nil
}

// Stored implements claims.Store.
func (c *Memory) Stored(_ context.Context, id string) (*messages.ToolResult, string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if rec := c.m[id]; rec.State == "done" {
		return rec.Result, rec.Digest, nil
	}
	return nil, "", nil
}

// Release implements claims.Store.
func (c *Memory) Release(_ context.Context, id string, p claims.Progress) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = append(c.log, "release "+id)
	c.put(id, claims.Record{State: "released", Attempts: p.Attempts, Sent: p.Sent, FirstAttempt: p.First})
	return nil
}
