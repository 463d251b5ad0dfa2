// Package bustest starts what toolbus's tests run against: an embedded nats-server with
// JetStream on a random port, its store in the test's temporary directory, stopped when
// the test ends.
package bustest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/bus"
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

// ServerWithUsers starts a nats-server with JetStream and two users, as deploy/nats.conf
// shapes them: "admin" (password admin-pw-1) may do anything, "reader" (reader-pw-2) may
// publish only to "allowed.>" and subscribe only to its own inbox. It returns a URL
// template taking "user:password".
func ServerWithUsers(t testing.TB) string {
	t.Helper()
	opts := &server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true,
		Users: []*server.User{
			{Username: "admin", Password: "admin-pw-1"},
			{Username: "reader", Password: "reader-pw-2", Permissions: &server.Permissions{
				Publish:   &server.SubjectPermission{Allow: []string{"allowed.>"}},
				Subscribe: &server.SubjectPermission{Allow: []string{"_INBOX.reader.>"}},
			}},
		}}
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	return fmt.Sprintf("nats://%%s@127.0.0.1:%d", srv.Addr().(*net.TCPAddr).Port)
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

// Publish publishes body to subject with m's headers and waits for the stream's ack.
func Publish(t testing.TB, js jetstream.JetStream, subject string, m bus.Meta, body []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: subject, Header: m.Header(), Data: body}); err != nil {
		t.Fatal(err)
	}
}

// RunStage runs h with the stage runner on the durable consumer of stream until the test
// ends.
func RunStage(t testing.TB, js jetstream.JetStream, stream, consumer string, h bus.Handler, o bus.RunOptions) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c, err := js.Consumer(ctx, stream, consumer)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); bus.Run(ctx, c, js, h, o) }()
	t.Cleanup(func() { cancel(); <-done })
}

// ProvisionCluster provisions topo on a cluster through js, then writes one key with
// compare-and-set to every bucket, alone. nats-server (v2.15.2) allocates a clustered
// stream's expected-sequence map on its first compare-and-set write under one lock and
// reads it without that lock while applying other messages: the race detector reports
// it when the first such write meets concurrent traffic (1 run in 15 of the cluster
// tests). The map is never released, so one quiet write per stream before the services
// start keeps the report away; outside the race detector it is harmless.
func ProvisionCluster(t testing.TB, js jetstream.JetStream, topo bus.Topology) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := bus.Provision(ctx, js, topo); err != nil {
		t.Fatal(err)
	}
	for _, b := range topo.Buckets() {
		kv, err := js.KeyValue(ctx, b.Bucket)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Create(ctx, "toolbus-warm-up", []byte("{}")); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
			t.Fatal(err)
		}
		if err := kv.Purge(ctx, "toolbus-warm-up"); err != nil {
			t.Fatal(err)
		}
	}
}

// LogBuffer is a bytes.Buffer that services logging from many goroutines may share: tests
// read what they logged.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
