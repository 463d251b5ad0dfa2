package mcpwire

import (
	"context"
	"io"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultMaxMessageBytes bounds one message a stdio server sends (a JSON-RPC frame, one
// line): 64 MiB, four times the go-sdk's own default, so that a tool's answer of a few
// tens of megabytes (a file read whole, which servers often send twice: as text and as
// structured content) arrives. toolbus keeps such results whole and passes previews on.
const DefaultMaxMessageBytes = 64 << 20

// stdioTransport runs a stdio server: newline-delimited JSON over the child's pipes
// (mcp.IOTransport, which takes a frame limit where mcp.CommandTransport does not), and
// the shutdown the MCP specification asks of a client: close the child's stdin, wait,
// then SIGTERM, wait, then SIGKILL.
type stdioTransport struct {
	cmd *exec.Cmd
	// maxMessage bounds one inbound frame; 0 is DefaultMaxMessageBytes.
	maxMessage int
	grace      time.Duration
}

// Connect starts the child.
func (t *stdioTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := t.cmd.Start(); err != nil {
		return nil, err
	}
	max := t.maxMessage
	if max == 0 {
		max = DefaultMaxMessageBytes
	}
	pipes := &mcp.IOTransport{Reader: io.NopCloser(stdout), Writer: &childStdin{WriteCloser: stdin, cmd: t.cmd, grace: t.grace}, MaxLineLength: max}
	return pipes.Connect(ctx)
}

// childStdin is the child's stdin; closing it ends the child.
type childStdin struct {
	io.WriteCloser
	cmd   *exec.Cmd
	grace time.Duration
	once  sync.Once
	err   error
}

func (c *childStdin) Close() error {
	c.once.Do(func() { c.err = c.shutdown() })
	return c.err
}

func (c *childStdin) shutdown() error {
	c.WriteCloser.Close()
	exited := make(chan error, 1)
	go func() { exited <- c.cmd.Wait() }()
	wait := func() (error, bool) {
		select {
		case err := <-exited:
			return err, true
		case <-time.After(c.grace):
			return nil, false
		}
	}
	if err, ok := wait(); ok {
		return err
	}
	if c.cmd.Process.Signal(syscall.SIGTERM) == nil {
		if err, ok := wait(); ok {
			return err
		}
	}
	killGroup(c.cmd)
	return <-exited
}
