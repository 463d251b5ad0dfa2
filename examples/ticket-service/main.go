// Command ticket-service is a ticket system that predates MCP: plain JSON-RPC 2.0 over
// HTTP POST, one request per POST, with the methods tools/list and tools/call and the
// tool's own JSON as the result. toolbus reaches it as a "jsonrpc" server; see
// toolbus.json next to this file.
//
//	go run ./examples/ticket-service -addr 127.0.0.1:8088
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8088", "address to listen on")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *addr); err != nil {
		fmt.Fprintln(os.Stderr, "ticket-service:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, addr string) error {
	srv := &http.Server{Addr: addr, Handler: newService().Handler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	slog.Info("ticket-service listening", "addr", addr, "endpoint", "/rpc")
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(shutdown)
}

// Ticket is one ticket.
type Ticket struct {
	ID          string    `json:"id"`
	Title       string    `json:"title"`
	Description string    `json:"description,omitempty"`
	Priority    string    `json:"priority"`
	Status      string    `json:"status"`
	Created     time.Time `json:"created"`
}

// service keeps the tickets in memory.
type service struct {
	mu      sync.Mutex
	tickets map[string]*Ticket
	next    int
}

func newService() *service { return &service{tickets: map[string]*Ticket{}} }

// tools is what tools/list answers: MCP tool definitions, so that MCP clients understand.
var tools = json.RawMessage(`[
  {
    "name": "create_ticket",
    "description": "Open a support ticket. Returns the new ticket with its id.",
    "inputSchema": {
      "type": "object",
      "properties": {
        "title": {"type": "string", "description": "One line summary"},
        "description": {"type": "string", "description": "What happened, in detail"},
        "priority": {"type": "string", "enum": ["low", "normal", "high"], "description": "Default normal"}
      },
      "required": ["title"],
      "additionalProperties": false
    },
    "annotations": {"readOnlyHint": false, "idempotentHint": false, "destructiveHint": false}
  },
  {
    "name": "get_ticket_status",
    "description": "The status of a ticket: open, in_progress or closed.",
    "inputSchema": {
      "type": "object",
      "properties": {"id": {"type": "string", "description": "Ticket id, like T-1"}},
      "required": ["id"]
    },
    "annotations": {"readOnlyHint": true, "idempotentHint": true}
  }
]`)

// JSON-RPC error codes.
const (
	codeParse          = -32700
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
)

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *rpcError) Error() string { return e.Message }

// Handler serves JSON-RPC at /rpc.
func (s *service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /rpc", s.serveRPC)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	return mux
}

func (s *service) serveRPC(w http.ResponseWriter, r *http.Request) {
	var req struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params"`
	}
	resp := map[string]any{"jsonrpc": "2.0"}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
		resp["id"], resp["error"] = nil, &rpcError{Code: codeParse, Message: err.Error()}
		writeJSON(w, resp)
		return
	}
	resp["id"] = req.ID
	result, err := s.dispatch(req.JSONRPC, req.Method, req.Params)
	var rerr *rpcError
	switch {
	case errors.As(err, &rerr):
		resp["error"] = rerr
	case err != nil:
		resp["error"] = &rpcError{Code: -32000, Message: err.Error()}
	default:
		resp["result"] = result
	}
	writeJSON(w, resp)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func (s *service) dispatch(version, method string, params json.RawMessage) (any, error) {
	if version != "2.0" {
		return nil, &rpcError{Code: codeInvalidRequest, Message: `"jsonrpc" must be "2.0"`}
	}
	switch method {
	case "tools/list":
		return map[string]any{"tools": tools}, nil
	case "tools/call":
		var call struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		if err := json.Unmarshal(params, &call); err != nil {
			return nil, &rpcError{Code: codeInvalidParams, Message: err.Error()}
		}
		switch call.Name {
		case "create_ticket":
			return s.create(call.Arguments)
		case "get_ticket_status":
			return s.status(call.Arguments)
		}
		return nil, &rpcError{Code: codeInvalidParams, Message: fmt.Sprintf("unknown tool %q", call.Name)}
	}
	return nil, &rpcError{Code: codeMethodNotFound, Message: fmt.Sprintf("no method %q", method)}
}

func (s *service) create(args json.RawMessage) (any, error) {
	var in struct {
		Title       string `json:"title"`
		Description string `json:"description"`
		Priority    string `json:"priority"`
	}
	dec := json.NewDecoder(strings.NewReader(string(args)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return nil, &rpcError{Code: codeInvalidParams, Message: "arguments: " + err.Error()}
	}
	if strings.TrimSpace(in.Title) == "" {
		return nil, &rpcError{Code: codeInvalidParams, Message: "title: a ticket needs a title"}
	}
	switch in.Priority {
	case "":
		in.Priority = "normal"
	case "low", "normal", "high":
	default:
		return nil, &rpcError{Code: codeInvalidParams, Message: fmt.Sprintf("priority: %q is not low, normal or high", in.Priority)}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	t := &Ticket{ID: fmt.Sprintf("T-%d", s.next), Title: in.Title, Description: in.Description,
		Priority: in.Priority, Status: "open", Created: time.Now().UTC()}
	s.tickets[t.ID] = t
	return t, nil
}

func (s *service) status(args json.RawMessage) (any, error) {
	var in struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(args, &in); err != nil || in.ID == "" {
		return nil, &rpcError{Code: codeInvalidParams, Message: "id: want a ticket id like T-1"}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tickets[in.ID]
	if !ok {
		// The tool ran and found nothing: an MCP-style result with isError, which
		// toolbus reports as the tool's own error.
		return map[string]any{
			"isError": true,
			"content": []map[string]string{{"type": "text", "text": fmt.Sprintf("there is no ticket %s", in.ID)}},
		}, nil
	}
	return map[string]string{"id": t.ID, "status": t.Status}, nil
}
