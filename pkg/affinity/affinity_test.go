package affinity_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolbus/toolbus/pkg/affinity"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/messages"
)

func owners(t *testing.T, url string, names ...string) []*affinity.Owners {
	t.Helper()
	var out []*affinity.Owners
	for _, name := range names {
		nc, js := bustest.Connect(t, url, nats.Name(name))
		kv, err := js.CreateOrUpdateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: messages.BucketOwners})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, &affinity.Owners{KV: kv, Conn: nc, Self: name, Ping: 50 * time.Millisecond})
	}
	return out
}

// Replicas racing for a conversation's session: exactly one holds it, and the others
// see it held by that one. Replicas racing to take over a gone holder's session: exactly
// one gets it, and the record says the session was lost and why.
func TestOneHolder(t *testing.T) {
	url := bustest.Server(t)
	reps := owners(t, url, "a", "b", "c", "d")
	ctx := context.Background()
	leases := make([]affinity.Lease, len(reps))
	var wg sync.WaitGroup
	for i, o := range reps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := o.Acquire(ctx, "git", "conv-1")
			if err != nil {
				t.Error(err)
			}
			leases[i] = l
		}()
	}
	wg.Wait()
	holder, mine := "", 0
	for i, l := range leases {
		if l.Mine {
			mine++
			holder = reps[i].Self
		}
	}
	if mine != 1 {
		t.Fatalf("%d replicas hold the session, want 1", mine)
	}
	for _, l := range leases {
		if l.Owner != holder {
			t.Errorf("a replica sees the session held by %q, not %q", l.Owner, holder)
		}
	}
	var holderOwners *affinity.Owners
	for _, o := range reps {
		if o.Self == holder {
			holderOwners = o
		}
	}
	l, _ := holderOwners.Acquire(ctx, "git", "conv-1")
	holderOwners.Opened(ctx, l)

	// The holder is gone: the others race to take over (as each does when its forward
	// finds no responder).
	var others []*affinity.Owners
	for _, o := range reps {
		if o.Self != holder {
			others = append(others, o)
		}
	}
	taken := make([]affinity.Lease, len(others))
	for i, o := range others {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seen, err := o.Acquire(ctx, "git", "conv-1")
			if err != nil {
				t.Error(err)
				return
			}
			if seen.Owner != holder {
				taken[i] = seen // another took over already: its holder is alive
				return
			}
			if taken[i], err = o.TakeOver(ctx, seen, "git", "conv-1"); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	mine, newHolder := 0, ""
	for i, l := range taken {
		if l.Mine {
			mine++
			newHolder = others[i].Self
		}
	}
	if mine != 1 {
		t.Fatalf("%d replicas took the session over, want 1", mine)
	}
	final, _ := others[0].Acquire(ctx, "git", "conv-1")
	if final.Owner != newHolder || !final.Opened || !strings.Contains(final.Ended, holder) {
		t.Errorf("after the takeover: %+v; want held by %s, opened before, lost because %s stopped", final, newHolder, holder)
	}
}

// A call forwarded to the holder runs there, with the delivery as the puller saw it, and
// its answer (messages, or a hand-back with its delay) comes back; a holder that is not
// there, or that goes away during the call, is ErrGone.
func TestForward(t *testing.T) {
	url := bustest.Server(t)
	reps := owners(t, url, "holder", "puller")
	holder, puller := reps[0], reps[1]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	release := make(chan struct{})
	served := make(chan error, 1)
	go func() {
		served <- holder.Serve(ctx, func(ctx context.Context, d *bus.Delivery) ([]bus.Outgoing, error) {
			if !affinity.Forwarded(ctx) {
				t.Error("the holder's handler is not told the call was forwarded")
			}
			switch string(d.Data) {
			case "hand back":
				return nil, bus.Retry(errors.New("later"), 1500*time.Millisecond)
			case "slow":
				<-release
			}
			return []bus.Outgoing{{Subject: messages.ResultSubject(d.Meta.Conversation), Meta: bus.Meta{MsgID: "id-" + string(d.Data), Conversation: d.Meta.Conversation},
				Body: append([]byte("ran "), d.Data...)}}, nil
		})
	}()
	time.Sleep(100 * time.Millisecond) // subscribed
	d := &bus.Delivery{Subject: messages.CallSubject("conv-1"), Header: nats.Header{}, Data: []byte("call"), Delivered: 3, Last: true}
	d.Meta = bus.MetaFrom(d.Subject, d.Header)
	out, err := puller.Forward(context.Background(), "holder", d, time.Minute)
	if err != nil || len(out) != 1 || string(out[0].Body) != "ran call" || out[0].Meta.MsgID != "id-call" || out[0].Meta.Conversation != "conv-1" {
		t.Fatalf("forwarded: %+v, %v", out, err)
	}
	d.Data = []byte("hand back")
	_, err = puller.Forward(context.Background(), "holder", d, time.Minute)
	var re *bus.RetryError
	if !errors.As(err, &re) || re.Delay != 1500*time.Millisecond {
		t.Errorf("a hand-back came back as %v", err)
	}
	if _, err := puller.Forward(context.Background(), "nobody", d, time.Minute); !errors.Is(err, affinity.ErrGone) {
		t.Errorf("forwarding to no holder: %v, want ErrGone", err)
	}

	// The holder goes away in the middle of a call.
	d.Data = []byte("slow")
	gone := make(chan error, 1)
	go func() {
		_, err := puller.Forward(context.Background(), "holder", d, time.Minute)
		gone <- err
	}()
	time.Sleep(100 * time.Millisecond)
	holder.Conn.Close()
	if err := <-gone; !errors.Is(err, affinity.ErrGone) {
		t.Errorf("a holder gone during the call: %v, want ErrGone", err)
	}
	close(release)
	cancel()
	<-served
}
