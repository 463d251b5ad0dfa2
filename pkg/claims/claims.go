// Package claims records, per call id, that a call is being run and, once it is done, its
// result, in the calls key-value bucket: a redelivered call is answered from the record
// and never run twice, and a call whose executor died is known to have been started.
// The executor stage and the dead-letter stage share it.
package claims

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/messages"
)

// Record is what the calls bucket holds for one call id.
type Record struct {
	// State is "running" while an executor works on the call and "done" after.
	State   string    `json:"state"`
	Owner   string    `json:"owner,omitempty"`
	Started time.Time `json:"started,omitzero"`
	// Attempts counts the tries of earlier deliveries (while running: those before the
	// delivery that runs it), and Sent those of them that reached the tool (or may have).
	Attempts int `json:"attempts,omitempty"`
	Sent     int `json:"sent,omitempty"`
	// FirstAttempt is when the call was first tried: its time budget counts from there,
	// across deliveries.
	FirstAttempt time.Time `json:"first_attempt,omitzero"`
	// Result is the stored answer once done.
	Result *messages.ToolResult `json:"result,omitempty"`
	// Claim tells one claim from another: a random id of the Begin or TakeOver that
	// wrote it.
	Claim string `json:"claim,omitempty"`
	// Digest names the call the record is of: its tool and arguments ([Digest]). A
	// call id is its response's id and the call's index, so a response sent again
	// under a used id brings calls with used ids: the digest tells the same call
	// (answered with the stored result) from another one (refused, never run).
	Digest string `json:"digest,omitempty"`
}

// Digest names a call by its tool and arguments, as the calls bucket stores it.
func Digest(tool string, args []byte) string {
	h := sha256.New()
	h.Write([]byte(tool))
	h.Write([]byte{0})
	h.Write(args)
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0])[:16])
}

// Same reports whether a record's digest names the call of digest: a record written
// before records had digests names any.
func Same(recorded, digest string) bool { return recorded == "" || recorded == digest }

const (
	stateRunning  = "running"
	stateReleased = "released"
	stateDone     = "done"
)

// Claim is the outcome of [Store.Begin].
type Claim struct {
	// Result is set when the call was finished before: answer with it, do not run —
	// if Digest is the call's ([Same]); else the call id was used by another call.
	Result *messages.ToolResult
	Digest string
	// Abandoned is set when an earlier delivery claimed the call and never finished it:
	// its executor died, and whether the tool ran is unknown.
	Abandoned *Record
	// PriorAttempts counts the tries of earlier deliveries — those that failed safely,
	// and one for a delivery that was abandoned (it started the call) —, PriorSent those
	// of them that reached the tool (or may have: the abandoned one's), and FirstAttempt
	// is when the first of them started.
	PriorAttempts int
	PriorSent     int
	FirstAttempt  time.Time
	rev           uint64
	digest        string // the claimed call's
}

// Store keeps claims. [KV] is the deployment's; a stage's tests may keep them in memory.
type Store interface {
	// Begin claims call id, of digest (create-if-absent). When another delivery got
	// there first, the returned Claim says what it left behind.
	Begin(ctx context.Context, id, digest string) (Claim, error)
	// TakeOver claims an abandoned call for this executor, to run it again. It fails
	// when another executor took it over first.
	TakeOver(ctx context.Context, id string, cl *Claim) error
	// Finish stores the result of call id, of digest.
	Finish(ctx context.Context, id, digest string, r messages.ToolResult) error
	// Stored returns the result of call id and the digest of the call it answered, if
	// it was finished; a nil result if not.
	Stored(ctx context.Context, id string) (*messages.ToolResult, string, error)
	// Release gives up the claim of a call whose failure is safe to retry, so its next
	// delivery runs it again, recording what was tried so far.
	Release(ctx context.Context, id string, p Progress) error
}

// Progress is what the deliveries of a call tried so far.
type Progress struct {
	// Attempts counts the tries, and Sent those of them that reached the tool (or may
	// have).
	Attempts, Sent int
	// First is when the first started: the call's time budget counts from there.
	First time.Time
}

// KV keeps claims in the calls key-value bucket, with compare-and-set.
type KV struct {
	KV jetstream.KeyValue
	// Owner names this executor in its claims.
	Owner string
}

// Begin implements [Store].
func (c KV) Begin(ctx context.Context, id, digest string) (Claim, error) {
	key := bus.Key(id)
	mark := nuid.Next()
	rec, _ := json.Marshal(Record{State: stateRunning, Owner: c.Owner, Started: time.Now().UTC(), Claim: mark, Digest: digest})
	rev, err := c.KV.Create(ctx, key, rec)
	if err == nil {
		return Claim{rev: rev, digest: digest}, nil
	}
	if !errors.Is(err, jetstream.ErrKeyExists) {
		// The create may have been stored and its answer lost (the bucket's leader
		// stopped, the connection broke): if so the claim is this one's, and nobody
		// else may run the call — left alone, its next delivery would find it
		// "abandoned" by a live executor that never ran it, and answer outcome_unknown.
		if rev, ok := c.stored(ctx, key, mark); ok {
			return Claim{rev: rev, digest: digest}, nil
		}
		return Claim{}, fmt.Errorf("claim %s: %w", id, err)
	}
	prev, prevRev, err := bus.GetJSON[Record](ctx, c.KV, key)
	if err != nil {
		return Claim{}, fmt.Errorf("claim %s: %w", id, err)
	}
	switch {
	case prev.State == stateDone && prev.Result != nil:
		return Claim{Result: prev.Result, Digest: prev.Digest}, nil
	case prev.State == stateReleased:
		cl := Claim{rev: prevRev, PriorAttempts: prev.Attempts, PriorSent: prev.Sent, FirstAttempt: prev.FirstAttempt, digest: digest}
		if err := c.TakeOver(ctx, id, &cl); err != nil {
			return Claim{}, err
		}
		return cl, nil
	}
	// The abandoned delivery started the call: one attempt more than it found.
	return Claim{Abandoned: &prev, rev: prevRev, PriorAttempts: prev.Attempts + 1, PriorSent: prev.Sent + 1,
		FirstAttempt: cmp.Or(prev.FirstAttempt, prev.Started), digest: digest}, nil
}

// stored looks, for a few seconds while NATS does not answer, whether the record at key
// is the claim marked mark, and returns its revision.
func (c KV) stored(ctx context.Context, key, mark string) (uint64, bool) {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval, b.MaxElapsedTime = 50*time.Millisecond, time.Second, 10*time.Second
	var rev uint64
	var mine bool
	_ = backoff.Retry(func() error {
		rec, r, err := bus.GetJSON[Record](ctx, c.KV, key)
		if err != nil {
			return err
		}
		rev, mine = r, r != 0 && rec.Claim == mark
		return nil
	}, backoff.WithContext(b, ctx))
	return rev, mine
}

// TakeOver implements [Store].
func (c KV) TakeOver(ctx context.Context, id string, cl *Claim) error {
	// The attempts so far go on with the claim: if this executor stops too, the next
	// one counts on from them.
	rec, _ := json.Marshal(Record{State: stateRunning, Owner: c.Owner, Started: time.Now().UTC(), Attempts: cl.PriorAttempts, Sent: cl.PriorSent,
		FirstAttempt: cl.FirstAttempt.UTC(), Claim: nuid.Next(), Digest: cl.digest})
	rev, err := c.KV.Update(ctx, bus.Key(id), rec, cl.rev)
	if err != nil {
		return fmt.Errorf("take over %s: %w", id, err)
	}
	cl.rev, cl.Abandoned = rev, nil
	return nil
}

// Finish implements [Store].
func (c KV) Finish(ctx context.Context, id, digest string, r messages.ToolResult) error {
	rec, err := json.Marshal(Record{State: stateDone, Owner: c.Owner, Result: &r, Digest: digest})
	if err != nil {
		return err
	}
	if _, err := c.KV.Put(ctx, bus.Key(id), rec); err != nil {
		return fmt.Errorf("store result %s: %w", id, err)
	}
	return nil
}

// Stored implements [Store].
func (c KV) Stored(ctx context.Context, id string) (*messages.ToolResult, string, error) {
	rec, _, err := bus.GetJSON[Record](ctx, c.KV, bus.Key(id))
	if err != nil || rec.State != stateDone {
		return nil, "", err
	}
	return rec.Result, rec.Digest, nil
}

// Release implements [Store].
func (c KV) Release(ctx context.Context, id string, p Progress) error {
	rec, _ := json.Marshal(Record{State: stateReleased, Owner: c.Owner, Attempts: p.Attempts, Sent: p.Sent, FirstAttempt: p.First.UTC()})
	_, err := c.KV.Put(ctx, bus.Key(id), rec)
	return err
}
