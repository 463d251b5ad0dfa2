package engineering

import (
	"context"
	"slices"
	"sync"
)

// Session is one conversation's engineering state. The executor stores it as JSON in a
// JetStream key-value bucket keyed by conversation, so it stays small and plain.
type Session struct {
	// ActiveDomains are the domains activated in the conversation, in activation order.
	ActiveDomains []string `json:"active_domains,omitempty"`
	// AllowedTools are the calculators the active domains made callable through
	// execute_tool.
	AllowedTools []string `json:"allowed_tools,omitempty"`
}

// Active reports whether domain is active in the session.
func (s *Session) Active(domain string) bool { return slices.Contains(s.ActiveDomains, domain) }

// Allowed reports whether the calculator named tool may run in the session.
func (s *Session) Allowed(tool string) bool { return slices.Contains(s.AllowedTools, tool) }

// activate adds domain and its tools; with exclusive set it first drops every other domain.
func (s *Session) activate(domain string, tools []string, exclusive bool) {
	if exclusive {
		s.ActiveDomains, s.AllowedTools = nil, nil
	}
	if !s.Active(domain) {
		s.ActiveDomains = append(s.ActiveDomains, domain)
	}
	for _, t := range tools {
		if !s.Allowed(t) {
			s.AllowedTools = append(s.AllowedTools, t)
		}
	}
}

func (s Session) clone() Session {
	return Session{ActiveDomains: slices.Clone(s.ActiveDomains), AllowedTools: slices.Clone(s.AllowedTools)}
}

// FreshSessionStore is a SessionStore that serves Get from a cache which may briefly lag
// the store; GetFresh reads the store itself. A calculator is refused for an inactive
// domain only after GetFresh agrees.
type FreshSessionStore interface {
	SessionStore
	GetFresh(ctx context.Context, conversation string) (Session, error)
}

// SessionStore keeps sessions by conversation id. Implementations must be safe for
// concurrent use; sessiontest.Run is the suite every implementation must pass.
type SessionStore interface {
	// Get returns the conversation's session, or the zero Session (and no error) when
	// the conversation has none yet.
	Get(ctx context.Context, conversation string) (Session, error)
	// Update applies fn to the conversation's session atomically: no other update may
	// interleave between the read and the write. When fn returns an error nothing is
	// written and Update returns that error. fn may be called more than once (a store
	// built on compare-and-swap retries on conflict), so it must not have side effects.
	Update(ctx context.Context, conversation string, fn func(*Session) error) error
}

// NewMemorySessions returns a SessionStore that keeps sessions in memory: for tests and
// the standalone MCP server. It never forgets a session.
func NewMemorySessions() SessionStore {
	return &memorySessions{m: make(map[string]Session)}
}

type memorySessions struct {
	mu sync.Mutex
	m  map[string]Session
}

func (s *memorySessions) Get(ctx context.Context, conversation string) (Session, error) {
	if err := ctx.Err(); err != nil {
		return Session{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[conversation].clone(), nil
}

func (s *memorySessions) Update(ctx context.Context, conversation string, fn func(*Session) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.m[conversation].clone()
	if err := fn(&sess); err != nil {
		return err
	}
	s.m[conversation] = sess
	return nil
}
