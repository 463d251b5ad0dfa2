package policy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/policy"
)

// approvalsBucket is two replicas' views of one approvals bucket on a real server.
func approvalsBucket(t *testing.T) (*policy.Approvals, *policy.Approvals) {
	t.Helper()
	url := bustest.Server(t)
	var as []*policy.Approvals
	for range 2 {
		_, js := bustest.Connect(t, url)
		kv, err := js.CreateOrUpdateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: messages.BucketApprovals})
		if err != nil {
			t.Fatal(err)
		}
		as = append(as, &policy.Approvals{KV: kv})
	}
	return as[0], as[1]
}

// asked records a call of conversation waiting for approval, as an executor does.
func asked(t *testing.T, a *policy.Approvals, conversation, args string) messages.Approval {
	t.Helper()
	call := messages.ToolCall{ID: messages.CallID(conversation, "r1", 0), ResponseID: "r1", Conversation: conversation, Count: 1,
		Tool: "pay", Arguments: json.RawMessage(args)}
	req := messages.ApprovalRequest{ID: policy.ApprovalID(call.ID), CallID: call.ID, Conversation: conversation, ResponseID: "r1",
		Tool: "pay", Arguments: call.Arguments, ArgumentsSHA256: policy.ArgumentsHash(call.Arguments), Rule: "ask", Revision: "rev1",
		RequestedAt: time.Now(), Deadline: time.Now().Add(time.Hour)}
	rec := messages.Approval{ApprovalRequest: req, Call: call}
	if err := a.Ask(context.Background(), rec, 0); err != nil {
		t.Fatal(err)
	}
	return rec
}

// Many people deciding one call at once, through two replicas: exactly one decision
// wins, the others are ErrDecided, and the record holds the winner's.
func TestConcurrentDecisionsOneWins(t *testing.T) {
	a, b := approvalsBucket(t)
	rec := asked(t, a, "c1", `{"amount": 5}`)
	var wins atomic.Int32
	var winner atomic.Value
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := a
			if i%2 == 1 {
				r = b
			}
			by := fmt.Sprintf("user%d", i)
			_, err := r.DecideAs(context.Background(), by, nil, rec.ID, messages.DecideRequest{Approve: i%3 != 0, ArgumentsSHA256: rec.ArgumentsSHA256})
			switch {
			case err == nil:
				wins.Add(1)
				winner.Store(by)
			case !errors.Is(err, policy.ErrDecided):
				t.Errorf("%s: %v", by, err)
			}
		}()
	}
	wg.Wait()
	got, _, err := a.Get(context.Background(), rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if wins.Load() != 1 || got.DecidedBy != winner.Load() || got.State == messages.ApprovalPending {
		t.Fatalf("%d decisions won; the record says %s by %s (the winner: %v)", wins.Load(), got.State, got.DecidedBy, winner.Load())
	}
}

// An expiry (the deadline passed, Follow's write) or a re-ask racing a decision never
// undoes it: the record is never pending or expired again once decided.
func TestDecisionOutlastsExpiryAndReask(t *testing.T) {
	for round := range 20 {
		a, b := approvalsBucket(t)
		rec := asked(t, a, "c1", `{"amount": 5}`)
		_, rev, err := a.Get(context.Background(), rec.ID)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Add(3)
		var decideErr error
		go func() {
			defer wg.Done()
			_, decideErr = b.DecideAs(context.Background(), "alice", nil, rec.ID, messages.DecideRequest{Approve: true, ArgumentsSHA256: rec.ArgumentsSHA256})
		}()
		go func() { // an executor asking again over the revision it read
			defer wg.Done()
			_ = a.Ask(context.Background(), rec, rev)
		}()
		go func() { // an expiry written over the revision it read
			defer wg.Done()
			expired := rec
			expired.State = messages.ApprovalExpired
			v, _ := json.Marshal(expired)
			_, _ = a.KV.Update(context.Background(), rec.ID, v, rev)
		}()
		wg.Wait()
		got, _, err := a.Get(context.Background(), rec.ID)
		if err != nil {
			t.Fatal(err)
		}
		if decideErr == nil && got.State != messages.ApprovalApproved {
			t.Fatalf("round %d: the decision was accepted, but the record is %s", round, got.State)
		}
	}
}

// A decision is bound to its request: a tenant's user decides its tenant's calls only
// (another's is no call to it), the arguments the person saw (ErrOtherArguments), and a
// record an executor wrote (one whose call is not the one it names is ignored); the
// decider is the user the subject names.
func TestDecideAsBindsTheDecision(t *testing.T) {
	a, _ := approvalsBucket(t)
	tenants := []string{"", "acme", "globex"}
	rec := asked(t, a, "globex.c1", `{"amount": 424242, "to": "mallory"}`)
	ctx := context.Background()
	approve := messages.DecideRequest{Approve: true, ArgumentsSHA256: rec.ArgumentsSHA256}
	if _, err := a.DecideAs(ctx, "acme", tenants, rec.ID, approve); !errors.Is(err, policy.ErrNoApproval) {
		t.Errorf("acme decided globex's call: %v", err)
	}
	if _, err := a.DecideAs(ctx, "orchestrator", tenants, rec.ID, approve); !errors.Is(err, policy.ErrNoApproval) {
		t.Errorf("the default tenant decided globex's call: %v", err)
	}
	other := messages.DecideRequest{Approve: true, ArgumentsSHA256: policy.ArgumentsHash(json.RawMessage(`{"amount": 1}`))}
	if _, err := a.DecideAs(ctx, "globex", tenants, rec.ID, other); !errors.Is(err, policy.ErrOtherArguments) {
		t.Errorf("a decision on other arguments: %v", err)
	}
	if _, err := a.DecideAs(ctx, "globex", tenants, rec.ID, messages.DecideRequest{Approve: true}); !errors.Is(err, policy.ErrOtherArguments) {
		t.Errorf("a decision naming no arguments: %v", err)
	}
	got, _, _ := a.Get(ctx, rec.ID)
	if got.State != messages.ApprovalPending {
		t.Fatalf("after refused decisions the call is %s", got.State)
	}
	d, err := a.DecideAs(ctx, "globex", tenants, rec.ID, approve)
	if err != nil || d.DecidedBy != "globex" || d.State != messages.ApprovalApproved {
		t.Fatalf("globex's decision: %+v, %v", d, err)
	}

	// A record whose call is not the one it names (written by hand into the bucket):
	// no decision takes it, and Follow never sends its call.
	forged := asked(t, a, "acme.c2", `{"amount": 1}`)
	forged.Call.Arguments = json.RawMessage(`{"amount": 424242}`)
	forged.State = messages.ApprovalApproved
	v, _ := json.Marshal(forged)
	if _, err := a.KV.Put(ctx, forged.ID, v); err != nil {
		t.Fatal(err)
	}
	if why := policy.Wellformed(forged); why == "" {
		t.Fatal("a record holding other arguments than its digest is well-formed")
	}
	sent := make(chan messages.Approval, 4)
	fctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_ = a.Follow(fctx, func(_ context.Context, r messages.Approval, _ string) error {
		sent <- r
		return nil
	})
	close(sent)
	for r := range sent {
		if r.ID == forged.ID {
			t.Errorf("Follow sent the forged record's call %s", r.Call.Arguments)
		}
	}
}
