package mcpwire

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
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
				t.Errorf("%s/%d: task-only tools %v, want research alone", tc.name, size, tasks.names)
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
