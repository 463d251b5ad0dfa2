package mcpwire

import (
	"context"
	"slices"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolbus/toolbus/pkg/messages"
)

// UpdatedFunc receives a server's notifications/resources/updated, once for each
// conversation subscribed to the resource on the session it came on (the
// resources_subscribe tool, under "subscriptions": true).
type UpdatedFunc func(ctx context.Context, u messages.ResourceUpdated)

// subscriptions are the conversations subscribed to each resource on each session of a
// server. A session is subscribed at the server at its first conversation's subscribe
// and unsubscribed after its last one's unsubscribe; the conversations of a session that
// ends are forgotten with it.
type subscriptions struct {
	mu sync.Mutex
	of map[*mcp.ClientSession]map[string][]string // session → URI → conversations
}

// add subscribes conv to uri on ms, and reports whether the session is not subscribed
// at the server yet.
func (s *subscriptions) add(ms *mcpSession, uri, conv string) (first bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.of == nil {
		s.of = map[*mcp.ClientSession]map[string][]string{}
	}
	uris := s.of[ms.cs]
	if uris == nil {
		uris = map[string][]string{}
		s.of[ms.cs] = uris
		context.AfterFunc(ms.life, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			delete(s.of, ms.cs)
		})
	}
	first = len(uris[uri]) == 0
	if !slices.Contains(uris[uri], conv) {
		uris[uri] = append(uris[uri], conv)
	}
	return first
}

// remove ends conv's subscription to uri on ms, and reports whether it was the last one
// of the session, which the server is then asked to end.
func (s *subscriptions) remove(ms *mcpSession, uri, conv string) (last bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	uris := s.of[ms.cs]
	if uris == nil || !slices.Contains(uris[uri], conv) {
		return false
	}
	uris[uri] = slices.DeleteFunc(uris[uri], func(c string) bool { return c == conv })
	if len(uris[uri]) > 0 {
		return false
	}
	delete(uris, uri)
	return true
}

// conversations are those subscribed to uri on cs.
func (s *subscriptions) conversations(cs *mcp.ClientSession, uri string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.of[cs][uri])
}

// subscription runs the subscribe or unsubscribe tool (remote) for the call's
// conversation on ms: the request goes to the server only for the session's first
// subscription to the URI or its last; the others are answered at once.
func (s *server) subscription(ctx context.Context, ms *mcpSession, remote string, a featureArgs) (*mcp.CallToolResult, error) {
	conv := conversationOf(ctx)
	if remote == remoteSubscribe {
		if !s.subs.add(ms, a.URI, conv) {
			return structured(map[string]any{"subscribed": a.URI})
		}
		res, err := ms.callFeature(ctx, remote, a)
		if err != nil {
			s.subs.remove(ms, a.URI, conv)
		}
		return res, err
	}
	if !s.subs.remove(ms, a.URI, conv) {
		return structured(map[string]any{"unsubscribed": a.URI})
	}
	return ms.callFeature(ctx, remote, a)
}

// updated passes a server's notifications/resources/updated on to each conversation
// subscribed to the resource on the session it came on.
func (s *server) updated(ctx context.Context, cs *mcp.ClientSession, uri string) {
	listen := s.pool.opts.Updated
	if listen == nil {
		return
	}
	for _, conv := range s.subs.conversations(cs, uri) {
		if conv != "" {
			listen(ctx, messages.ResourceUpdated{Conversation: conv, Server: s.name, URI: uri})
		}
	}
}
