package executor

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/affinity"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/messages"
)

// A call in a conversation's session with a server runs on the replica that holds the
// session: here, the first replica to call takes it and goes on; on another replica the
// call is run by the holder, whose answer is the answer. A call of a server without
// sessions per conversation is not the step's.
func TestStepAffinity(t *testing.T) {
	url := bustest.Server(t)
	replica := func(name string) *stepStage {
		nc, js := bustest.Connect(t, url, nats.Name(name))
		kv, err := js.CreateOrUpdateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: messages.BucketOwners})
		if err != nil {
			t.Fatal(err)
		}
		f := newStepStage()
		f.Owners = &affinity.Owners{KV: kv, Conn: nc, Self: name}
		return f
	}
	holder, other := replica("a"), replica("b")
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- holder.Owners.Serve(ctx, func(ctx context.Context, d *bus.Delivery) ([]bus.Outgoing, error) {
			return []bus.Outgoing{{Subject: messages.ResultSubject("c"), Body: []byte(`{"ran on":"a"}`)}}, nil
		})
	}()
	t.Cleanup(func() { cancel(); <-served })

	at := func(f *stepStage, session string) (*callState, verdict) {
		c := newCall(t, f.Stage, "write", `{}`, 0, 1)
		c.d.Data = []byte(`{}`)
		goesOn(t, f.Stage, c, "route")
		c.route.Session = session
		return c, runStep(t, f.Stage, c, "affinity")
	}
	c, v := at(holder, "git")
	if v.say != goOn || !c.lease.Mine {
		t.Fatalf("the first replica: %v, %v, holds the session: %v", v.say, v.err, c.lease.Mine)
	}
	if _, v = at(other, "git"); v.say != answered || len(v.out) != 1 || string(v.out[0].Body) != `{"ran on":"a"}` {
		t.Errorf("another replica: %v, %v, %d messages; want the holder's answer", v.say, v.err, len(v.out))
	}
	if c, v = at(other, ""); v.say != goOn || c.lease.Owner != "" {
		t.Errorf("no session: %v, lease %+v", v.say, c.lease)
	}
	if other.runs.Load()+holder.runs.Load() != 0 {
		t.Error("the step ran the tool")
	}
}
