package mcpwire

import (
	"bufio"
	"bytes"
	"context"
	"io"
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
	cmd *child
	// maxMessage bounds one inbound frame; 0 is DefaultMaxMessageBytes.
	maxMessage int
	grace      time.Duration
	// stray, when set, is told each line of the server's stdout that is not a JSON-RPC
	// message (a banner such as "Starting server..."), which is skipped.
	stray func(line string)
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
	var out io.Reader = stdout
	if t.stray != nil {
		out = &jsonLines{r: bufio.NewReaderSize(stdout, 64<<10), stray: t.stray}
	}
	pipes := &mcp.IOTransport{Reader: io.NopCloser(out), Writer: &childStdin{WriteCloser: stdin, cmd: t.cmd, grace: t.grace}, MaxLineLength: max}
	return pipes.Connect(ctx)
}

// jsonLines passes on the lines of a server's stdout that may be JSON-RPC messages
// ([rpcLine]) and skips the others, telling stray about each: servers print
// banners on stdout, and the go-sdk ends a session at the first line that is not JSON,
// where the reference TypeScript client logs it and carries on. A line passes through in
// chunks, whatever its length.
type jsonLines struct {
	r     *bufio.Reader
	stray func(line string)

	pending []byte // what was read and not yet returned
	mid     bool   // the last chunk did not end its line
	skip    bool   // the current line is skipped
	err     error
}

func (j *jsonLines) Read(p []byte) (int, error) {
	for len(j.pending) == 0 {
		if j.err != nil {
			return 0, j.err
		}
		chunk, err := j.r.ReadSlice('\n')
		if err != nil && err != bufio.ErrBufferFull {
			j.err = err
		}
		if !j.mid && len(chunk) > 0 {
			j.skip = !rpcLine(chunk)
			if j.skip {
				j.stray(string(bytes.TrimSpace(chunk[:min(len(chunk), 200)])))
			}
		}
		j.mid = err == bufio.ErrBufferFull
		if !j.skip {
			j.pending = append(j.pending[:0], chunk...) // ReadSlice's buffer is reused
		}
	}
	n := copy(p, j.pending)
	j.pending = j.pending[n:]
	return n, nil
}

// rpcLine reports whether a line (its start) may be a JSON-RPC message: an object, a
// batch (an array of objects, "[{"), or an empty line. "[INFO] starting" is not.
func rpcLine(b []byte) bool {
	t := bytes.TrimLeft(b, " \t\r")
	switch {
	case len(t) == 0 || t[0] == '\n' || t[0] == '{':
		return true
	case t[0] == '[':
		t = bytes.TrimLeft(t[1:], " \t\r\n")
		return len(t) == 0 || t[0] == '{' || t[0] == ']'
	}
	return false
}

// childStdin is the child's stdin; closing it ends the child.
type childStdin struct {
	io.WriteCloser
	cmd   *child
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
	if c.cmd.tree.Signal(syscall.SIGTERM) == nil {
		if err, ok := wait(); ok {
			return err
		}
	}
	c.cmd.kill()
	return <-exited
}
