package claims_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/claims"
	"github.com/toolbus/toolbus/pkg/messages"
)

// calls starts an embedded JetStream with toolbus's buckets and returns a way to open
// the calls bucket as one more executor: each on its own connection, as replicas are.
func calls(t *testing.T) func(owner string) claims.KV {
	t.Helper()
	url := bustest.Server(t)
	_, js := bustest.Connect(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := bus.Provision(ctx, js, bus.Topology{Memory: true}); err != nil {
		t.Fatal(err)
	}
	return func(owner string) claims.KV {
		t.Helper()
		_, js := bustest.Connect(t, url)
		kv, err := js.KeyValue(context.Background(), messages.BucketCalls)
		if err != nil {
			t.Fatal(err)
		}
		return claims.KV{KV: kv, Owner: owner}
	}
}

// stored reads the record the calls bucket holds for id.
func stored(t *testing.T, c claims.KV, id string) claims.Record {
	t.Helper()
	rec, rev, err := bus.GetJSON[claims.Record](context.Background(), c.KV, bus.Key(id))
	if err != nil || rev == 0 {
		t.Fatalf("record of %s: revision %d, %v", id, rev, err)
	}
	return rec
}

func result(id, text string) messages.ToolResult {
	return messages.ToolResult{CallID: id, ResponseID: "r", Conversation: "c", Count: 1, Tool: "create_ticket",
		Success: true, Result: json.RawMessage(text), Attempts: 1}
}

// What a delivery of a call finds, after what earlier deliveries (other executors) left:
// nothing (it claims and runs), a stored result (it answers with it), a claim never
// finished (abandoned: its executor died, the tool may have run), a released claim (a
// safe failure: it runs again, counting the earlier attempts from the first).
func TestBegin(t *testing.T) {
	first := time.Date(2026, 11, 26, 21, 0, 0, 0, time.UTC)
	long := "c/" + strings.Repeat("response id with spaces ", 12) + "/0" // not a valid key: hashed
	tests := []struct {
		name string
		id   string
		// before is what earlier executors did with the call, in order.
		before        func(ctx context.Context, t *testing.T, other claims.KV, id string)
		wantResult    string // the stored result answered, "" none
		wantAbandoned string // the owner of the abandoned claim, "" none
		wantPrior     int
		wantFirst     time.Time
		wantErr       bool
	}{
		{name: "a new call is claimed to run", id: "c/r/0"},
		{name: "a finished call is answered from its stored result", id: "c/r/1",
			before: func(ctx context.Context, t *testing.T, other claims.KV, id string) {
				if _, err := other.Begin(ctx, id, ""); err != nil {
					t.Fatal(err)
				}
				if err := other.Finish(ctx, id, "", result(id, `{"ticket":42}`)); err != nil {
					t.Fatal(err)
				}
			},
			wantResult: `{"ticket":42}`},
		{name: "a claim never finished is abandoned", id: "c/r/2",
			before: func(ctx context.Context, t *testing.T, other claims.KV, id string) {
				if _, err := other.Begin(ctx, id, ""); err != nil {
					t.Fatal(err)
				}
			},
			wantAbandoned: "executor-a"},
		{name: "a released claim runs again, counting earlier attempts", id: "c/r/3",
			before: func(ctx context.Context, t *testing.T, other claims.KV, id string) {
				if _, err := other.Begin(ctx, id, ""); err != nil {
					t.Fatal(err)
				}
				if err := other.Release(ctx, id, claims.Progress{Attempts: 3, Sent: 3, First: first}); err != nil {
					t.Fatal(err)
				}
			},
			wantPrior: 3, wantFirst: first},
		{name: "an abandoned claim the dead-letter stage answered is answered from it", id: "c/r/4",
			before: func(ctx context.Context, t *testing.T, other claims.KV, id string) {
				if _, err := other.Begin(ctx, id, ""); err != nil {
					t.Fatal(err)
				}
				dl := claims.KV{KV: other.KV, Owner: "deadletter"}
				cl, err := dl.Begin(ctx, id, "")
				if err != nil || cl.Abandoned == nil {
					t.Fatalf("dead-letter stage: %+v, %v; want the abandoned claim", cl, err)
				}
				r := result(id, "").Fail(messages.Errorf(messages.CodeOutcomeUnknown, "started, never finished"))
				if err := dl.Finish(ctx, id, "", r); err != nil {
					t.Fatal(err)
				}
			},
			wantResult: "outcome_unknown"},
		{name: "an id that is not a valid key is claimed under its hash", id: long,
			before: func(ctx context.Context, t *testing.T, other claims.KV, id string) {
				if _, err := other.Begin(ctx, id, ""); err != nil {
					t.Fatal(err)
				}
				if err := other.Finish(ctx, id, "", result(id, `"long"`)); err != nil {
					t.Fatal(err)
				}
			},
			wantResult: `"long"`},
		{name: "a hashed id one byte longer is another call", id: long + "1"},
		{name: "a cancelled context claims nothing", id: "c/r/cancelled", wantErr: true},
	}
	open := calls(t)
	a, b := open("executor-a"), open("executor-b")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if tt.before != nil {
				tt.before(ctx, t, a, tt.id)
			}
			if tt.wantErr {
				cancel()
			}
			cl, err := b.Begin(ctx, tt.id, "")
			if (err != nil) != tt.wantErr {
				t.Fatalf("Begin: %v, want error %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			switch {
			case tt.wantResult != "":
				if cl.Result == nil || cl.Abandoned != nil {
					t.Fatalf("claim %+v, want the stored result", cl)
				}
				got := string(cl.Result.Result)
				if cl.Result.Error != nil {
					got = string(cl.Result.Error.Code)
				}
				if got != tt.wantResult || cl.Result.CallID != tt.id {
					t.Errorf("stored result %s of %q, want %s of %q", got, cl.Result.CallID, tt.wantResult, tt.id)
				}
			case tt.wantAbandoned != "":
				if cl.Result != nil || cl.Abandoned == nil || cl.Abandoned.Owner != tt.wantAbandoned || cl.Abandoned.Started.IsZero() {
					t.Fatalf("claim %+v (abandoned %+v), want the claim %s left", cl, cl.Abandoned, tt.wantAbandoned)
				}
				// The abandoned claim is left as it was: whether the tool ran is unknown.
				if rec := stored(t, b, tt.id); rec.State != "running" || rec.Owner != tt.wantAbandoned {
					t.Errorf("record %+v, want %s's running claim kept", rec, tt.wantAbandoned)
				}
			default:
				if cl.Result != nil || cl.Abandoned != nil {
					t.Fatalf("claim %+v, want one to run", cl)
				}
				if rec := stored(t, b, tt.id); rec.State != "running" || rec.Owner != "executor-b" || rec.Started.IsZero() {
					t.Errorf("record %+v, want executor-b's running claim", rec)
				}
			}
			if tt.wantAbandoned != "" {
				// The abandoned delivery started the call: one attempt, from then.
				tt.wantPrior, tt.wantFirst = 1, cl.Abandoned.Started
			}
			if cl.PriorAttempts != tt.wantPrior || !cl.FirstAttempt.Equal(tt.wantFirst) {
				t.Errorf("prior attempts %d from %v, want %d from %v", cl.PriorAttempts, cl.FirstAttempt, tt.wantPrior, tt.wantFirst)
			}
		})
	}
}

// A claimed call's result is stored: every later delivery, on any executor, answers with
// it and runs nothing — also after a NATS reconnect (a new connection).
func TestFinishedIsAnsweredFromTheStore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open := calls(t)
	a := open("executor-a")
	const id = "c/r/0"
	if cl, err := a.Begin(ctx, id, ""); err != nil || cl.Result != nil || cl.Abandoned != nil {
		t.Fatalf("first claim: %+v, %v", cl, err)
	}
	want := result(id, `{"ticket":42}`)
	want.Stored = &messages.StoredResult{Bucket: messages.BucketResults, Name: id, Size: 12, SHA256: "ab"}
	if err := a.Finish(ctx, id, "", want); err != nil {
		t.Fatal(err)
	}
	for _, owner := range []string{"executor-a", "executor-b", "executor-c"} {
		cl, err := open(owner).Begin(ctx, id, "")
		if err != nil || cl.Result == nil || cl.Abandoned != nil {
			t.Fatalf("%s: %+v, %v; want the stored result", owner, cl, err)
		}
		got, _ := json.Marshal(cl.Result)
		wantJSON, _ := json.Marshal(want)
		if string(got) != string(wantJSON) {
			t.Errorf("%s answered %s, want %s", owner, got, wantJSON)
		}
	}
	if rec := stored(t, a, id); rec.State != "done" || rec.Result == nil {
		t.Errorf("record %+v, want done with its result", rec)
	}
}

// Executors racing to begin a new call: exactly one claims it, every other finds its claim.
func TestBeginRace(t *testing.T) {
	open := calls(t)
	const executors = 6
	kvs := make([]claims.KV, executors)
	for i := range kvs {
		kvs[i] = open(fmt.Sprintf("executor-%d", i))
	}
	for round := range 10 {
		id := fmt.Sprintf("c/r/%d", round)
		claimsOf := race(t, executors, func(ctx context.Context, i int) (claims.Claim, error) { return kvs[i].Begin(ctx, id, "") })
		won := 0
		for i, c := range claimsOf {
			switch {
			case c.err != nil:
				t.Errorf("round %d, executor %d: %v", round, i, c.err)
			case c.claim.Abandoned == nil && c.claim.Result == nil:
				won++
			}
		}
		if won != 1 {
			t.Errorf("round %d: %d executors claimed the call, want exactly 1", round, won)
		}
	}
}

// Two executors find the same abandoned claim (its executor died) of a call that is safe
// to run again, and both take it over at once: exactly one wins and runs it; the other
// is refused.
func TestTakeOverRace(t *testing.T) {
	open := calls(t)
	dead, a, b := open("executor-dead"), open("executor-a"), open("executor-b")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for round := range 10 {
		id := fmt.Sprintf("c/r/%d", round)
		if _, err := dead.Begin(ctx, id, ""); err != nil {
			t.Fatal(err)
		}
		takers := []claims.KV{a, b}
		found := make([]claims.Claim, len(takers))
		for i, c := range takers {
			cl, err := c.Begin(ctx, id, "")
			if err != nil || cl.Abandoned == nil || cl.Abandoned.Owner != "executor-dead" {
				t.Fatalf("round %d, %s: %+v, %v; want the dead executor's claim", round, c.Owner, cl, err)
			}
			found[i] = cl
		}
		outcomes := race(t, len(takers), func(ctx context.Context, i int) (claims.Claim, error) {
			err := takers[i].TakeOver(ctx, id, &found[i])
			return found[i], err
		})
		var winners []string
		for i, o := range outcomes {
			if o.err == nil {
				winners = append(winners, takers[i].Owner)
				if o.claim.Abandoned != nil {
					t.Errorf("round %d: %s took over but its claim still says abandoned", round, takers[i].Owner)
				}
			}
		}
		if len(winners) != 1 {
			t.Fatalf("round %d: %v took over the call, want exactly one executor", round, winners)
		}
		if rec := stored(t, a, id); rec.State != "running" || rec.Owner != winners[0] {
			t.Errorf("round %d: record %+v, want %s's claim", round, rec, winners[0])
		}
		// The loser, delivered again, finds the winner's claim, not one to run.
		loser := a
		if winners[0] == a.Owner {
			loser = b
		}
		if cl, err := loser.Begin(ctx, id, ""); err != nil || cl.Abandoned == nil || cl.Abandoned.Owner != winners[0] {
			t.Errorf("round %d: %s begins again: %+v, %v; want %s's claim", round, loser.Owner, cl, err, winners[0])
		}
	}
}

// An executor finds a claim abandoned, but its executor was alive after all and finishes
// the call before the takeover: the takeover is refused and the stored result kept.
func TestTakeOverAfterFinishIsRefused(t *testing.T) {
	open := calls(t)
	slow, a, b := open("executor-slow"), open("executor-a"), open("executor-b")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const id = "c/late/0"
	if _, err := slow.Begin(ctx, id, ""); err != nil {
		t.Fatal(err)
	}
	cl, err := a.Begin(ctx, id, "")
	if err != nil || cl.Abandoned == nil {
		t.Fatalf("%+v, %v; want the claim abandoned", cl, err)
	}
	if err := slow.Finish(ctx, id, "", result(id, `{"ticket":7}`)); err != nil {
		t.Fatal(err)
	}
	if err := a.TakeOver(ctx, id, &cl); err == nil {
		t.Fatal("took over a call finished since its claim was read")
	}
	if got, err := b.Begin(ctx, id, ""); err != nil || got.Result == nil || string(got.Result.Result) != `{"ticket":7}` {
		t.Errorf("after the refused takeover: %+v, %v; want the stored result", got, err)
	}
}

// Two executors deliver a released call (a safe failure) at once: exactly one runs it.
func TestReleasedRace(t *testing.T) {
	open := calls(t)
	kvs := []claims.KV{open("executor-a"), open("executor-b"), open("executor-c")}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for round := range 10 {
		id := fmt.Sprintf("c/r/%d", round)
		if _, err := kvs[0].Begin(ctx, id, ""); err != nil {
			t.Fatal(err)
		}
		if err := kvs[0].Release(ctx, id, claims.Progress{Attempts: 2, Sent: 2, First: time.Now()}); err != nil {
			t.Fatal(err)
		}
		outcomes := race(t, len(kvs), func(ctx context.Context, i int) (claims.Claim, error) { return kvs[i].Begin(ctx, id, "") })
		runs := 0
		for _, o := range outcomes {
			if o.err == nil && o.claim.Abandoned == nil && o.claim.Result == nil {
				runs++
				if o.claim.PriorAttempts != 2 {
					t.Errorf("round %d: prior attempts %d, want 2", round, o.claim.PriorAttempts)
				}
			}
		}
		if runs != 1 {
			t.Errorf("round %d: %d executors run the released call, want exactly 1", round, runs)
		}
	}
}

type outcome struct {
	claim claims.Claim
	err   error
}

// race runs f for n executors at once, each on its own goroutine, released together.
func race(t *testing.T, n int, f func(ctx context.Context, i int) (claims.Claim, error)) []outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := make([]outcome, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			out[i].claim, out[i].err = f(ctx, i)
		}()
	}
	close(start)
	wg.Wait()
	return out
}

// The record is what another version of toolbus reads: its field names are kept.
func TestRecordJSON(t *testing.T) {
	first := time.Date(2026, 11, 26, 21, 0, 0, 0, time.UTC)
	b, err := json.Marshal(claims.Record{State: "released", Owner: "x", Attempts: 2, FirstAttempt: first})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"state":"released","owner":"x","attempts":2,"first_attempt":"2026-11-26T21:00:00Z"}`; string(b) != want {
		t.Errorf("%s, want %s", b, want)
	}
}

// lostAnswer is a calls bucket whose creates are stored but answered with an error, as
// when the bucket's leader stops between storing and answering.
type lostAnswer struct {
	jetstream.KeyValue
}

func (l lostAnswer) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	if _, err := l.KeyValue.Create(ctx, key, value, opts...); err != nil {
		return 0, err
	}
	return 0, nats.ErrTimeout
}

// A claim whose create was stored but not answered is this executor's: Begin finds it
// and runs the call, rather than leave a "running" claim nobody runs, which the next
// delivery would answer outcome_unknown. Another executor's claim is not taken for it.
func TestBeginWhoseAnswerWasLost(t *testing.T) {
	open := calls(t)
	a := open("executor-a")
	lost := claims.KV{KV: lostAnswer{a.KV}, Owner: "executor-a"}
	ctx := context.Background()
	cl, err := lost.Begin(ctx, "c/r/0", "")
	if err != nil || cl.Abandoned != nil || cl.Result != nil {
		t.Fatalf("a claim stored but not answered: %+v, %v; want it held", cl, err)
	}
	res := messages.ToolResult{CallID: "c/r/0", Success: true, Result: json.RawMessage(`"done"`)}
	if err := lost.Finish(ctx, "c/r/0", "", res); err != nil {
		t.Fatal(err)
	}
	// Another executor's running claim stays theirs: an error, not a claim.
	b := open("executor-b")
	if _, err := b.Begin(ctx, "c/r/1", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := lost.Begin(ctx, "c/r/1", ""); err != nil {
		t.Fatal(err) // an ordinary conflict: ErrKeyExists, answered with the claim found
	}
	if cl, err := (claims.KV{KV: failing{a.KV}, Owner: "executor-a"}).Begin(ctx, "c/r/1", ""); err == nil {
		t.Errorf("a create that failed over another's claim: %+v, want an error", cl)
	}
}

// failing is a calls bucket whose creates fail without storing anything.
type failing struct {
	jetstream.KeyValue
}

func (f failing) Create(context.Context, string, []byte, ...jetstream.KVCreateOpt) (uint64, error) {
	return 0, nats.ErrTimeout
}

// The record of a call names the call by its digest, from its claim through a release
// and a take-over to its result: a later call under the same id is told the same call
// (its digest) or another (its response's id used again), and Stored reads the result
// and digest without claiming.
func TestTheRecordNamesItsCall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open := calls(t)
	a, b := open("executor-a"), open("executor-b")
	const id = "c/r/1"
	mine := claims.Digest("pay", []byte(`{"amount":1}`))
	if other := claims.Digest("pay", []byte(`{"amount":2}`)); other == mine || claims.Same(mine, other) || !claims.Same("", other) {
		t.Fatalf("digests %s and %s", mine, other)
	}
	if res, _, err := a.Stored(ctx, id); err != nil || res != nil {
		t.Fatalf("stored before any claim: %+v, %v", res, err)
	}
	if _, err := a.Begin(ctx, id, mine); err != nil {
		t.Fatal(err)
	}
	if res, _, err := a.Stored(ctx, id); err != nil || res != nil {
		t.Fatalf("stored while running: %+v, %v", res, err)
	}
	if err := a.Release(ctx, id, claims.Progress{Attempts: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Begin(ctx, id, mine); err != nil { // takes the released call over
		t.Fatal(err)
	}
	if err := b.Finish(ctx, id, mine, result(id, `"paid"`)); err != nil {
		t.Fatal(err)
	}
	cl, err := a.Begin(ctx, id, claims.Digest("pay", []byte(`{"amount":2}`)))
	if err != nil || cl.Result == nil || cl.Digest != mine {
		t.Fatalf("a later call under the id: %+v, %v; want the result and the digest of the call it answered", cl, err)
	}
	res, digest, err := b.Stored(ctx, id)
	if err != nil || res == nil || string(res.Result) != `"paid"` || digest != mine {
		t.Fatalf("stored: %+v %q, %v", res, digest, err)
	}
}
