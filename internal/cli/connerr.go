package cli

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/toolbus/toolbus/pkg/bus"
)

// NATS's refusals said as such (issue 52): a wrong password is "NATS authorization
// violation: the server refused user …", not a service waiting for ever for streams
// to be provisioned; an operation a user has no right to is "NATS permissions
// violation: user … may not publish to …", said when the server reports it, not a
// command that ends "context canceled" or asks whether toolbus is running.

// connectError is the error of a connection that could not be made: its message with
// the URLs' passwords masked, NATS's refusal of the credentials said as such, and the
// error underneath still there for errors.Is.
type connectError struct {
	msg string
	err error
}

func (e *connectError) Error() string { return e.msg }
func (e *connectError) Unwrap() error { return e.err }

func newConnectError(url string, err error) error {
	if a := bus.Access(err, bus.Credentials(url)); a != nil {
		err = a
	}
	return &connectError{msg: redactURLs(fmt.Sprintf("connect to %s: %v", url, err)), err: err}
}

// asyncErrors is the connection's handler of the errors the server reports on the
// side: each refusal is noted (bus.NoteAccess, for bus.Explain to name when the request
// that caused it times out) and said at once — logged as an error by a service, printed
// by a one-shot command, once each — and the others are logged as warnings, or printed
// as NATS's default handler prints them.
func (f connectFlags) asyncErrors(log *slog.Logger) nats.ErrHandler {
	var mu sync.Mutex
	said := map[string]bool{}
	return func(nc *nats.Conn, sub *nats.Subscription, err error) {
		a := bus.NoteAccess(nc, err)
		switch {
		case log != nil && a != nil:
			args := []any{"err", a}
			if a.Subject != "" {
				args = append(args, "op", a.Op, "subject", a.Subject)
			}
			log.Error("NATS refused", args...)
		case log != nil:
			if sub != nil {
				log.Warn("NATS error", "err", err, "subject", sub.Subject)
			} else {
				log.Warn("NATS error", "err", err)
			}
		case f.stderr != nil:
			msg := err.Error()
			if a != nil {
				msg = a.Error()
			}
			mu.Lock()
			first := !said[msg]
			said[msg] = true
			mu.Unlock()
			if first {
				fmt.Fprintf(f.stderr, "toolbus: %s\n", redactURLs(msg))
			}
		}
	}
}

// reconnectError logs a failed connection attempt of a service: NATS refusing the
// credentials as an error naming the user, anything else as NATS not reachable.
func reconnectError(log *slog.Logger, shown string) nats.ConnErrHandler {
	return func(nc *nats.Conn, err error) {
		if a := bus.NoteAccess(nc, err); a != nil {
			log.Error("NATS refused the connection; trying again", "url", shown, "err", a)
			return
		}
		log.Warn("NATS not reachable; trying again", "url", shown, "err", err)
	}
}
