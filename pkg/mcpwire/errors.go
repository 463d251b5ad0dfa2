package mcpwire

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os/exec"
	"strings"
	"syscall"

	"github.com/toolbus/toolbus/pkg/catalog"
	"github.com/toolbus/toolbus/pkg/mcpwire/oauth"
)

// Sentinel errors of [Pool.Call] and [Pool.Lookup]. Callers branch on them with
// errors.Is; a deadline shows as context.DeadlineExceeded.
var (
	// ErrUnknownTool: no configured server offers a tool of that name
	// ([catalog.ErrUnknownTool]).
	ErrUnknownTool = catalog.ErrUnknownTool
	// ErrAmbiguous: a bare tool name that more than one server offers
	// ([catalog.ErrAmbiguous]).
	ErrAmbiguous = catalog.ErrAmbiguous
	// ErrNotAllowed: the tool exists but configuration forbids it
	// ([catalog.ErrNotAllowed]).
	ErrNotAllowed = catalog.ErrNotAllowed
	// ErrUnavailable: the server could not be reached. The request never left, so
	// trying again later is always safe.
	ErrUnavailable = errors.New("server unavailable")
	// ErrConnectionLost: the connection failed after the request was sent; the tool may
	// or may not have run.
	ErrConnectionLost = errors.New("connection lost during the call")
	// ErrClosed: the pool was closed.
	ErrClosed = errors.New("pool closed")
	// ErrMisconfigured: the server cannot be used as configured until someone changes
	// the configuration or the server — its command is not found or cannot be run, it
	// refuses toolbus's credentials (HTTP 401 or 403), or its TLS certificate does not
	// verify. Nothing was sent, and trying again cannot help: [ErrUnavailable] wraps it,
	// and a call is answered at once ([Misconfigured] tells such a failure).
	ErrMisconfigured = errors.New("server misconfigured")
)

// StatusError is an HTTP status that refused toolbus's requests to a server (401 or
// 403: the credentials toolbus sent are not accepted).
type StatusError struct {
	Status int
	// Static: the configuration gives the server credentials of its own (headers), and
	// those were refused — not a login that is missing.
	Static bool
	Err    error
}

func (e *StatusError) Error() string {
	if e.Static {
		return fmt.Sprintf("HTTP %d %s to the configured headers: %v", e.Status, http.StatusText(e.Status), e.Err)
	}
	return fmt.Sprintf("HTTP %d %s: %v", e.Status, http.StatusText(e.Status), e.Err)
}

func (e *StatusError) Unwrap() error { return e.Err }

// Misconfigured reports whether err is a failure only a change of the configuration or
// of the server can end: a command that is not found or cannot be run, an HTTP 401 or 403
// ([StatusError]) that no login can end, a TLS certificate that does not verify. It is the one place that
// tells them; a session that fails so is marked with [ErrMisconfigured].
func Misconfigured(err error) bool {
	if errors.Is(err, ErrMisconfigured) {
		return true
	}
	var (
		notFound  *exec.Error
		path      *fs.PathError
		status    *StatusError
		authority x509.UnknownAuthorityError
		invalid   x509.CertificateInvalidError
		host      x509.HostnameError
		verify    *tls.CertificateVerificationError
	)
	switch {
	case errors.As(err, &notFound):
		return true // exec: "x": executable file not found in $PATH
	case errors.As(err, &path) && path.Op == "fork/exec":
		// No such file, permission denied, not an executable; not a busy or
		// exhausted system, which passes.
		return errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.ENOEXEC)
	case errors.As(err, &status):
		// A refusal toolbus's OAuth handler took up is a login to run (a login ends it,
		// and the next call tries again), unless the configuration gives the server
		// credentials of its own.
		return (status.Status == http.StatusUnauthorized || status.Status == http.StatusForbidden) &&
			(status.Static || !errors.Is(err, oauth.ErrNeedsLogin))
	case errors.As(err, &authority), errors.As(err, &invalid), errors.As(err, &host), errors.As(err, &verify):
		return true
	}
	return false
}

// misconfigured marks err with [ErrMisconfigured] when [Misconfigured] says it is one.
func misconfigured(err error) error {
	if err == nil || errors.Is(err, ErrMisconfigured) || !Misconfigured(err) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrMisconfigured, err)
}

// ToolError is a failure the server reported: a result with isError set (Code 0), or a
// JSON-RPC error response to tools/call.
type ToolError struct {
	Server, Tool string
	// Code is the JSON-RPC error code, or 0 for a result with isError.
	Code int64
	// Message is the server's own text, meant for the model.
	Message string
}

// JSON-RPC error codes toolbus branches on.
const (
	codeMethodNotFound = -32601
	codeParseError     = -32700
	codeInvalidParams  = -32602
)

func (e *ToolError) Error() string {
	if e.Code != 0 {
		return fmt.Sprintf("%s: %s: error %d: %s", e.Server, e.Tool, e.Code, e.Message)
	}
	return fmt.Sprintf("%s: %s: %s", e.Server, e.Tool, e.Message)
}

// InvalidArguments reports whether the server rejected the call's arguments.
func (e *ToolError) InvalidArguments() bool {
	return e.Code == codeInvalidParams && !e.UnknownTool()
}

// UnknownTool reports whether the server says it has no such tool, which happens when
// its tools changed after the catalog was last refreshed.
func (e *ToolError) UnknownTool() bool {
	return e.Code == codeMethodNotFound || (e.Code == codeInvalidParams && containsFold(e.Message, "unknown tool"))
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}
