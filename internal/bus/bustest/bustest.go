// Package bustest starts what toolbus's tests run against: an embedded nats-server with
// JetStream on a random port, its store in the test's temporary directory, stopped when
// the test ends.
package bustest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/internal/bus"
)

// Server starts an embedded JetStream server for t and returns its client URL.
func Server(t testing.TB) string {
	t.Helper()
	srv, stop, err := bus.StartEmbedded(bus.EmbeddedOptions{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return srv.ClientURL()
}

// Connect opens a connection to url for t, closed when the test ends.
func Connect(t testing.TB, url string, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// JetStream starts a server and connects to it.
func JetStream(t testing.TB) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	return Connect(t, Server(t))
}

// Provisioned starts a server, connects to it and provisions toolbus's streams and
// buckets in memory.
func Provisioned(t testing.TB) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, js := JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := bus.Provision(ctx, js, bus.Topology{Memory: true}); err != nil {
		t.Fatal(err)
	}
	return nc, js
}
