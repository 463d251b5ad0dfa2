package mcpwire

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolbus/toolbus/pkg/messages"
)

// MCP tasks (spec 2025-11-25, SEP-1686): a tool whose tools/list entry says
// "execution": {"taskSupport": "required"} can only be called as a task, and one that
// says "optional" may be. The go-sdk in use does neither, and drops the field when it
// decodes the list; toolbus reads the field off the raw messages (taskTools) and runs
// such a tool's calls as tasks itself (server.callAsTask): tools/call with a task, then
// tasks/get until the task ends, within the call's time, then tasks/result; tasks/cancel
// when the call's context ends first. The requests go out on the call's own session
// (rawRequester, raw.go). A session that cannot send them (a streamable HTTP session of a
// protocol toolbus does not speak itself) leaves the task-only tools out of the catalog.

// taskTools collects how the tools a server lists may run as tasks.
type taskTools struct {
	mu    sync.Mutex
	modes map[string]string // tool → "required" or "optional"
}

// observe reads a JSON-RPC message, or a response's result, for a tools/list result
// with tools that run as tasks.
func (t *taskTools) observe(raw []byte) {
	if t == nil || !bytes.Contains(raw, []byte("taskSupport")) {
		return
	}
	var msg struct {
		Result *struct {
			Tools []listedTool `json:"tools"`
		} `json:"result"`
		Tools []listedTool `json:"tools"`
	}
	if json.Unmarshal(raw, &msg) != nil {
		return
	}
	tools := msg.Tools
	if msg.Result != nil {
		tools = msg.Result.Tools
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, tl := range tools {
		switch mode := tl.Execution.TaskSupport; mode {
		case taskRequired, taskOptional:
			if t.modes == nil {
				t.modes = map[string]string{}
			}
			t.modes[tl.Name] = mode
		default:
			delete(t.modes, tl.Name)
		}
	}
}

// The task support a tool may declare, beside "forbidden" (the default).
const (
	taskRequired = "required"
	taskOptional = "optional"
)

type listedTool struct {
	Name      string `json:"name"`
	Execution struct {
		TaskSupport string `json:"taskSupport"`
	} `json:"execution"`
}

// required reports whether the server marked the tool called name as task-only.
func (t *taskTools) required(name string) bool { return t.mode(name) == taskRequired }

// mode is how the tool called name may run as a task: required, optional or "".
func (t *taskTools) mode(name string) string {
	if t == nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.modes[name]
}

// snapshot copies the modes known.
func (t *taskTools) snapshot() map[string]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.modes)
}

// taskState is a task as tasks/get and a task-augmented tools/call (its "task") tell it.
type taskState struct {
	ID            string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	// PollInterval is the wait the server suggests between two tasks/get, in ms.
	PollInterval *int64 `json:"pollInterval,omitempty"`
}

// The statuses of a task.
const (
	taskWorking       = "working"
	taskInputRequired = "input_required"
	taskCompleted     = "completed"
	taskFailed        = "failed"
	taskCancelled     = "cancelled"
)

// decodeCreated reads the answer to a task-augmented tools/call: the task it created, or
// nil when the server ran the call at once and answered a CallToolResult (a server
// that does not take the task for this tool ignores it, as the specification asks).
func decodeCreated(raw json.RawMessage) (*taskState, error) {
	obj, err := messages.DecodeMembers(raw)
	if err != nil {
		return nil, &jsonrpc.Error{Code: codeParseError, Message: fmt.Sprintf("tools/call: the result is not an object: %v", err)}
	}
	task, ok := obj["task"]
	if !ok || isNull(task) {
		return nil, nil
	}
	t, err := decodeTask(task)
	if err != nil {
		return nil, &jsonrpc.Error{Code: codeParseError, Message: "tools/call: the task created: " + err.(*jsonrpc.Error).Message}
	}
	return t, nil
}

// decodeTask reads a task (tasks/get's result): an id, and a status of the
// specification's.
func decodeTask(raw json.RawMessage) (*taskState, error) {
	var t taskState
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, &jsonrpc.Error{Code: codeParseError, Message: fmt.Sprintf("not a task: %v", err)}
	}
	switch {
	case t.ID == "":
		return nil, &jsonrpc.Error{Code: codeParseError, Message: "a task without a taskId"}
	case t.Status != taskWorking && t.Status != taskInputRequired && t.Status != taskCompleted && t.Status != taskFailed && t.Status != taskCancelled:
		return nil, &jsonrpc.Error{Code: codeParseError, Message: fmt.Sprintf("task %s: unknown status %q", messages.EchoName(t.ID), messages.EchoName(t.Status))}
	}
	return &t, nil
}

func (t *taskState) ended() bool {
	return t.Status == taskCompleted || t.Status == taskFailed || t.Status == taskCancelled
}

// Bounds of the wait between two tasks/get: the server's pollInterval within them, or
// defaultPoll.
const (
	minPoll     = 50 * time.Millisecond
	maxPoll     = 5 * time.Second
	defaultPoll = 500 * time.Millisecond
)

func (t *taskState) poll() time.Duration {
	if t.PollInterval == nil {
		return defaultPoll
	}
	return min(max(time.Duration(*t.PollInterval)*time.Millisecond, minPoll), maxPoll)
}

// taskKeep is how long past the call's time a task's result is asked to be kept (its
// ttl): enough for tasks/result after the last tasks/get.
const taskKeep = time.Minute

// callAsTask runs a call of tool as a task on sess (see the top of this file), telling
// status each status message the task reports that differs from the one before. Its
// errors are classified as a tools/call's: a JSON-RPC error answer is a *jsonrpc.Error, a
// connection that broke under a request is errConnection.
func callAsTask(ctx context.Context, sess *mcpSession, raw rawRequester, tool string, args json.RawMessage, status func(step float64, message string)) (*mcp.CallToolResult, error) {
	params := struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		Meta      mcp.Meta        `json:"_meta,omitempty"`
		Task      struct {
			TTL *int64 `json:"ttl,omitempty"`
		} `json:"task"`
	}{Name: tool, Arguments: args, Meta: traceMeta(ctx)}
	if d, ok := ctx.Deadline(); ok {
		ttl := (time.Until(d) + taskKeep).Milliseconds()
		params.Task.TTL = &ttl
	}
	answer, err := raw.request(ctx, methodToolsCall, params)
	if err != nil {
		return nil, err
	}
	task, err := decodeCreated(answer)
	if err != nil {
		return nil, err
	}
	if task == nil {
		return decodeCallResult(answer)
	}
	steps, said := 0.0, ""
	tell := func(t *taskState) {
		if m := t.StatusMessage; m != "" && m != said {
			steps++
			said = m
			status(steps, m)
		}
	}
	tell(task)
	finished := false
	defer func() {
		if !finished && sess.life.Err() == nil {
			// The call's time ran out, or its answer was lost: the task stops too.
			go cancelTask(sess.life, raw, task.ID)
		}
	}()
	for !task.ended() && task.Status != taskInputRequired {
		// tasks/result is asked for as soon as the task wants input: its answer
		// carries the server's requests (an elicitation) to the session's handlers.
		wait := time.NewTimer(task.poll())
		select {
		case <-ctx.Done():
			wait.Stop()
			return nil, ctx.Err()
		case <-wait.C:
		}
		got, err := raw.request(ctx, "tasks/get", map[string]string{"taskId": task.ID})
		if err != nil {
			return nil, underWay(task.ID, err)
		}
		next, err := decodeTask(got)
		if err != nil {
			return nil, err
		}
		if next.ID != task.ID {
			return nil, &jsonrpc.Error{Code: codeParseError, Message: fmt.Sprintf("tasks/get of task %s answered task %s", messages.EchoName(task.ID), messages.EchoName(next.ID))}
		}
		if next.PollInterval == nil {
			next.PollInterval = task.PollInterval // said once, when the task was made
		}
		task = next
		tell(task)
	}
	if task.Status == taskCancelled {
		finished = true
		msg := "the server cancelled the task"
		if task.StatusMessage != "" {
			msg += ": " + task.StatusMessage
		}
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}, nil
	}
	result, err := raw.request(ctx, "tasks/result", map[string]string{"taskId": task.ID})
	if err != nil {
		var werr *jsonrpc.Error
		finished = errors.As(err, &werr) // the server answered: nothing left to cancel
		return nil, underWay(task.ID, err)
	}
	finished = true
	return decodeCallResult(result)
}

// underWay is err of a request about task id, which the server made: the call was sent
// and its tool may be running, so a request that never left (the connection closed
// under it, an HTTP error before the server read it) is, for the call, a connection that
// broke during it — never a call not sent, which a tool not safe to repeat would be sent
// again for. The server's other answers stand.
func underWay(id string, err error) error {
	if !neverSent(err) {
		return err
	}
	return fmt.Errorf("%w: task %s was under way: %v", errConnection, messages.EchoName(id), err)
}

// callAsTask runs a call of tool as a task in the session, bounded by its life as
// callTool is.
func (s *mcpSession) callAsTask(ctx context.Context, tool string, args json.RawMessage, status func(step float64, message string)) (*mcp.CallToolResult, error) {
	cctx, stop := boundTo(ctx, s.life)
	defer stop()
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	res, err := callAsTask(cctx, s, s.raw, tool, args, status)
	if err != nil && ctx.Err() == nil && s.life.Err() != nil {
		return nil, fmt.Errorf("%w: the session was closed during the call", errConnection)
	}
	return res, err
}

// cancelTask asks the server to cancel a task whose call ended, within terminateGrace of
// the session's life.
func cancelTask(life context.Context, raw rawRequester, id string) {
	ctx, cancel := context.WithTimeout(life, terminateGrace)
	defer cancel()
	_, _ = raw.request(ctx, "tasks/cancel", map[string]string{"taskId": id})
}

// observingTasks returns a client whose answers to tools/list t reads for task-only
// tools: JSON bodies whole, event streams (a streamable HTTP answer, the SSE transport's
// stream) line by line. Other requests' answers — every tools/call — pass untouched.
func observingTasks(c *http.Client, t *taskTools) *http.Client {
	return wrapTransport(c, func(rt http.RoundTripper) http.RoundTripper { return taskSniffer{base: rt, tasks: t} })
}

type taskSniffer struct {
	base  http.RoundTripper
	tasks *taskTools
}

func (s taskSniffer) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := s.base.RoundTrip(r)
	if err != nil || resp.Body == nil || !mayListTools(r) {
		return resp, err
	}
	sse := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	resp.Body = &sniffedBody{ReadCloser: resp.Body, sse: sse, tasks: s.tasks}
	return resp, nil
}

// mayListTools reports whether r's answer may hold a tools/list result: a GET (the SSE
// transport's stream carries every answer), or a POST of tools/list — as its Mcp-Method
// header says (protocols since 2026-07-28), else as the start of its body does.
func mayListTools(r *http.Request) bool {
	if r.Method != http.MethodPost {
		return true
	}
	if m := r.Header.Get("Mcp-Method"); m != "" {
		return m == "tools/list"
	}
	if r.GetBody == nil {
		return true
	}
	body, err := r.GetBody()
	if err != nil {
		return true
	}
	defer body.Close()
	var head [256]byte // "method" comes right after "jsonrpc" and "id"
	n, _ := io.ReadFull(body, head[:])
	return bytes.Contains(head[:n], []byte(`"method":"tools/list"`)) || bytes.Contains(head[:n], []byte(`"method": "tools/list"`))
}

// maxSniff bounds what a sniffed body keeps of one message.
const maxSniff = 16 << 20

// sniffedBody passes a response through, handing each message to tasks.observe: each
// "data:" line of an event stream, or a JSON body whole.
type sniffedBody struct {
	io.ReadCloser
	sse      bool
	tasks    *taskTools
	pending  []byte
	overflow bool
}

func (b *sniffedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.feed(p[:n])
	}
	if err == io.EOF && !b.sse && !b.overflow {
		b.tasks.observe(b.pending)
		b.pending = nil
	}
	return n, err
}

func (b *sniffedBody) feed(p []byte) {
	if !b.sse {
		if len(b.pending)+len(p) > maxSniff {
			b.overflow, b.pending = true, nil
		} else if !b.overflow {
			b.pending = append(b.pending, p...)
		}
		return
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(b.pending)+len(p) <= maxSniff {
				b.pending = append(b.pending, p...)
			} else {
				b.overflow = true
			}
			return
		}
		line := p[:i]
		if len(b.pending) > 0 {
			line = append(b.pending, line...)
		}
		if !b.overflow {
			if data, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				b.tasks.observe(data)
			}
		}
		b.pending, b.overflow, p = b.pending[:0], false, p[i+1:]
	}
}
