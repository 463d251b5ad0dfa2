package mcpwire

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// The scopes of a server's MCP session ([ServerConfig.Sessions]).
const (
	SessionsConversation = "conversation"
	SessionsShared       = "shared"
)

// Defaults of [ServerConfig.SessionIdle] and [ServerConfig.MaxSessions].
const (
	DefaultSessionIdle = 10 * time.Minute
	DefaultMaxSessions = 32
)

type conversationKey struct{}

// WithConversation returns ctx for calls made on behalf of a conversation: their
// requests carry it in _meta (messages.MetaConversation), a server under the elicitation policy
// "ask" asks it ([Options.Ask]), and a conversation-scoped server runs them in the
// conversation's own session.
func WithConversation(ctx context.Context, conversation string) context.Context {
	return context.WithValue(ctx, conversationKey{}, conversation)
}

func conversationOf(ctx context.Context) string {
	c, _ := ctx.Value(conversationKey{}).(string)
	return c
}

// SessionReport says what a call of a conversation-scoped server ran in ([WithReport]).
type SessionReport struct {
	// Opened: the conversation's session was opened for the call (this pool had none
	// open for the conversation).
	Opened bool
	// Ended says why this pool's previous session of the conversation ended, when it
	// had one and still remembers it ("it was idle for 10m0s").
	Ended string
}

type reportKey struct{}

// WithReport returns ctx whose calls of conversation-scoped servers fill r.
func WithReport(ctx context.Context, r *SessionReport) context.Context {
	return context.WithValue(ctx, reportKey{}, r)
}

// Scoped reports whether the server gives each conversation its own session: see
// [ServerConfig.Sessions]. Under the automatic scope an http server counts as scoped
// until its first session shows it has no session id.
func (p *Pool) Scoped(server string) bool {
	s, ok := p.server(server)
	return ok && s.scoped()
}

func (s *server) scoped() bool {
	switch s.cfg.Sessions {
	case SessionsConversation:
		return s.cfg.Transport() != TransportJSONRPC
	case SessionsShared:
		return false
	}
	switch s.cfg.Transport() {
	case TransportStdio, TransportSSE:
		return true
	case TransportHTTP:
		s.mu.Lock()
		defer s.mu.Unlock()
		return !s.knownStateless
	}
	return false
}

// conversation is one conversation's session with a server.
type conversation struct {
	sess   session
	cancel context.CancelFunc // ends the session's context
	ready  chan struct{}      // closed when dialing ended; then sess or err is set
	err    error
	used   time.Time
	busy   int // calls under way
}

// conversations are a server's sessions per conversation, at most max at once.
type conversations struct {
	open map[string]*conversation
	// ended remembers why a conversation's session ended, for the next call to say;
	// the oldest are forgotten first (endedOrder) beyond max(64, 4×maxSessions).
	ended      map[string]string
	endedOrder []string
	// freed is closed (and replaced) whenever a session is released or removed.
	freed chan struct{}
}

func (s *server) maxSessions() int {
	if s.cfg.MaxSessions > 0 {
		return s.cfg.MaxSessions
	}
	return DefaultMaxSessions
}

func (s *server) sessionIdle() time.Duration {
	if s.cfg.SessionIdle > 0 {
		return time.Duration(s.cfg.SessionIdle)
	}
	return DefaultSessionIdle
}

// freedLocked wakes the calls waiting for room. s.mu is held.
func (s *server) freedLocked() {
	if s.convs.freed != nil {
		close(s.convs.freed)
	}
	s.convs.freed = make(chan struct{})
}

// endedLocked records why conv's session ended. s.mu is held.
func (s *server) endedLocked(conv, why string) {
	if s.convs.ended == nil {
		s.convs.ended = map[string]string{}
	}
	if _, known := s.convs.ended[conv]; !known {
		s.convs.endedOrder = append(s.convs.endedOrder, conv)
	}
	s.convs.ended[conv] = why
	for len(s.convs.ended) > max(64, 4*s.maxSessions()) && len(s.convs.endedOrder) > 0 {
		delete(s.convs.ended, s.convs.endedOrder[0])
		s.convs.endedOrder = s.convs.endedOrder[1:]
	}
}

// conversationSession returns conv's session, opening it (and closing the least
// recently used idle one when max are open) when it has none; release ends the call's
// use of it.
func (s *server) conversationSession(ctx context.Context, conv string) (sess session, release func(), err error) {
	s.mu.Lock()
	if err := s.err; s.sess == nil && errors.Is(err, ErrMisconfigured) {
		// The server's own session failed so: a conversation's would too.
		s.mu.Unlock()
		return nil, nil, fmt.Errorf("%w: %s: %w", ErrUnavailable, s.name, err)
	}
	for {
		if s.ctx.Err() != nil {
			s.mu.Unlock()
			return nil, nil, ErrClosed
		}
		if s.convs.open == nil {
			s.convs.open = map[string]*conversation{}
		}
		if c := s.convs.open[conv]; c != nil {
			select {
			case <-c.ready:
			default:
				s.mu.Unlock()
				select {
				case <-c.ready:
				case <-ctx.Done():
					return nil, nil, fmt.Errorf("%w: %s: not connected within the call's time: %w", ErrUnavailable, s.name, ctx.Err())
				}
				s.mu.Lock()
				continue
			}
			if c.err == nil && !isDone(c.sess.done()) {
				c.busy++
				c.used = time.Now()
				s.mu.Unlock()
				return c.sess, s.releaser(c), nil
			}
			// Its session ended under it (a stdio server exited): the next one is new.
			delete(s.convs.open, conv)
			if c.err == nil {
				why := "the server ended it (its process exited)"
				if s.cfg.Transport() != TransportStdio {
					why = "the server ended it (the connection closed)"
				}
				s.endedLocked(conv, why)
				go s.closeConversation(c)
			}
			s.freedLocked()
		}
		if len(s.convs.open) >= s.maxSessions() {
			if victim, ok := s.leastRecentlyUsedLocked(); ok {
				c := s.convs.open[victim]
				delete(s.convs.open, victim)
				s.endedLocked(victim, fmt.Sprintf("it was closed to make room for another conversation's (at most %d sessions of the server at once)", s.maxSessions()))
				go s.closeConversation(c)
			} else {
				// Every session has a call under way: wait for one to end.
				if s.convs.freed == nil {
					s.convs.freed = make(chan struct{})
				}
				freed := s.convs.freed
				s.mu.Unlock()
				select {
				case <-freed:
				case <-ctx.Done():
					return nil, nil, fmt.Errorf("%w: %s: all %d sessions are busy: %w", ErrUnavailable, s.name, s.maxSessions(), ctx.Err())
				}
				s.mu.Lock()
				continue
			}
		}
		c := &conversation{ready: make(chan struct{}), busy: 1, used: time.Now()}
		s.convs.open[conv] = c
		ended, had := s.convs.ended[conv]
		if had {
			delete(s.convs.ended, conv)
			s.convs.endedOrder = slices.DeleteFunc(s.convs.endedOrder, func(k string) bool { return k == conv })
		}
		s.mu.Unlock()

		sess, cancel, err := s.dialConversation(ctx)
		s.mu.Lock()
		c.sess, c.cancel, c.err = sess, cancel, err
		close(c.ready)
		if err != nil {
			delete(s.convs.open, conv)
			if had {
				s.endedLocked(conv, ended)
			}
			s.freedLocked()
			s.mu.Unlock()
			return nil, nil, fmt.Errorf("%w: %s: %w", ErrUnavailable, s.name, err)
		}
		s.mu.Unlock()
		if r, ok := ctx.Value(reportKey{}).(*SessionReport); ok && r != nil {
			r.Opened, r.Ended = true, ended
		}
		s.log.Debug("opened a conversation's session", "conversation", conv)
		return sess, s.releaser(c), nil
	}
}

func (s *server) releaser(c *conversation) func() {
	return func() {
		s.mu.Lock()
		c.busy--
		c.used = time.Now()
		s.freedLocked()
		s.mu.Unlock()
	}
}

// leastRecentlyUsedLocked picks the idle, open session used longest ago. s.mu is held.
func (s *server) leastRecentlyUsedLocked() (string, bool) {
	victim, found := "", false
	var oldest time.Time
	for k, c := range s.convs.open {
		select {
		case <-c.ready:
		default:
			continue
		}
		if c.busy > 0 {
			continue
		}
		if !found || c.used.Before(oldest) {
			victim, oldest, found = k, c.used, true
		}
	}
	return victim, found
}

// dialConversation opens a session as connect does, without listing tools (the
// server's shared session keeps the catalog). It lives until closed or the server is
// removed; ctx bounds only the opening.
func (s *server) dialConversation(ctx context.Context) (session, context.CancelFunc, error) {
	if s.oauthErr != nil {
		return nil, nil, s.oauthErr
	}
	life, cancel := context.WithCancel(s.ctx)
	stop := context.AfterFunc(ctx, cancel)
	var t mcp.Transport
	if s.pool.opts.Dial != nil {
		var err error
		if t, err = s.pool.opts.Dial(life, s.name); err != nil {
			stop()
			cancel()
			return nil, nil, err
		}
	}
	sess, err := dial(life, s.name, s.cfg, s.client, t, s.pool.opts.HTTPClient, s.oauth, s.log, s.cfg.CallTimeout())
	if !stop() || err != nil {
		// The call's time ran out while the session opened.
		if err == nil {
			_ = sess.close()
			err = ctx.Err()
		}
		cancel()
		return nil, nil, err
	}
	return sess, cancel, nil
}

// closeConversation closes a session that is no longer anyone's.
func (s *server) closeConversation(c *conversation) {
	<-c.ready
	if c.sess != nil {
		if err := c.sess.close(); err != nil {
			s.log.Debug("closing a conversation's session", "err", err)
		}
	}
	if c.cancel != nil {
		c.cancel()
	}
}

// dropConversation removes conv's session sess after a call found it broken.
func (s *server) dropConversation(conv string, sess session, err error) {
	s.mu.Lock()
	c := s.convs.open[conv]
	mine := c != nil && c.sess == sess
	if mine {
		delete(s.convs.open, conv)
		s.endedLocked(conv, fmt.Sprintf("the session broke (%v)", err))
		s.freedLocked()
	}
	s.mu.Unlock()
	if mine {
		s.log.Info("a conversation's session broke", "conversation", conv, "err", err)
		go s.closeConversation(c)
	}
}

// expireConversations closes the sessions idle for longer than the server's
// sessionIdle, until ctx is done, and then every session.
func (s *server) expireConversations(ctx context.Context) {
	idle := s.sessionIdle()
	tick := time.NewTicker(max(min(idle/4, 30*time.Second), 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			s.closeConversations()
			return
		case <-tick.C:
		}
		var closing []*conversation
		s.mu.Lock()
		for k, c := range s.convs.open {
			select {
			case <-c.ready:
			default:
				continue
			}
			if c.busy == 0 && time.Since(c.used) >= idle {
				delete(s.convs.open, k)
				s.endedLocked(k, fmt.Sprintf("it was closed after %v without a call", idle))
				closing = append(closing, c)
			}
		}
		if len(closing) > 0 {
			s.freedLocked()
		}
		s.mu.Unlock()
		for _, c := range closing {
			s.closeConversation(c)
		}
	}
}

// closeConversations closes every conversation's session and waits for them.
func (s *server) closeConversations() {
	s.mu.Lock()
	open := s.convs.open
	s.convs.open = nil
	s.freedLocked()
	s.mu.Unlock()
	for _, c := range open {
		s.closeConversation(c)
	}
}

// Sessions returns, per conversation-scoped server, the conversations whose sessions
// are open on this pool, sorted.
func (p *Pool) Sessions() map[string][]string {
	out := map[string][]string{}
	for _, s := range p.sorted() {
		if !s.scoped() {
			continue
		}
		s.mu.Lock()
		out[s.name] = []string{}
		for k := range s.convs.open {
			out[s.name] = append(out[s.name], k)
		}
		s.mu.Unlock()
		sort.Strings(out[s.name])
	}
	return out
}

// observeSessions records the toolbus.mcp.sessions gauge: conversations' sessions open,
// by server.
func (p *Pool) observeSessions(mp metric.MeterProvider) {
	if mp == nil {
		return
	}
	_, err := mp.Meter(instrumentScope).Int64ObservableGauge("toolbus.mcp.sessions",
		metric.WithDescription("conversations' MCP sessions open in this executor, by server"),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			for server, convs := range p.Sessions() {
				o.Observe(int64(len(convs)), metric.WithAttributes(attribute.String("server", server)))
			}
			return nil
		}))
	if err != nil {
		p.log.Warn("the sessions gauge", "err", err)
	}
}
