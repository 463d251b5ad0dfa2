package mcpwire

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

const taskList = `{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"echo","inputSchema":{"type":"object"}},` +
	`{"name":"research","execution":{"taskSupport":"required"},"inputSchema":{"type":"object"}},` +
	`{"name":"maybe","execution":{"taskSupport":"optional"},"inputSchema":{"type":"object"}}]}}`

// chunked reads r in pieces of size n, as a network delivers it.
type chunked struct {
	r io.Reader
	n int
}

func (c chunked) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), c.n)]) }

// A tools/list answer marks task-only tools however the body arrives: JSON whole, or an
// event stream cut anywhere; the body passes through unchanged.
func TestSniffedBodyFindsTaskOnlyTools(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		sse  bool
	}{
		{"json", taskList, false},
		{"event stream", "event: message\nid: 1\ndata: " + taskList + "\n\n", true},
		{"event stream, CRLF-free, two events", "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\n\ndata: " + taskList + "\n\n", true},
	} {
		for _, size := range []int{1, 7, 64, 1 << 20} {
			tasks := &taskTools{}
			b := &sniffedBody{ReadCloser: io.NopCloser(chunked{bytes.NewReader([]byte(tc.body)), size}), sse: tc.sse, tasks: tasks}
			got, err := io.ReadAll(b)
			if err != nil || string(got) != tc.body {
				t.Fatalf("%s/%d: the body changed: %q, %v", tc.name, size, got, err)
			}
			if !tasks.required("research") || tasks.required("echo") || tasks.required("maybe") {
				t.Errorf("%s/%d: task-only tools %v, want research alone", tc.name, size, tasks.modes)
			}
		}
	}
}

func FuzzSniffedBody(f *testing.F) {
	f.Add([]byte(taskList), false, 3)
	f.Add([]byte("data: "+taskList+"\n\n"), true, 5)
	f.Add([]byte("data: {\"result\":{\"tools\":[{\"name\":1}]}, \"taskSupport\"\n"), true, 1)
	f.Fuzz(func(t *testing.T, body []byte, sse bool, size int) {
		size = 1 + abs(size)%4096
		tasks := &taskTools{}
		b := &sniffedBody{ReadCloser: io.NopCloser(chunked{bytes.NewReader(body), size}), sse: sse, tasks: tasks}
		got, err := io.ReadAll(b)
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("the body changed")
		}
	})
}

func abs(n int) int {
	if n < 0 {
		if n == -n {
			return 0
		}
		return -n
	}
	return n
}

// Only answers that may hold a tools/list result are read: a tools/call's pass untouched.
func TestMayListTools(t *testing.T) {
	post := func(body string, header map[string]string) *http.Request {
		r, _ := http.NewRequest(http.MethodPost, "http://x/mcp", strings.NewReader(body))
		for k, v := range header {
			r.Header.Set(k, v)
		}
		return r
	}
	get, _ := http.NewRequest(http.MethodGet, "http://x/sse", nil)
	for _, tc := range []struct {
		name string
		r    *http.Request
		want bool
	}{
		{"tools/list body", post(`{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{}}`, nil), true},
		{"tools/call body", post(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"tools/list"}}`, nil), false},
		{"Mcp-Method header", post(`{}`, map[string]string{"Mcp-Method": "tools/list"}), true},
		{"Mcp-Method header of a call", post(`{"method":"tools/list"}`, map[string]string{"Mcp-Method": "tools/call"}), false},
		{"the SSE stream", get, true},
	} {
		if got := mayListTools(tc.r); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A task-augmented call's answer and tasks/get's are read or refused with a parse error,
// never anything else: a task read has an id and one of the specification's statuses.
func FuzzTaskAnswer(f *testing.F) {
	for _, seed := range []string{
		`{"task":{"taskId":"t1","status":"working","pollInterval":1000,"ttl":300000,"createdAt":"2026-11-27T12:00:00Z"}}`,
		`{"content":[{"type":"text","text":"at once"}]}`,
		`{"task":null,"content":[]}`,
		`{"task":{"taskId":"","status":"working"}}`,
		`{"task":{"taskId":"t","status":"sleeping"}}`,
		`{"task":{"taskId":7}}`,
		`{"taskId":"t1","status":"input_required","statusMessage":"which one?"}`,
		`{"taskId":"t1","status":"completed","pollInterval":-5}`,
		`[]`, `null`, `{"task":"t1"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		check := func(what string, task *taskState, err error) {
			if err != nil {
				var werr *jsonrpc.Error
				if !errors.As(err, &werr) || werr.Code != codeParseError {
					t.Fatalf("%s %q: %v is no parse error", what, raw, err)
				}
				return
			}
			if task == nil {
				return
			}
			if task.ID == "" {
				t.Fatalf("%s %q: a task without an id", what, raw)
			}
			if d := task.poll(); d < minPoll || d > maxPoll {
				t.Fatalf("%s %q: polled every %v", what, raw, d)
			}
			switch task.Status {
			case taskWorking, taskInputRequired, taskCompleted, taskFailed, taskCancelled:
			default:
				t.Fatalf("%s %q: status %q", what, raw, task.Status)
			}
		}
		created, err := decodeCreated(raw)
		check("created", created, err)
		got, err := decodeTask(raw)
		check("tasks/get", got, err)
		if err == nil && got == nil {
			t.Fatalf("tasks/get %q: no task and no error", raw)
		}
	})
}

// scripted answers each method from its map; a method it does not know fails as a
// request on a closed connection does (never sent).
type scripted map[string]string

func (s scripted) request(_ context.Context, method string, _ any) (json.RawMessage, error) {
	if a, ok := s[method]; ok {
		return json.RawMessage(a), nil
	}
	return nil, fmt.Errorf("%w: %s: the connection is closed: %w", errRejected, method, io.EOF)
}

// Once the server made the task, a request about it that never left (the connection
// closed under tasks/get or tasks/result) leaves the call a broken connection, not a
// call never sent: a tool that is not safe to repeat is not sent again.
func TestTaskUnderWayIsNeverUnsent(t *testing.T) {
	created := `{"task":{"taskId":"t-1","status":"working","pollInterval":1}}`
	for name, raw := range map[string]scripted{
		"tasks/get":    {"tools/call": created},
		"tasks/result": {"tools/call": created, "tasks/get": `{"taskId":"t-1","status":"completed"}`},
	} {
		t.Run(name, func(t *testing.T) {
			sess := &mcpSession{life: context.Background()}
			_, err := callAsTask(context.Background(), sess, raw, "research", json.RawMessage(`{}`), func(float64, string) {})
			if err == nil || neverSent(err) || !brokeConnection(err) || !strings.Contains(err.Error(), "t-1") {
				t.Fatalf("err = %v (never sent: %v); want a connection broken while task t-1 ran", err, neverSent(err))
			}
		})
	}
	// Before the task is made, a tools/call that never left is one.
	_, err := callAsTask(context.Background(), &mcpSession{life: context.Background()}, scripted{}, "research", json.RawMessage(`{}`), func(float64, string) {})
	if !neverSent(err) {
		t.Fatalf("err = %v; a tools/call that never left is never sent", err)
	}
}
