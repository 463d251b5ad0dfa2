package mcpwire_test

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os/exec"
	"syscall"
	"testing"

	"github.com/toolbus/toolbus/pkg/mcpwire"
	"github.com/toolbus/toolbus/pkg/mcpwire/oauth"
)

// Misconfigured tells the failures only a change of the configuration or of the server
// ends from those a retry, or a login, may end.
func TestMisconfigured(t *testing.T) {
	login := fmt.Errorf("secure: %w", oauth.ErrNeedsLogin)
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{name: "command not found", err: &exec.Error{Name: "ghost", Err: exec.ErrNotFound}, want: true},
		{name: "no such file", err: &fs.PathError{Op: "fork/exec", Path: "/srv/ghost", Err: syscall.ENOENT}, want: true},
		{name: "not executable", err: &fs.PathError{Op: "fork/exec", Path: "/srv/ghost", Err: syscall.EACCES}, want: true},
		{name: "a busy system", err: &fs.PathError{Op: "fork/exec", Path: "/srv/ghost", Err: syscall.EAGAIN}},
		{name: "a missing file elsewhere", err: &fs.PathError{Op: "open", Path: "/srv/x", Err: syscall.ENOENT}},
		{name: "403", err: &mcpwire.StatusError{Status: http.StatusForbidden, Err: errors.New("Forbidden")}, want: true},
		{name: "401 to the configured headers", err: &mcpwire.StatusError{Status: http.StatusUnauthorized, Static: true, Err: login}, want: true},
		{name: "401 that a login ends", err: &mcpwire.StatusError{Status: http.StatusUnauthorized, Err: login}},
		{name: "503", err: &mcpwire.StatusError{Status: http.StatusServiceUnavailable, Err: errors.New("busy")}},
		{name: "a certificate nobody vouches for", err: fmt.Errorf("tls: %w", x509.UnknownAuthorityError{}), want: true},
		{name: "connection refused", err: syscall.ECONNREFUSED},
		{name: "marked", err: fmt.Errorf("%w: ghost", mcpwire.ErrMisconfigured), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mcpwire.Misconfigured(tt.err); got != tt.want {
				t.Errorf("Misconfigured(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}
