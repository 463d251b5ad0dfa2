package toolbus_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsCluster is a three-node JetStream cluster in process whose nodes can be shut down
// and started again on their ports and store directories, as a node that crashed and
// was restarted.
type natsCluster struct {
	t     *testing.T
	opts  []*server.Options
	nodes []*server.Server
}

// freePort returns a TCP port nothing listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// newNATSCluster starts a three-node JetStream cluster in process.
func newNATSCluster(t *testing.T) *natsCluster {
	t.Helper()
	// Every node routes to the first, which introduces them to each other (JetStream wants
	// a route on every node, the first one's to itself is skipped).
	seed := freePort(t)
	c := &natsCluster{t: t}
	for i := range 3 {
		opts := &server.Options{
			ServerName: fmt.Sprintf("node-%d", i+1),
			Host:       "127.0.0.1", Port: freePort(t),
			JetStream: true, StoreDir: t.TempDir(),
			Cluster: server.ClusterOpts{Name: "toolbus-test", Host: "127.0.0.1", Port: freePort(t)},
			Routes:  []*url.URL{{Scheme: "nats-route", Host: fmt.Sprintf("127.0.0.1:%d", seed)}},
			NoLog:   true, NoSigs: true,
		}
		if i == 0 {
			opts.Cluster.Port = seed
		}
		c.opts = append(c.opts, opts)
		c.nodes = append(c.nodes, nil)
		c.start(i)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, s := range c.nodes {
			if s.JetStreamIsLeader() && len(s.JetStreamClusterPeers()) == len(c.nodes) {
				return c
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no JetStream meta leader with every node after 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// start starts node i (again).
func (c *natsCluster) start(i int) {
	c.t.Helper()
	opts := *c.opts[i]
	s, err := server.NewServer(&opts)
	if err != nil {
		c.t.Fatal(err)
	}
	s.Start()
	c.t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	if !s.ReadyForConnections(time.Minute) { // a bound only: a busy machine starts a node slowly
		c.t.Fatalf("%s not ready", opts.ServerName)
	}
	c.nodes[i] = s
}

// leaderOf returns the index of the node that leads stream, or -1.
func (c *natsCluster) leaderOf(stream string) int {
	for i, s := range c.nodes {
		if s.Running() && s.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
			return i
		}
	}
	return -1
}

// kill shuts node i down.
func (c *natsCluster) kill(i int) {
	c.nodes[i].Shutdown()
	c.nodes[i].WaitForShutdown()
}

// current waits until every stream named has a leader and every replica of it is
// current, as js sees it.
func (c *natsCluster) current(ctx context.Context, js jetstream.JetStream, streams ...string) error {
	for _, name := range streams {
		for {
			st, err := js.Stream(ctx, name)
			if err == nil {
				info := st.CachedInfo()
				ok := info.Cluster != nil && info.Cluster.Leader != "" && len(info.Cluster.Replicas) == len(c.nodes)-1
				for _, r := range info.Cluster.Replicas {
					ok = ok && r.Current && !r.Offline
				}
				if ok {
					break
				}
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("stream %s not current: %v", name, err)
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
}

// startNATSCluster starts a three-node JetStream cluster in process and returns its nodes.
func startNATSCluster(t *testing.T) []*server.Server { return newNATSCluster(t).nodes }

// connectCluster connects to every node, failing over between them as long as it takes.
func connectCluster(t *testing.T, servers []*server.Server, name string) *nats.Conn {
	t.Helper()
	var urls []string
	for _, s := range servers {
		urls = append(urls, s.ClientURL())
	}
	nc, err := nats.Connect(strings.Join(urls, ","), nats.Name(name),
		nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond), nats.ReconnectJitter(50*time.Millisecond, 0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}
