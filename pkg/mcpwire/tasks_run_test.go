package mcpwire_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolbus/toolbus/pkg/mcpwire"
	"github.com/toolbus/toolbus/pkg/messages"
)

// tasker is an MCP server that runs tools as tasks (SEP-1686), which the go-sdk's
// server does not: it speaks JSON-RPC on the server side of in-memory transports.
type tasker struct {
	mu        sync.Mutex
	polls     map[string]int  // tasks/get per task
	cancelled map[string]bool // tasks/cancel per task
	plain     int             // tools/call without a task
}

const taskerTools = `{"tools":[
	{"name":"research","inputSchema":{"type":"object"},"execution":{"taskSupport":"required"}},
	{"name":"maybe","inputSchema":{"type":"object"},"execution":{"taskSupport":"optional"}},
	{"name":"stuck","inputSchema":{"type":"object"},"execution":{"taskSupport":"required"}},
	{"name":"broken","inputSchema":{"type":"object"},"execution":{"taskSupport":"required"}},
	{"name":"liar","inputSchema":{"type":"object"},"execution":{"taskSupport":"required"}},
	{"name":"dies","inputSchema":{"type":"object"},"execution":{"taskSupport":"required"}},
	{"name":"plain","inputSchema":{"type":"object"}}]}`

func newTasker() *tasker { return &tasker{polls: map[string]int{}, cancelled: map[string]bool{}} }

func (s *tasker) dial(ctx context.Context, _ string) (mcp.Transport, error) {
	ct, st := mcp.NewInMemoryTransports()
	conn, err := st.Connect(ctx)
	if err != nil {
		return nil, err
	}
	go s.serve(conn)
	return ct, nil
}

func (s *tasker) serve(conn mcp.Connection) {
	defer conn.Close()
	ctx := context.Background()
	for {
		msg, err := conn.Read(ctx)
		if err != nil {
			return
		}
		req, ok := msg.(*jsonrpc.Request)
		if !ok || !req.IsCall() {
			continue
		}
		if req.Method == "tasks/get" && strings.Contains(string(req.Params), `"dies-1"`) {
			return // the server dies while the task runs
		}
		result, werr := s.answer(req)
		resp := &jsonrpc.Response{ID: req.ID}
		if werr != nil {
			resp.Error = werr
		} else {
			resp.Result = json.RawMessage(result)
		}
		if conn.Write(ctx, resp) != nil {
			return
		}
	}
}

func (s *tasker) answer(req *jsonrpc.Request) (string, *jsonrpc.Error) {
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		Task      json.RawMessage `json:"task"`
		TaskID    string          `json:"taskId"`
	}
	_ = json.Unmarshal(req.Params, &p)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch req.Method {
	case "initialize":
		return `{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"tasks":{"cancel":{},"requests":{"tools":{"call":{}}}}},"serverInfo":{"name":"tasker","version":"1"}}`, nil
	case "tools/list":
		return taskerTools, nil
	case "tools/call":
		if p.Task == nil {
			if p.Name == "plain" || p.Name == "maybe" {
				s.plain++
				return `{"content":[{"type":"text","text":"at once"}]}`, nil
			}
			return "", &jsonrpc.Error{Code: -32601, Message: "Tool " + p.Name + " requires task augmentation"}
		}
		switch p.Name {
		case "maybe":
			return `{"content":[{"type":"text","text":"at once, the task ignored"}]}`, nil
		case "liar":
			return `{"task":{"taskId":"liar-1","status":"sleeping"}}`, nil
		}
		return `{"task":{"taskId":"` + p.Name + `-1","status":"working","pollInterval":10,"ttl":60000}}`, nil
	case "tasks/get":
		s.polls[p.TaskID]++
		status := "working"
		switch {
		case s.cancelled[p.TaskID]:
			status = "cancelled"
		case p.TaskID == "research-1" && s.polls[p.TaskID] >= 2:
			status = "completed"
		case p.TaskID == "broken-1":
			status = "failed"
		}
		return `{"taskId":"` + p.TaskID + `","status":"` + status + `","statusMessage":"stage ` + itoa(s.polls[p.TaskID]) + `"}`, nil
	case "tasks/result":
		switch p.TaskID {
		case "research-1":
			return `{"content":[{"type":"text","text":"a report on tasks"}],"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"research-1"}}}`, nil
		case "broken-1":
			return "", &jsonrpc.Error{Code: -32603, Message: "the research failed"}
		}
		return "", &jsonrpc.Error{Code: -32602, Message: "task not finished"}
	case "tasks/cancel":
		s.cancelled[p.TaskID] = true
		return `{"taskId":"` + p.TaskID + `","status":"cancelled"}`, nil
	}
	return "", &jsonrpc.Error{Code: -32601, Message: "method not found: " + req.Method}
}

func (s *tasker) counts(task string) (polls int, cancelled bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.polls[task], s.cancelled[task]
}

// A tool that requires tasks runs as one: tools/call with a task, tasks/get until it is
// done, tasks/result; one that allows them gets the server's answer whichever it sends;
// a failed task is the tool's error; an answer that is no task is a clear error.
func TestToolsRunAsTasks(t *testing.T) {
	srv := newTasker()
	var mu sync.Mutex
	var progress []string
	p := newPool(t, map[string]mcpwire.ServerConfig{"tasker": placeholder}, &mcpwire.Options{Dial: srv.dial,
		Progress: func(_ context.Context, cp messages.CallProgress) {
			mu.Lock()
			defer mu.Unlock()
			progress = append(progress, fmt.Sprintf("%s %s %v %s", cp.CallID, cp.Tool, cp.Progress, cp.Message))
		}})
	ctx := mcpwire.WithCall(ctxT(t), "call-1")
	if n := len(p.Tools(ctx)); n != 7 {
		t.Fatalf("%d tools, want 7 (those that run as tasks listed)", n)
	}
	tests := []struct {
		name, tool string
		want       string
		wantErr    string
	}{
		{name: "required", tool: "research", want: `"a report on tasks"`},
		{name: "optional, answered at once", tool: "maybe", want: `"at once, the task ignored"`},
		{name: "forbidden", tool: "plain", want: `"at once"`},
		{name: "failed", tool: "broken", wantErr: "the research failed"},
		{name: "a status of no task", tool: "liar", wantErr: `unknown status "sleeping"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := p.Call(ctx, "tasker__"+tt.tool, nil)
			if tt.wantErr != "" {
				var te *mcpwire.ToolError
				if !errors.As(err, &te) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want a tool error saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || string(out) != tt.want {
				t.Fatalf("= %s, %v; want %s", out, err, tt.want)
			}
		})
	}
	if polls, _ := srv.counts("research-1"); polls != 2 {
		t.Errorf("research was polled %d times, want 2 (working, then completed)", polls)
	}
	// The task's status messages are the call's progress.
	mu.Lock()
	got := strings.Join(progress, "; ")
	mu.Unlock()
	if !strings.Contains(got, "call-1 tasker__research 1 stage 1; call-1 tasker__research 2 stage 2") {
		t.Errorf("progress: %s", got)
	}
	if srv.plain != 1 {
		t.Errorf("%d calls without a task, want 1 (plain's)", srv.plain)
	}
}

// A connection that breaks while a task runs breaks the call: the task was created, so
// the tool may be running, and the call is not one that never left (which a call that
// is not safe to repeat would be tried again for), though the tasks/get that found the
// connection closed never left itself.
func TestTaskWhoseConnectionBreaksIsALostCall(t *testing.T) {
	srv := newTasker()
	p := newPool(t, map[string]mcpwire.ServerConfig{"tasker": placeholder}, &mcpwire.Options{Dial: srv.dial})
	_, err := p.Call(ctxT(t), "tasker__dies", nil)
	if !errors.Is(err, mcpwire.ErrConnectionLost) || errors.Is(err, mcpwire.ErrUnavailable) {
		t.Fatalf("err = %v, want the connection lost during the call (and not unavailable: never sent)", err)
	}
}

// A task whose call's time runs out is cancelled with tasks/cancel, and the call says
// it had no result in its time.
func TestTaskCancelledWithItsCall(t *testing.T) {
	srv := newTasker()
	p := newPool(t, map[string]mcpwire.ServerConfig{"tasker": placeholder}, &mcpwire.Options{Dial: srv.dial})
	if _, err := p.Lookup(ctxT(t), "tasker__stuck"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := p.Call(ctx, "tasker__stuck", nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the deadline", err)
	}
	eventually(t, "tasks/cancel of stuck-1", func() bool {
		_, cancelled := srv.counts("stuck-1")
		return cancelled
	})
	if polls, _ := srv.counts("stuck-1"); polls == 0 {
		t.Errorf("stuck-1 was never polled")
	}
}
