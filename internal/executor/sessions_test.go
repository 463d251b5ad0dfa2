package executor

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/internal/bus"
	"github.com/toolbus/toolbus/pkg/engineering"
	"github.com/toolbus/toolbus/pkg/engineering/sessiontest"
)

func TestKVSessions(t *testing.T) {
	srv, stop, err := bus.StartEmbedded(bus.EmbeddedOptions{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	var n atomic.Int32
	sessiontest.Run(t, func(t *testing.T) engineering.SessionStore {
		kv, err := js.CreateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: fmt.Sprintf("sessions_%d", n.Add(1))})
		if err != nil {
			t.Fatal(err)
		}
		return KVSessions{KV: kv}
	})
}
