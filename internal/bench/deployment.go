package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/toolbus"
)

// deployment is the pipeline run as a deployment runs it (Options.NATSConf).
type deployment struct {
	nc     *nats.Conn // the orchestrator's
	client *client.Client
	close  func()
}

// startDeployment serves o.NATSConf on an embedded server with fresh passwords, provisions
// as admin, and starts parser, executor and formatter, each on its own connection as its
// own user; the orchestrator connects as orchestrator.
func startDeployment(ctx context.Context, o Options, local *localtools.Registry) (*deployment, error) {
	// The configuration reads each user's password from the environment.
	pw := map[string]string{}
	for _, user := range []string{"sys", "admin", toolbus.Parser, toolbus.Executor, toolbus.Formatter, toolbus.Healthd, "console", "orchestrator"} {
		b := make([]byte, 16)
		rand.Read(b)
		pw[user] = hex.EncodeToString(b)
		os.Setenv("TOOLBUS_"+strings.ToUpper(user)+"_PASSWORD", pw[user])
	}
	opts, err := server.ProcessConfigFile(o.NATSConf)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "toolbus-bench-")
	if err != nil {
		return nil, err
	}
	opts.Host, opts.Port, opts.HTTPPort, opts.Cluster.Port = "127.0.0.1", server.RANDOM_PORT, 0, 0
	opts.StoreDir, opts.NoLog, opts.NoSigs = dir, true, true
	srv, err := server.NewServer(opts)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	srv.Start()
	var closers []func()
	stop := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
		srv.Shutdown()
		srv.WaitForShutdown()
		os.RemoveAll(dir)
	}
	if !srv.ReadyForConnections(10 * time.Second) {
		stop()
		return nil, fmt.Errorf("bench: %s: the server is not ready", o.NATSConf)
	}
	urlOf := func(user string) string {
		u, _ := url.Parse(srv.ClientURL())
		u.User = url.UserPassword(user, pw[user])
		return u.String()
	}
	anc, err := nats.Connect(urlOf("admin"), bus.UserInbox(urlOf("admin")))
	if err != nil {
		stop()
		return nil, err
	}
	js, _ := jetstream.New(anc)
	err = bus.Provision(ctx, js, o.Config.Topology())
	anc.Close()
	if err != nil {
		stop()
		return nil, err
	}
	for _, name := range []string{toolbus.Parser, toolbus.Executor, toolbus.Formatter} {
		tb, err := toolbus.Start(ctx, toolbus.Options{NATSURL: urlOf(name), Services: []string{name}, Config: o.Config,
			Replicas: o.Executors, Logger: o.Logger, Tools: local, Harden: true})
		if err != nil {
			stop()
			return nil, fmt.Errorf("bench: %s as its own user: %w", name, err)
		}
		closers = append(closers, func() { tb.Close() })
	}
	nc, err := nats.Connect(urlOf("orchestrator"), bus.UserInbox(urlOf("orchestrator")))
	if err != nil {
		stop()
		return nil, err
	}
	closers = append(closers, nc.Close)
	c, err := client.New(nc)
	if err != nil {
		stop()
		return nil, err
	}
	return &deployment{nc: nc, client: c, close: stop}, nil
}
