package frontdoor

import (
	"context"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxAdopted bounds the sessions of other replicas one door serves at once.
const maxAdopted = 10000

// adoptedSession is a session another front-door replica issued, whose client came here
// (the replica died, or a balancer moved it): served by this door with the session's id,
// so that a retried request is the same response.
type adoptedSession struct {
	transport *mcp.StreamableServerTransport
	session   *mcp.ServerSession
	user      string
}

// adoptSessions serves requests of sessions this door did not issue itself — another
// replica's, taken to be initialized — and passes every other request to next (the
// go-sdk's handler). The door holds no state another replica needs: a session's id, the
// caller's token and the request id make each call's response id, and the pipeline has
// the rest. A session id that is not one the go-sdk makes (26 letters and digits) is
// left to next, which answers 404.
func (d *Door) adoptSessions(next http.Handler, timeout time.Duration, events mcp.EventStore) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("Mcp-Session-Id")
		if _, ours := d.issued.Load(id); id == "" || ours || !sessionIDShape(id) {
			next.ServeHTTP(w, r)
			return
		}
		user := ""
		if ti := auth.TokenInfoFromContext(r.Context()); ti != nil {
			user = ti.UserID
		}
		d.mu.Lock()
		a := d.adopted[id]
		d.mu.Unlock()
		if a == nil {
			if r.Method != http.MethodPost {
				next.ServeHTTP(w, r) // a GET or DELETE of a session nobody has: 404
				return
			}
			var err error
			if a, err = d.adopt(id, user, tenantOf(r.Context()), r.Header.Get("Mcp-Protocol-Version"), timeout, events); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		if a.user != user {
			http.Error(w, "session user mismatch", http.StatusForbidden)
			return
		}
		if r.Method == http.MethodDelete {
			a.session.Close()
			w.WriteHeader(http.StatusNoContent)
			return
		}
		a.transport.ServeHTTP(w, r)
	})
}

// adopt connects tenant's server to a new transport of session id, as initialized.
func (d *Door) adopt(id, user, tenant, version string, timeout time.Duration, events mcp.EventStore) (*adoptedSession, error) {
	d.mu.Lock()
	if a := d.adopted[id]; a != nil {
		d.mu.Unlock()
		return a, nil
	}
	full := len(d.adopted) >= maxAdopted
	d.mu.Unlock()
	if full {
		return nil, errTooManySessions
	}
	if version == "" {
		version = "2025-06-18"
	}
	t := &mcp.StreamableServerTransport{SessionID: id, EventStore: events}
	ss, err := d.Server(tenant).Connect(context.Background(), t, &mcp.ServerSessionOptions{State: &mcp.ServerSessionState{
		InitializeParams:          &mcp.InitializeParams{ProtocolVersion: version, Capabilities: &mcp.ClientCapabilities{}, ClientInfo: &mcp.Implementation{Name: "adopted"}},
		InitializedParams:         &mcp.InitializedParams{},
		NegotiatedProtocolVersion: version,
	}})
	if err != nil {
		return nil, err
	}
	a := &adoptedSession{transport: t, session: ss, user: user}
	d.mu.Lock()
	if prev := d.adopted[id]; prev != nil { // adopted meanwhile by another request
		d.mu.Unlock()
		ss.Close()
		return prev, nil
	}
	d.adopted[id] = a
	d.mu.Unlock()
	idle := time.AfterFunc(timeout, func() { ss.Close() })
	go func() {
		_ = ss.Wait()
		idle.Stop()
		d.mu.Lock()
		delete(d.adopted, id)
		d.mu.Unlock()
	}()
	return a, nil
}

// sessionIDShape reports whether id looks like the go-sdk's session ids (rand.Text: 26
// characters of base32's alphabet).
func sessionIDShape(id string) bool {
	if len(id) != 26 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'A' && c <= 'Z' || c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}
