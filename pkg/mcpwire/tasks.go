package mcpwire

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
)

// MCP tasks (SEP-1686): a tool whose tools/list entry says
// "execution": {"taskSupport": "required"} can only be called as a task, which the
// go-sdk in use does not do — and it drops the field when it decodes the list. toolbus
// reads the field off the raw messages (taskTools) and leaves such tools out of the
// catalog, saying why, rather than list a tool every call of which fails.

// taskTools collects the names of the tools a server marks as requiring tasks.
type taskTools struct {
	mu    sync.Mutex
	names map[string]bool
}

// observe reads a JSON-RPC message, or a response's result, for a tools/list result
// with task-only tools.
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
		if tl.Execution.TaskSupport == "required" {
			if t.names == nil {
				t.names = map[string]bool{}
			}
			t.names[tl.Name] = true
		}
	}
}

type listedTool struct {
	Name      string `json:"name"`
	Execution struct {
		TaskSupport string `json:"taskSupport"`
	} `json:"execution"`
}

// required reports whether the server marked the tool called name as task-only.
func (t *taskTools) required(name string) bool {
	if t == nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.names[name]
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
