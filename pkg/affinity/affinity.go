// Package affinity keeps every call of a conversation to a conversation-scoped MCP server
// on the one executor replica that holds the conversation's session with that server,
// whichever replica pulled the call. It owns one idea: who holds a (server, conversation)
// session, recorded in JetStream, and how a call reaches the holder.
//
// The holder of a session is recorded in the toolbus_owners bucket (key: server and
// conversation, value: a [Lease]), written with compare-and-set only: the first replica
// to call creates the record and holds the session; another replica that pulls a call
// of the conversation sends it to the holder as a NATS request on the holder's own
// subject (messages.ExecSubject) and publishes what the holder answered. A holder that
// is gone (the request finds no responder: its process ended, its connection dropped)
// is replaced by the replica that found out, with compare-and-set, and the record says
// why the session was lost, so that the next call's result can tell the model its state
// was reset. No lock is held across calls and no replica needs another's memory.
package affinity

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/messages"
)

// Lease is the record of a conversation's session with a server.
type Lease struct {
	// Owner is the executor replica that holds the session.
	Owner string `json:"owner"`
	// Opened: a session of the conversation was opened (by any replica) and has state
	// the model may rely on.
	Opened bool `json:"opened,omitempty"`
	// Ended says why the conversation's last session was lost, until a new one opens.
	Ended string `json:"ended,omitempty"`

	// Mine: the caller's replica holds the session.
	Mine     bool `json:"-"`
	key      string
	revision uint64
}

// touchAfter is how old a held record gets before its holder writes it again, well within
// the bucket's age limit (a day).
const touchAfter = time.Hour

// ErrGone is returned by [Owners.Forward] when the holder of a session cannot be reached.
var ErrGone = errors.New("the executor holding the session is gone")

// ErrNoAnswer is returned by [Owners.Forward] when the holder did not answer in time.
var ErrNoAnswer = errors.New("no answer from the executor holding the session")

// Owners records and reaches the holders of sessions. Self names this replica.
type Owners struct {
	KV   jetstream.KeyValue
	Conn *nats.Conn
	Self string
	// Ping is how often a forwarded call's holder is checked while the call runs there.
	// Default 2s.
	Ping   time.Duration
	Logger *slog.Logger
}

// Key is the bucket key of a conversation's session with a server: both names encoded
// so that any server name (spaces, dots) makes a valid key.
func Key(server, conversation string) string {
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(server)) + "." + enc.EncodeToString([]byte(conversation))
}

// Acquire returns the lease of a conversation's session with a server, taking it when
// nobody holds it.
func (o *Owners) Acquire(ctx context.Context, server, conversation string) (Lease, error) {
	key := Key(server, conversation)
	for {
		e, err := o.KV.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			l := Lease{Owner: o.Self}
			rev, err := o.KV.Create(ctx, key, l.encode())
			if errors.Is(err, jetstream.ErrKeyExists) {
				continue // another replica took it first
			}
			if err != nil {
				return Lease{}, err
			}
			l.Mine, l.key, l.revision = true, key, rev
			return l, nil
		}
		if err != nil {
			return Lease{}, err
		}
		var l Lease
		if err := json.Unmarshal(e.Value(), &l); err != nil || l.Owner == "" {
			l = Lease{} // unreadable: taken over below as a gone holder's
		}
		l.key, l.revision, l.Mine = key, e.Revision(), l.Owner == o.Self
		if l.Mine && time.Since(e.Created()) > touchAfter {
			// The bucket forgets a record a day after its last write: a conversation in
			// use keeps its record by the holder writing it again now and then.
			if rev, err := o.KV.Update(ctx, key, l.encode(), l.revision); err == nil {
				l.revision = rev
			}
		}
		return l, nil
	}
}

// TakeOver makes this replica the holder of l, whose holder is gone; the lease says the
// session was lost. When another replica took it over first, its lease is returned.
func (o *Owners) TakeOver(ctx context.Context, l Lease, server, conversation string) (Lease, error) {
	next := Lease{Owner: o.Self, Opened: l.Opened, Ended: l.Ended}
	if l.Opened && next.Ended == "" {
		next.Ended = fmt.Sprintf("the executor that held it (%s) stopped", l.Owner)
	}
	rev, err := o.KV.Update(ctx, l.key, next.encode(), l.revision)
	if err != nil {
		if isConflict(err) {
			return o.Acquire(ctx, server, conversation)
		}
		return Lease{}, err
	}
	next.Mine, next.key, next.revision = true, l.key, rev
	o.logger().Info("took over a conversation's session", "server", server, "conversation", conversation, "from", l.Owner)
	return next, nil
}

// Opened records that this replica opened the conversation's session described by l:
// later sessions of the conversation are resets.
func (o *Owners) Opened(ctx context.Context, l Lease) {
	if l.Opened && l.Ended == "" {
		return
	}
	next := Lease{Owner: o.Self, Opened: true}
	if _, err := o.KV.Update(ctx, l.key, next.encode(), l.revision); err != nil && !isConflict(err) {
		o.logger().Warn("recording a conversation's session", "err", err)
	}
}

func (l Lease) encode() []byte {
	b, _ := json.Marshal(l)
	return b
}

func isConflict(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, jetstream.ErrKeyExists) ||
		(errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence)
}

// Headers of a forwarded call.
const (
	headerSubject   = "Toolbus-Forwarded-Subject"
	headerDelivered = "Toolbus-Forwarded-Delivered"
	headerLast      = "Toolbus-Forwarded-Last"
	headerPing      = "Toolbus-Ping"
)

// reply is the holder's answer to a forwarded call: the messages to publish, or the
// handler's error (with its redelivery delay when it asked for one).
type reply struct {
	Out     []outgoing `json:"out,omitempty"`
	Err     string     `json:"err,omitempty"`
	RetryMS int64      `json:"retry_ms,omitempty"`
	Retry   bool       `json:"retry,omitempty"`
}

type outgoing struct {
	Subject string   `json:"subject"`
	Meta    bus.Meta `json:"meta"`
	Body    []byte   `json:"body"`
}

// Forward runs the delivery d on the holder owner and returns what it answered, as the
// handler would have. While the call runs there the holder is pinged. [ErrGone] when the
// holder cannot be reached — no responder to the call, or to three pings in a row (a
// reconnecting holder misses one) — before or during the call; [ErrNoAnswer] when no
// answer came within wait (an answer lost with a connection): the caller hands the
// delivery back, and its next delivery finds the call's claim or runs it again.
func (o *Owners) Forward(ctx context.Context, owner string, d *bus.Delivery, wait time.Duration) ([]bus.Outgoing, error) {
	msg := nats.NewMsg(messages.ExecSubject(owner))
	msg.Data = d.Data
	for k, v := range d.Header {
		msg.Header[k] = v
	}
	msg.Header.Set(headerSubject, d.Subject)
	msg.Header.Set(headerDelivered, strconv.Itoa(d.Delivered))
	if d.Last {
		msg.Header.Set(headerLast, "true")
	}
	bus.InjectTrace(ctx, msg.Header)

	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel() // ends the request below when the holder is found gone
	type answer struct {
		m   *nats.Msg
		err error
	}
	answers := make(chan answer, 1)
	go func() {
		m, err := o.Conn.RequestMsgWithContext(ctx, msg)
		answers <- answer{m, err}
	}()
	ping := time.NewTicker(o.ping())
	defer ping.Stop()
	for {
		select {
		case a := <-answers:
			switch {
			case errors.Is(a.err, nats.ErrNoResponders):
				if o.alive(ctx, owner) {
					return nil, fmt.Errorf("%w: the holder %s did not take the call", ErrNoAnswer, owner)
				}
				return nil, fmt.Errorf("%w: %s", ErrGone, owner)
			case errors.Is(a.err, context.DeadlineExceeded):
				return nil, fmt.Errorf("%w from %s within %v", ErrNoAnswer, owner, wait)
			case a.err != nil:
				return nil, a.err
			}
			return decodeReply(a.m.Data)
		case <-ping.C:
			if !o.alive(ctx, owner) && ctx.Err() == nil {
				return nil, fmt.Errorf("%w: %s stopped while it ran the call", ErrGone, owner)
			}
		}
	}
}

// alive pings owner up to three times, 300 ms apart, until one answers: a holder whose
// connection is being re-established misses a ping or two, and is not gone.
func (o *Owners) alive(ctx context.Context, owner string) bool {
	for try := range 3 {
		if try > 0 {
			select {
			case <-ctx.Done():
				return true // not known to be gone
			case <-time.After(300 * time.Millisecond):
			}
		}
		p := nats.NewMsg(messages.ExecSubject(owner))
		p.Header.Set(headerPing, "1")
		pctx, cancel := context.WithTimeout(ctx, o.ping())
		_, err := o.Conn.RequestMsgWithContext(pctx, p)
		cancel()
		if !errors.Is(err, nats.ErrNoResponders) {
			return true
		}
	}
	return false
}

func (o *Owners) ping() time.Duration {
	if o.Ping > 0 {
		return o.Ping
	}
	return 2 * time.Second
}

func decodeReply(data []byte) ([]bus.Outgoing, error) {
	var r reply
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("an unreadable answer from the session's executor: %w", err)
	}
	if r.Err != "" {
		err := errors.New(r.Err)
		if r.Retry {
			return nil, bus.Retry(err, time.Duration(r.RetryMS)*time.Millisecond)
		}
		return nil, err
	}
	out := make([]bus.Outgoing, len(r.Out))
	for i, m := range r.Out {
		out[i] = bus.Outgoing{Subject: m.Subject, Meta: m.Meta, Body: m.Body}
	}
	return out, nil
}

// Serve answers the calls other replicas forward to this one with handle, until ctx is
// done. handle is given the delivery as the replica that pulled it saw it, marked
// [Forwarded].
//
// When ctx ends, new calls are handed back and the calls under way finish (as a stage's
// runner lets its handlers finish), so that a graceful stop loses none of their results;
// then the subscription ends, and the next puller takes the session over.
func (o *Owners) Serve(ctx context.Context, handle bus.Handler) error {
	var running sync.WaitGroup
	work := context.WithoutCancel(ctx)
	sub, err := o.Conn.Subscribe(messages.ExecSubject(o.Self), func(m *nats.Msg) {
		if m.Header.Get(headerPing) != "" {
			_ = m.Respond(nil)
			return
		}
		if ctx.Err() != nil {
			// Stopping: the puller hands the call back, and finds the session's new
			// holder once this one is gone.
			b, _ := json.Marshal(reply{Err: "the executor holding the session is stopping", Retry: true, RetryMS: 500})
			_ = m.Respond(b)
			return
		}
		running.Add(1)
		go func() {
			defer running.Done()
			o.answer(work, m, handle)
		}()
	})
	if err != nil {
		return err
	}
	<-ctx.Done()
	running.Wait() // still answering pings, so that no puller takes over a call under way
	return sub.Unsubscribe()
}

type forwardedKey struct{}

// Forwarded reports whether ctx is that of a call another replica forwarded here: it
// runs here, whoever the bucket says holds the session now.
func Forwarded(ctx context.Context) bool {
	f, _ := ctx.Value(forwardedKey{}).(bool)
	return f
}

func (o *Owners) answer(ctx context.Context, m *nats.Msg, handle bus.Handler) {
	subject := m.Header.Get(headerSubject)
	delivered, _ := strconv.Atoi(m.Header.Get(headerDelivered))
	h := nats.Header{}
	for k, v := range m.Header {
		switch k {
		case headerSubject, headerDelivered, headerLast:
		default:
			h[k] = v
		}
	}
	d := &bus.Delivery{Subject: subject, Header: h, Data: m.Data, Meta: bus.MetaFrom(subject, h),
		Delivered: max(delivered, 1), Last: m.Header.Get(headerLast) == "true"}
	cctx := context.WithValue(bus.ExtractTrace(ctx, h), forwardedKey{}, true)
	out, err := handle(cctx, d)
	var r reply
	if err != nil {
		r.Err = err.Error()
		var re *bus.RetryError
		if errors.As(err, &re) {
			r.Retry, r.RetryMS = true, re.Delay.Milliseconds()
		}
	}
	for _, x := range out {
		r.Out = append(r.Out, outgoing{Subject: x.Subject, Meta: x.Meta, Body: x.Body})
	}
	b, _ := json.Marshal(r)
	if err := m.Respond(b); err != nil {
		o.logger().Warn("answering a forwarded call", "err", err)
	}
}

func (o *Owners) logger() *slog.Logger {
	if o.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Logger
}
