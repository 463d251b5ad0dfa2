package frontdoor

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Serve serves one MCP connection of tenant's client on t (an mcp.StdioTransport for
// `toolbus mcp`, one of mcp.NewInMemoryTransports in tests) until the client closes it
// or ctx is done. A connection without a session id of its own (stdio) gets a random
// one: its calls are a conversation of their own.
func (d *Door) Serve(ctx context.Context, tenant string, t mcp.Transport) error {
	ss, err := d.Server(tenant).Connect(ctx, &idTransport{t}, nil)
	if err != nil {
		return fmt.Errorf("frontdoor: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { ss.Close() })
	defer stop()
	return ss.Wait()
}

// idTransport wraps a transport so that each tools/call read carries its JSON-RPC id in
// _meta (MetaRequestID).
type idTransport struct{ mcp.Transport }

func (t *idTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	session := c.SessionID()
	if session == "" {
		session = rand.Text()
	}
	return &idConn{Connection: c, session: session}, nil
}

type idConn struct {
	mcp.Connection
	session string
}

func (c *idConn) SessionID() string { return c.session }

func (c *idConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if req, ok := m.(*jsonrpc.Request); ok && err == nil && req.Method == "tools/call" && req.IsCall() {
		id, merr := json.Marshal(req.ID.Raw())
		if merr == nil {
			if p, perr := withRequestID(req.Params, id); perr == nil {
				req.Params = p
			}
		}
	}
	return m, err
}

// withRequestID returns the params of a tools/call with _meta[MetaRequestID] set to id,
// every other member kept byte for byte (the arguments above all).
func withRequestID(params, id json.RawMessage) (json.RawMessage, error) {
	members, err := object(params)
	if err != nil {
		return nil, err
	}
	meta, err := object(members["_meta"])
	if err != nil {
		return nil, fmt.Errorf("_meta: %w", err)
	}
	meta[MetaRequestID] = id
	members["_meta"] = writeObject(meta)
	return writeObject(members), nil
}

// object reads the members of a JSON object, each value as it is written; empty or
// null is an empty object.
func object(raw json.RawMessage) (map[string]json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return m, nil
	}
	if raw[0] != '{' {
		return nil, errors.New("not an object")
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// writeObject writes the members, each value verbatim (encoding/json would compact and
// re-escape them).
func writeObject(m map[string]json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	first := true
	for k, v := range m {
		if !first {
			b.WriteByte(',')
		}
		first = false
		key, _ := json.Marshal(k)
		b.Write(key)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes()
}
