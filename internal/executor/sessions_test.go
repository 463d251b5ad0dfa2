package executor

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/internal/bus/bustest"
	"github.com/toolbus/toolbus/pkg/engineering"
	"github.com/toolbus/toolbus/pkg/engineering/sessiontest"
)

func TestKVSessions(t *testing.T) {
	_, js := bustest.JetStream(t)
	var n atomic.Int32
	sessiontest.Run(t, func(t *testing.T) engineering.SessionStore {
		kv, err := js.CreateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: fmt.Sprintf("sessions_%d", n.Add(1))})
		if err != nil {
			t.Fatal(err)
		}
		return KVSessions{KV: kv}
	})
}
