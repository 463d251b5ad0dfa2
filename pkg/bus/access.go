package bus

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"
	"weak"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NATS refuses two ways, and neither says so where it shows: a connection whose
// credentials it does not accept (an authorization violation) is retried, and a
// service's JetStream requests time out; an operation its user has no right to (a
// permissions violation) is reported on the side, to the connection's error handler,
// while the request that made it waits for its timeout. AccessError says what was
// refused and to whom; Explain turns the errors a refusal causes into it.

// AccessError is NATS refusing a connection's credentials (Op empty: an authorization
// violation, an expired or revoked authentication), an operation its user has no right
// to (Violation: a permissions violation, of Op on Subject), or JetStream to
// an account that does not have it.
type AccessError struct {
	// Who the connection authenticates as: `user "executor"`, or the token or
	// credentials it gave when no user name can be shown.
	Who string
	// Op ("publish" or "subscribe") and Subject, of a permissions violation; Op is
	// "" when the server's message named neither.
	Op, Subject string
	// Violation is set for a permissions violation.
	Violation bool
	// Err is NATS's error.
	Err error
}

func (e *AccessError) Error() string {
	switch {
	case e.Violation && e.Op != "":
		return fmt.Sprintf("NATS permissions violation: %s may not %s to %q (deploy/nats.conf lists each user's rights: a service's, an orchestrator's)", e.Who, e.Op, e.Subject)
	case e.Violation:
		return fmt.Sprintf("NATS permissions violation: %s lacks a right (%v)", e.Who, e.Err)
	case errors.Is(e.Err, jetstream.ErrJetStreamNotEnabledForAccount):
		return fmt.Sprintf("NATS refused JetStream to %s: its account has no JetStream (%v)", e.Who, e.Err)
	case strings.Contains(strings.ToLower(e.Err.Error()), "expired"), strings.Contains(strings.ToLower(e.Err.Error()), "revoked"):
		return fmt.Sprintf("NATS authorization: the server refused %s (%v)", e.Who, e.Err)
	}
	return fmt.Sprintf("NATS authorization violation: the server refused %s (wrong user name or password, or a user it does not know)", e.Who)
}

// Unwrap is NATS's error: errors.Is(err, nats.ErrPermissionViolation) and
// nats.ErrAuthorization hold.
func (e *AccessError) Unwrap() error { return e.Err }

// violation matches the server's permissions violation: `Permissions Violation for
// Publish to "subject"`, `... for Subscription to "subject"` (with a queue group, `using
// queue "q"` follows).
var violation = regexp.MustCompile(`(?i)permissions violation for (publish|subscription) to "?([^"\s]+)"?`)

// Access returns err as an AccessError of the connection's credentials who (see
// Credentials), or nil when err is not NATS refusing them.
func Access(err error, who string) *AccessError {
	if err == nil {
		return nil
	}
	var a *AccessError
	if errors.As(err, &a) {
		return a
	}
	msg := strings.ToLower(err.Error())
	switch {
	case errors.Is(err, nats.ErrPermissionViolation) || strings.Contains(msg, "permissions violation"):
		a = &AccessError{Who: who, Err: err, Violation: true}
		if !errors.Is(err, nats.ErrPermissionViolation) {
			a.Err = fmt.Errorf("%w: %v", nats.ErrPermissionViolation, err)
		}
		if m := violation.FindStringSubmatch(err.Error()); m != nil {
			a.Op, a.Subject = "publish", m[2]
			if strings.EqualFold(m[1], "subscription") {
				a.Op = "subscribe"
			}
		}
		return a
	case errors.Is(err, nats.ErrAuthorization) || strings.Contains(msg, "authorization violation"):
		if !errors.Is(err, nats.ErrAuthorization) {
			err = fmt.Errorf("%w (%v)", nats.ErrAuthorization, err)
		}
		return &AccessError{Who: who, Err: err}
	case errors.Is(err, nats.ErrAuthExpired), errors.Is(err, nats.ErrAuthRevoked), errors.Is(err, nats.ErrAccountAuthExpired),
		strings.Contains(msg, "authentication expired"), strings.Contains(msg, "authentication revoked"):
		return &AccessError{Who: who, Err: err}
	case errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
		return &AccessError{Who: who, Err: err}
	}
	return nil
}

// Credentials says whom a connection to urls (comma-separated NATS URLs) authenticates
// as, for messages: `user "NAME"` for a user with a password (URLUser), else "a token"
// for a URL's lone user name (NATS's token: not to be shown), else "no credentials".
func Credentials(urls string) string {
	token := false
	for _, u := range strings.Split(urls, ",") {
		p, err := url.Parse(strings.TrimSpace(u))
		if err != nil || p.User == nil || p.User.Username() == "" {
			continue
		}
		if _, ok := p.User.Password(); ok {
			return fmt.Sprintf("user %q", p.User.Username())
		}
		token = true
	}
	if token {
		return "the connection's token"
	}
	return "the connection (no user in its URL)"
}

// connCredentials is Credentials of a connection: its options' user, token or
// credentials, else its URLs'.
func connCredentials(nc *nats.Conn) string {
	if nc == nil {
		return "the connection"
	}
	switch o := nc.Opts; {
	case o.User != "":
		return fmt.Sprintf("user %q", o.User)
	case o.Token != "" || o.TokenHandler != nil:
		return "the connection's token"
	case o.UserJWT != nil || o.Nkey != "":
		return "the connection's credentials"
	}
	return Credentials(strings.Join(nc.Opts.Servers, ","))
}

// NoteAccess returns err as an AccessError when it is NATS refusing nc's credentials or
// an operation (see Access), nil otherwise; a permissions violation it keeps as nc's
// latest. A connection's error handler calls it with the errors the server reports
// on the side (permissions violations), so that Explain can name them when the request
// that made one times out.
func NoteAccess(nc *nats.Conn, err error) *AccessError {
	a := Access(err, connCredentials(nc))
	if a == nil || nc == nil || !a.Violation { // credentials refused stay in nc.LastError()
		return a
	}
	refusals.Lock()
	defer refusals.Unlock()
	if len(refusals.m) > 256 { // forget connections gone
		for k := range refusals.m {
			if k.Value() == nil {
				delete(refusals.m, k)
			}
		}
	}
	refusals.m[weak.Make(nc)] = refusal{a, time.Now()}
	return a
}

// refusals are the latest refusal of each connection that had one, by a weak pointer:
// a closed connection is forgotten.
var refusals = struct {
	sync.Mutex
	m map[weak.Pointer[nats.Conn]]refusal
}{m: map[weak.Pointer[nats.Conn]]refusal{}}

type refusal struct {
	err *AccessError
	at  time.Time
}

// refusalWindow is how recent a noted refusal must be to explain a request that timed
// out: at least the longest a request of the services waits.
const refusalWindow = 30 * time.Second

// Explain returns err saying that NATS refused nc's credentials or an operation, when
// that is what err is or what it comes from, and err as it is otherwise. A request that
// timed out or was cancelled (or found the connection closed, or NATS reconnecting) is
// explained by the connection's last error when that is an authorization violation
// (the connection is retrying credentials the server does not accept), or by a
// permissions violation noted in the last 30s (NoteAccess); the explained error is
// still errors.Is the original.
func Explain(nc *nats.Conn, err error) error {
	if err == nil {
		return nil
	}
	var done *AccessError
	if errors.As(err, &done) {
		return err
	}
	who := connCredentials(nc)
	if a := Access(err, who); a != nil {
		return a
	}
	if nc == nil || !waited(err) {
		return err
	}
	if a := Access(nc.LastError(), who); a != nil && !a.Violation {
		return &explained{err: err, access: a}
	}
	refusals.Lock()
	r, ok := refusals.m[weak.Make(nc)]
	refusals.Unlock()
	if ok && time.Since(r.at) < refusalWindow {
		return &explained{err: err, access: r.err}
	}
	return err
}

// waited reports whether err is what a request that was refused ends with: a timeout,
// a cancellation, no responders, or the connection closed or not connected.
func waited(err error) bool {
	for _, e := range []error{context.DeadlineExceeded, context.Canceled, nats.ErrTimeout, nats.ErrNoResponders,
		nats.ErrConnectionClosed, nats.ErrConnectionReconnecting, nats.ErrDisconnected, jetstream.ErrNoStreamResponse} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// explained is an error a refusal caused: it reads as the refusal, and is both.
type explained struct {
	err    error
	access *AccessError
}

func (e *explained) Error() string   { return fmt.Sprintf("%v (then: %v)", e.access, e.err) }
func (e *explained) Unwrap() []error { return []error{e.access, e.err} }
