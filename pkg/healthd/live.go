package healthd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolbus/toolbus/pkg/mcpwire"
	"github.com/toolbus/toolbus/pkg/mcpwire/oauth"
	"github.com/toolbus/toolbus/pkg/messages"
)

// Sessions is what holds the live sessions with the servers: the executor's pool
// ([mcpwire.Pool.Check]).
type Sessions interface {
	Check(ctx context.Context, server string, since time.Time) (mcpwire.ProbeResult, mcpwire.Liveness)
}

// AnswerProbes answers healthd's probes ([messages.ProbeSubject], in the queue group
// [messages.ProbeQueue]) over the live sessions of sessions, as the replica named
// replica, until ctx is done. The executor runs it: healthd then judges a server by the
// session that serves its calls, and never starts a process or a session of its own
// while an executor serves the server.
func AnswerProbes(ctx context.Context, nc *nats.Conn, replica string, sessions Sessions, log *slog.Logger) error {
	stop, err := ServeProbes(nc, replica, sessions, log)
	if err != nil {
		return err
	}
	<-ctx.Done()
	stop()
	return nil
}

// ServeProbes is [AnswerProbes] from the moment it returns — the subscription made and
// flushed to the server — until stop is called: an executor set up before healthd in
// one process is asked from healthd's first probe, rather than healthd finding nobody
// to ask and starting the server's process itself.
func ServeProbes(nc *nats.Conn, replica string, sessions Sessions, log *slog.Logger) (stop func(), err error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	prefix := messages.ProbeSubject("")
	sub, err := nc.QueueSubscribe(messages.AllProbes, messages.ProbeQueue, func(m *nats.Msg) {
		server, _ := strings.CutPrefix(m.Subject, prefix)
		var req messages.ProbeRequest
		if err := json.Unmarshal(m.Data, &req); err != nil || m.Reply == "" {
			log.Debug("health: a probe request nobody can answer", "subject", m.Subject, "err", err)
			return
		}
		timeout := time.Duration(req.Timeout)
		if timeout <= 0 || timeout > 10*time.Minute {
			timeout = DefaultTimeout
		}
		// Each in a goroutine of its own: a server that answers late delays no other's probe.
		go func() {
			pctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			r, live := sessions.Check(pctx, server, req.Since)
			a := messages.ProbeAnswer{Server: server, Executor: replica}
			switch live {
			case mcpwire.NotServed:
				a.NotServed = true
			case mcpwire.Starting:
				a.Starting, a.Note = true, r.Note
			default:
				a.LatencyMS, a.Protocol, a.Tools, a.Note, a.Transport = float64(r.Latency.Microseconds())/1000, r.Protocol, r.Tools, r.Note, r.Transport
				if r.Err != nil {
					a.Error = r.Err.Error()
					var nl *oauth.NeedsLoginError
					if errors.As(r.Err, &nl) {
						a.NeedsLogin, a.Error = true, nl.Reason
					}
				}
			}
			body, _ := json.Marshal(a)
			if err := m.Respond(body); err != nil {
				log.Debug("health: answering a probe", "server", server, "err", err)
			}
		}()
	})
	if err == nil {
		err = nc.Flush()
	}
	if err != nil {
		cancel()
		return nil, fmt.Errorf("health: answer probes: %w", err)
	}
	return func() { _ = sub.Unsubscribe(); cancel() }, nil
}

// errNotServed: no executor serves the server (none answered, or the one that did
// has no such server).
var errNotServed = errors.New("no executor serves the server")

// askExecutors probes server over an executor's live session: the result, or
// errNotServed when no executor serves it.
func askExecutors(ctx context.Context, nc *nats.Conn, server string, since time.Time, timeout time.Duration) (Result, error) {
	// The executor's probe ends a little before the request does, so that its answer
	// (why the session did not answer in time) arrives rather than a bare deadline.
	if d, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(d))
	}
	body, _ := json.Marshal(messages.ProbeRequest{Since: since, Timeout: messages.Duration(timeout * 4 / 5)})
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	m, err := nc.RequestWithContext(rctx, messages.ProbeSubject(server), body)
	if errors.Is(err, nats.ErrNoResponders) {
		return Result{}, errNotServed
	}
	if err != nil {
		return Result{Latency: time.Since(start), Err: fmt.Errorf("asking the executors: %w", err)}, nil
	}
	var a messages.ProbeAnswer
	if err := json.Unmarshal(m.Data, &a); err != nil {
		return Result{Latency: time.Since(start), Err: fmt.Errorf("the executor's answer: %w", err)}, nil
	}
	if a.NotServed {
		return Result{}, errNotServed
	}
	r := Result{Latency: time.Duration(a.LatencyMS * float64(time.Millisecond)), Protocol: a.Protocol, Tools: a.Tools,
		Note: a.Note, Pending: a.Starting, Via: "executor " + a.Executor, Transport: a.Transport}
	switch {
	case a.NeedsLogin:
		r.Err = &oauth.NeedsLoginError{Server: server, Reason: a.Error}
	case a.Error != "":
		r.Err = errors.New(a.Error)
	}
	return r, nil
}
