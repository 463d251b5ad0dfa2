package policy

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/messages"
)

// Approvals keeps the calls that wait for a person's decision (rules with effect
// "approve") in a key-value bucket (messages.BucketApprovals), one record
// ([messages.Approval]) per call, keyed by its [ApprovalID]. A waiting call holds no
// worker and no delivery: the executor parks it here and acks its message; a decision —
// `toolbus approve`, `toolbus deny`, the console, or the rule's timeout — is a
// compare-and-set on the record, and [Approvals.Follow], in every executor, sends the
// decided call again to be answered: run once if approved, refused otherwise.
type Approvals struct {
	KV jetstream.KeyValue
	// Now is the clock; default time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Errors of [Approvals.Decide] and [Approvals.DecideAs].
var (
	ErrNoApproval = errors.New("no call waits for a decision under that id")
	ErrDecided    = errors.New("the call was decided already")
	// ErrOtherArguments: the decision names other arguments than the call's (the
	// person saw others, or the call was asked again with new ones).
	ErrOtherArguments = errors.New("the decision is for other arguments than those of the call waiting")
)

// ApprovalID is the id of the approval of a call: 16 hex digits of its id's hash, short
// enough to type.
func ApprovalID(callID string) string {
	sum := sha256.Sum256([]byte(callID))
	return hex.EncodeToString(sum[:8])
}

// validID reports whether id can be an [ApprovalID].
func validID(id string) bool {
	if len(id) != 16 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil
}

// ArgumentsHash is the sha256, in hex, of a call's arguments in compact form, which
// is the same however the call travelled (a JSON encoder compacts raw arguments).
func ArgumentsHash(args json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, args) != nil {
		b.Reset()
		b.Write(args)
	}
	sum := sha256.Sum256(b.Bytes())
	return hex.EncodeToString(sum[:])
}

func (a *Approvals) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// Get returns the approval id and its revision in the bucket; ErrNoApproval when there
// is none.
func (a *Approvals) Get(ctx context.Context, id string) (messages.Approval, uint64, error) {
	var rec messages.Approval
	if !validID(id) {
		return rec, 0, fmt.Errorf("%w: %q is not an approval id (16 hex digits, `toolbus approvals ls`)", ErrNoApproval, id)
	}
	e, err := a.KV.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return rec, 0, fmt.Errorf("%w: %s", ErrNoApproval, id)
	}
	if err != nil {
		return rec, 0, err
	}
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return rec, 0, fmt.Errorf("approval %s: %w", id, err)
	}
	return rec, e.Revision(), nil
}

// Ask records rec as waiting for a decision: a new record (revision 0), or one asked
// again over the record at revision (a changed policy or changed arguments). It
// returns jetstream.ErrKeyExists or ErrKeyRevisionMismatch when another executor wrote
// first.
func (a *Approvals) Ask(ctx context.Context, rec messages.Approval, revision uint64) error {
	rec.State, rec.DecidedBy, rec.Reason, rec.DecidedAt, rec.Requeued = messages.ApprovalPending, "", "", time.Time{}, false
	v, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if revision == 0 {
		_, err = a.KV.Create(ctx, rec.ID, v)
	} else {
		_, err = a.KV.Update(ctx, rec.ID, v, revision)
	}
	return err
}

// DecideAs decides, for the NATS user user, the call waiting under id, as a
// [messages.DecideRequest] on messages.DecideSubject asks: the executors answer those
// requests (toolbus.Serve wires it), and only they write the bucket. The decision is
// bound to the request an executor made — a record it wrote, whole (Wellformed) — to the
// tenants user may decide for (messages.UserTenant: another tenant's call is, to it, no
// call at all), and to the arguments the person saw (ErrOtherArguments); DecidedBy is
// user, never a name the request gives.
func (a *Approvals) DecideAs(ctx context.Context, user string, tenants []string, id string, req messages.DecideRequest) (messages.Approval, error) {
	rec, _, err := a.Get(ctx, id)
	if err != nil {
		return messages.Approval{}, err
	}
	if tenant, all := messages.UserTenant(user, tenants); !all && messages.Tenant(rec.Conversation) != tenant {
		return messages.Approval{}, fmt.Errorf("%w: %s", ErrNoApproval, id)
	}
	if why := Wellformed(rec); why != "" {
		if a.Logger != nil {
			a.Logger.Warn("a decision names an approval record no executor wrote; it is ignored", "approval", id, "user", user, "why", why)
		}
		return messages.Approval{}, fmt.Errorf("%w: %s", ErrNoApproval, id)
	}
	if req.ArgumentsSHA256 == "" {
		return messages.Approval{}, fmt.Errorf("%w: the decision names no arguments digest (the request's arguments_sha256 %s)", ErrOtherArguments, rec.ArgumentsSHA256)
	}
	return a.decide(ctx, id, req.Approve, user, req.Reason, req.ArgumentsSHA256)
}

// Wellformed says what is wrong with a record no executor could have written as it is
// ("" when nothing): its id, call id, conversation and arguments digest are all made of
// the call it holds.
func Wellformed(rec messages.Approval) string {
	switch {
	case rec.ID != ApprovalID(rec.Call.ID):
		return "its id is not its call's"
	case rec.CallID != rec.Call.ID || rec.Conversation != rec.Call.Conversation || rec.ResponseID != rec.Call.ResponseID:
		return "it names another call than the one it holds"
	case rec.ArgumentsSHA256 != ArgumentsHash(rec.Call.Arguments):
		return "its arguments digest is not its call's"
	case rec.Call.Error != nil:
		return "its call was answered by the parser"
	}
	return ""
}

// Decide approves or denies the call waiting under id, saying who and why; a call
// decided before (or expired) is ErrDecided, with the decision. It writes the bucket:
// in a deployment only the executors may, deciding what people ask with [DecideAs].
func (a *Approvals) Decide(ctx context.Context, id string, approve bool, by, reason string) (messages.Approval, error) {
	return a.decide(ctx, id, approve, by, reason, "")
}

// decide is Decide of the call whose arguments have the digest sha (any when "").
func (a *Approvals) decide(ctx context.Context, id string, approve bool, by, reason, sha string) (messages.Approval, error) {
	if !validID(id) {
		return messages.Approval{}, fmt.Errorf("%w: %q is not an approval id (16 hex digits, `toolbus approvals ls`)", ErrNoApproval, id)
	}
	return bus.UpdateJSON(ctx, a.KV, id, func(rec *messages.Approval) (bool, error) {
		switch {
		case rec.ID == "":
			return false, fmt.Errorf("%w: %s", ErrNoApproval, id)
		case rec.State != messages.ApprovalPending:
			return false, fmt.Errorf("%w: %s %s", ErrDecided, rec.State, decidedBy(*rec))
		case sha != "" && rec.ArgumentsSHA256 != sha:
			// Checked again on the record being changed: the call may have been asked
			// again, with other arguments, since it was read.
			return false, fmt.Errorf("%w: the call waits with arguments %s, the decision is for %s", ErrOtherArguments, rec.ArgumentsSHA256, sha)
		}
		rec.State = messages.ApprovalDenied
		if approve {
			rec.State = messages.ApprovalApproved
		}
		rec.DecidedBy, rec.Reason, rec.DecidedAt = by, reason, a.now()
		return true, nil
	})
}

func decidedBy(rec messages.Approval) string {
	s := ""
	if rec.DecidedBy != "" {
		s = "by " + rec.DecidedBy + " "
	}
	if !rec.DecidedAt.IsZero() {
		s += "at " + rec.DecidedAt.Format(time.RFC3339)
	}
	return s
}

// List returns every approval in the bucket, the oldest request first.
func (a *Approvals) List(ctx context.Context) ([]messages.Approval, error) {
	keys, err := a.KV.ListKeys(ctx)
	if err != nil {
		return nil, err
	}
	var out []messages.Approval
	for key := range keys.Keys() {
		rec, _, err := a.Get(ctx, key)
		if errors.Is(err, ErrNoApproval) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	slices.SortFunc(out, func(x, y messages.Approval) int {
		return cmp.Or(x.RequestedAt.Compare(y.RequestedAt), cmp.Compare(x.ID, y.ID))
	})
	return out, nil
}

// Shown is rec as people see it: the request and its decision, without the call.
func Shown(rec messages.Approval) messages.Decision {
	return messages.Decision{ApprovalRequest: rec.ApprovalRequest, State: rec.State, DecidedBy: rec.DecidedBy, Reason: rec.Reason, DecidedAt: rec.DecidedAt}
}

// Serve answers the decisions people send on messages.DecideSubject (queue group
// "executor": one executor answers each) until the subscription ends; tenants are the
// deployment's, for messages.UserTenant.
func (a *Approvals) Serve(nc *nats.Conn, tenants []string) (*nats.Subscription, error) {
	return nc.QueueSubscribe(messages.AllDecisions, "executor", func(m *nats.Msg) {
		reply := func(r messages.DecideReply) {
			b, _ := json.Marshal(r)
			_ = m.Respond(b)
		}
		user, id, ok := messages.DecideSubjectParts(m.Subject)
		var req messages.DecideRequest
		if !ok || json.Unmarshal(m.Data, &req) != nil {
			reply(messages.DecideReply{Error: &messages.ResultError{Code: messages.CodeInvalidArguments,
				Message: "a decision is a JSON object {approve, reason, arguments_sha256} on toolbus.decide.<user>.<approval id>"}})
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rec, err := a.DecideAs(ctx, user, tenants, id, req)
		if err != nil {
			code := messages.CodeInternal
			if errors.Is(err, ErrNoApproval) || errors.Is(err, ErrDecided) || errors.Is(err, ErrOtherArguments) {
				code = messages.CodeNotAllowed
			}
			reply(messages.DecideReply{Error: &messages.ResultError{Code: code, Message: err.Error()}})
			return
		}
		if a.Logger != nil {
			a.Logger.Info("approval decided", "approval", rec.ID, "state", rec.State, "by", rec.DecidedBy, "call", rec.CallID)
		}
		d := Shown(rec)
		reply(messages.DecideReply{Decision: &d})
	})
}

// Requeue sends a decided call again to be answered, with a message id that is the same
// in every executor that sends it (the record's revision), so that JetStream keeps one.
type Requeue func(ctx context.Context, rec messages.Approval, msgID string) error

// Follow watches the bucket until ctx ends: a waiting call past its deadline is decided
// "expired", and a decided call not yet sent again is sent with requeue and marked so.
// Every executor follows; compare-and-set and the message id make each happen once. A
// call decided while no executor ran is sent when the first starts.
func (a *Approvals) Follow(ctx context.Context, requeue Requeue) error {
	for failures := 0; ctx.Err() == nil; failures++ {
		w, err := a.KV.WatchAll(ctx)
		if err == nil {
			a.follow(ctx, w, requeue)
			_ = w.Stop()
			failures = 0
		} else if a.Logger != nil && failures%50 == 0 {
			a.Logger.Warn("cannot watch the approvals bucket; decided calls wait until it can", "err", err, "failures", failures+1)
		}
		select {
		case <-ctx.Done():
		case <-time.After(min(time.Duration(failures+1)*100*time.Millisecond, 2*time.Second)):
		}
	}
	return nil
}

func (a *Approvals) follow(ctx context.Context, w jetstream.KeyWatcher, requeue Requeue) {
	timers := map[string]*time.Timer{}
	defer func() {
		for _, t := range timers {
			t.Stop()
		}
	}()
	due := make(chan string, 64) // a record to look at again: its deadline passed, or a send failed
	later := func(key string, d time.Duration) {
		if t := timers[key]; t != nil {
			t.Stop()
		}
		timers[key] = time.AfterFunc(d, func() {
			select {
			case due <- key:
			case <-ctx.Done():
			}
		})
	}
	for {
		select {
		case <-ctx.Done():
			return
		case key := <-due:
			delete(timers, key)
			rec, rev, err := a.Get(ctx, key)
			if err != nil {
				if !errors.Is(err, ErrNoApproval) {
					later(key, time.Second)
				}
				continue
			}
			if retry := a.handle(ctx, rec, rev, requeue); retry > 0 {
				later(key, retry)
			}
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e == nil {
				continue // the records there were are all read
			}
			if t := timers[e.Key()]; t != nil {
				t.Stop()
				delete(timers, e.Key())
			}
			if e.Operation() != jetstream.KeyValuePut {
				continue
			}
			var rec messages.Approval
			if json.Unmarshal(e.Value(), &rec) != nil {
				continue
			}
			if retry := a.handle(ctx, rec, e.Revision(), requeue); retry > 0 {
				later(e.Key(), retry)
			}
		}
	}
}

// handle does what is due for rec at revision: expire it, or send it again. It returns
// when to look again (0: not before the record changes).
func (a *Approvals) handle(ctx context.Context, rec messages.Approval, rev uint64, requeue Requeue) time.Duration {
	switch {
	case rec.State == messages.ApprovalPending:
		if wait := rec.Deadline.Sub(a.now()); wait > 0 {
			return wait
		}
		rec.State, rec.DecidedAt = messages.ApprovalExpired, a.now()
		rec.Reason = fmt.Sprintf("nobody decided within %v", rec.Deadline.Sub(rec.RequestedAt).Round(time.Second))
		return a.write(ctx, rec, rev)
	case rec.Requeued:
		return 0
	}
	if why := Wellformed(rec); why != "" {
		// Not a record an executor wrote (only they may, in a deployment): its call is
		// no call anyone asked about, and never runs.
		if a.Logger != nil {
			a.Logger.Warn("an approval record no executor wrote is ignored; its call is not run", "approval", rec.ID, "call", rec.Call.ID, "conversation", rec.Call.Conversation, "why", why)
		}
		return 0
	}
	msgID := fmt.Sprintf("%s/approval/%d", rec.CallID, rev)
	if err := requeue(ctx, rec, msgID); err != nil {
		if a.Logger != nil && ctx.Err() == nil {
			a.Logger.Warn("a decided call could not be sent again; trying again", "approval", rec.ID, "call", rec.CallID, "err", err)
		}
		return time.Second
	}
	rec.Requeued = true
	return a.write(ctx, rec, rev)
}

// write stores rec over revision rev; losing to another writer is fine (the watch
// brings what it wrote), any other failure is tried again in a second.
func (a *Approvals) write(ctx context.Context, rec messages.Approval, rev uint64) time.Duration {
	v, err := json.Marshal(rec)
	if err != nil {
		return 0
	}
	_, err = a.KV.Update(ctx, rec.ID, v, rev)
	if err == nil || errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
		return 0
	}
	return time.Second
}
