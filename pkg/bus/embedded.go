package bus

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// EmbeddedOptions configures an in-process NATS server with JetStream.
type EmbeddedOptions struct {
	// StoreDir holds JetStream's files. Empty means a new temporary directory, removed by
	// the returned stop function.
	StoreDir string
	// Port to listen on for clients; 0 means a random free port (nats-server's -1).
	Port int
	// Host to listen on; empty means 127.0.0.1.
	Host string
	// Name of the server; optional.
	Name string
}

// StartEmbedded starts an in-process nats-server with JetStream and waits until it accepts
// clients. Stop shuts it down and removes a temporary store directory.
func StartEmbedded(o EmbeddedOptions) (srv *server.Server, stop func(), err error) {
	dir, tmp := o.StoreDir, false
	if dir == "" {
		if dir, err = os.MkdirTemp("", "toolbus-js-"); err != nil {
			return nil, nil, fmt.Errorf("embedded nats: %w", err)
		}
		tmp = true
	}
	port := o.Port
	if port == 0 {
		port = server.RANDOM_PORT
	}
	host := o.Host
	if host == "" {
		host = "127.0.0.1"
	}
	if port > 0 {
		// The server logs nothing here (NoLog) and only fails to become ready: say why.
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			if tmp {
				os.RemoveAll(dir)
			}
			return nil, nil, fmt.Errorf("embedded nats: cannot listen on port %d (another NATS server running?): %w", port, err)
		}
		ln.Close()
	}
	opts := &server.Options{
		ServerName: o.Name,
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   dir,
		NoLog:      true,
		NoSigs:     true,
		// Tool results can be large; NATS's default of 1 MB is kept as the limit.
		MaxPayload: server.MAX_PAYLOAD_SIZE,
	}
	srv, err = server.NewServer(opts)
	if err != nil {
		if tmp {
			os.RemoveAll(dir)
		}
		return nil, nil, fmt.Errorf("embedded nats: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		if tmp {
			os.RemoveAll(dir)
		}
		return nil, nil, fmt.Errorf("embedded nats: not ready after 10s")
	}
	stop = func() {
		srv.Shutdown()
		srv.WaitForShutdown()
		if tmp {
			os.RemoveAll(dir)
		}
	}
	return srv, stop, nil
}
