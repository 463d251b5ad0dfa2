package localtools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"

	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/reaper"
)

// process runs one executable of a tools folder.
type process struct {
	name, path, dir string
	args            []string // after the program's name
	env             []string
	timeout         time.Duration
	maxOutput       int64
	limits          reaper.Limits
}

// stderrLines is how many of the last lines of stderr a failure reports.
const stderrLines = 10

var errOutputTooLarge = errors.New("output too large")

// run starts the executable with args on stdin under a reaper of its own, and waits:
// when the tool exits or the call ends, every process it started is killed, those that
// left its process group or session (setsid, a daemon's double fork) too.
func (p process) run(ctx context.Context, args []byte) (json.RawMessage, error) {
	limit := p.timeout
	if d, ok := ctx.Deadline(); ok && time.Until(d) < limit {
		limit = time.Until(d).Round(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)

	stdout := &cappedBuffer{max: p.maxOutput, full: func() { stop(errOutputTooLarge) }}
	stderr := &tailBuffer{max: 8 << 10}
	cmd := exec.CommandContext(runCtx, p.path, p.args...)
	cmd.Dir, cmd.Env = p.dir, p.env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(args), stdout, stderr
	// Wait returns this long after the kill even if a grandchild kept the pipes open.
	cmd.WaitDelay = time.Second
	contained, err := reaper.ContainWith(cmd, p.limits.Effective())
	if err != nil {
		return nil, &messages.ToolError{Code: messages.CodeToolError, Message: fmt.Sprintf("the tool %q could not be started: %v", p.name, err), Err: err}
	}
	defer contained.Kill()
	cmd.Cancel = func() error { contained.Kill(); return nil }
	if err := cmd.Start(); err != nil {
		return nil, &messages.ToolError{Code: messages.CodeToolError, Message: fmt.Sprintf("the tool %q could not be started: %v", p.name, err), Err: err}
	}
	err = cmd.Wait()
	contained.Exited(cmd.ProcessState)
	contained.Kill()

	if errors.Is(err, exec.ErrWaitDelay) {
		err = nil // it exited 0; a process it left behind held the pipes, and is killed
	}
	switch {
	case stdout.overflow:
		return nil, messages.Errorf(messages.CodeToolError, "the tool %q printed more than %d bytes on stdout and was stopped", p.name, p.maxOutput)
	case err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return nil, &messages.ToolError{Code: messages.CodeTimeout, Message: fmt.Sprintf("the tool %q did not finish within %s and was stopped", p.name, limit), Err: ctx.Err(), Stopped: true}
	case err != nil && ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil:
		tail := stderr.lastLines(stderrLines)
		if limit := p.limits.Effective().Exceeded(cmd.ProcessState.ExitCode(), tail); limit != "" {
			return nil, &messages.ToolError{Code: messages.CodeToolError, Message: fmt.Sprintf("the tool %q was stopped at %s (%v): %s", p.name, limit, err, tail), Err: err}
		}
		return nil, &messages.ToolError{Code: messages.CodeToolError, Message: fmt.Sprintf("the tool %q failed (%v): %s", p.name, err, tail), Err: err}
	}
	out, err := oneJSONValue(stdout.buf.Bytes())
	if err != nil {
		return nil, &messages.ToolError{Code: messages.CodeToolError, Message: fmt.Sprintf("the tool %q %v", p.name, err), Err: err}
	}
	return out, nil
}

// oneJSONValue returns the single JSON value in b, which may be surrounded by white
// space and nothing else.
func oneJSONValue(b []byte) (json.RawMessage, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, errors.New("printed nothing on stdout; it must print one JSON value")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var v json.RawMessage
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("printed something that is not JSON on stdout (%v): %s", err, quoteStart(b))
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("printed more than one JSON value on stdout: %s", quoteStart(b))
	}
	return compact(v), nil
}

// quoteStart quotes the beginning of b for an error message.
func quoteStart(b []byte) string {
	const n = 200
	if len(b) > n {
		return fmt.Sprintf("%q…", b[:n])
	}
	return fmt.Sprintf("%q", b)
}

// cappedBuffer keeps at most max bytes and calls full once when more arrive; the write
// then fails, which closes the pipe.
type cappedBuffer struct {
	buf      bytes.Buffer
	max      int64
	full     func()
	overflow bool
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	if c.overflow {
		return 0, errOutputTooLarge
	}
	if int64(c.buf.Len()+len(p)) > c.max {
		c.overflow = true
		c.full()
		return 0, errOutputTooLarge
	}
	return c.buf.Write(p)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	buf []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

// lastLines returns up to n of the last non-empty lines, for an error message.
func (t *tailBuffer) lastLines(n int) string {
	b := t.buf
	if len(b) > t.max {
		b = b[len(b)-t.max:]
	}
	lines := strings.Split(strings.TrimSpace(strings.ToValidUTF8(string(b), "�")), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	s := strings.TrimSpace(strings.Join(lines, "\n"))
	if s == "" {
		return "nothing on stderr"
	}
	return "stderr: " + s
}
