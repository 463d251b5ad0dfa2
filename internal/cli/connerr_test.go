package cli

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolbus/toolbus/pkg/bus/bustest"
)

// One-shot commands (issue 52): a wrong password says authorization and the user, with
// the password masked; a user without the right to read the health bucket is told so,
// naming the subject, besides the command's own error.
func TestCommandsSayWhatNATSRefused(t *testing.T) {
	urls := bustest.ServerWithUsers(t)
	_, stderr, code := runMain(t, "x", "send", "--nats", fmt.Sprintf(urls, "admin:wrong-pw-9"), "--timeout", "2s")
	if code == 0 || !strings.Contains(stderr, `NATS authorization violation: the server refused user "admin"`) ||
		!strings.Contains(stderr, "admin:REDACTED@127.0.0.1") || strings.Contains(stderr, "wrong-pw-9") {
		t.Errorf("send with a wrong password: exit %d: %s", code, stderr)
	}
	t.Logf("send: %s", stderr)
	_, stderr, code = runMain(t, "", "health", "--nats", fmt.Sprintf(urls, "reader:reader-pw-2"))
	if code == 0 || !strings.Contains(stderr, `toolbus: NATS permissions violation: user "reader" may not publish to "$JS.API.STREAM.INFO.KV_toolbus_health"`) {
		t.Errorf("health without the right: exit %d: %s", code, stderr)
	}
	t.Logf("health: %s", stderr)
}

// A service with a wrong password says NATS refused its user — an error at its first
// try, and the authorization violation in what it waits for — never that the streams
// are not provisioned (issue 52).
func TestServiceSaysWrongPassword(t *testing.T) {
	urls := bustest.ServerWithUsers(t)
	var out bustest.LogBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() {
		done <- Service(ctx, "parser", []string{"--nats", fmt.Sprintf(urls, "admin:wrong-pw-9"), "--ops-addr", "127.0.0.1:0"}, Env{Stdout: &out, Stderr: &out})
	}()
	deadline := time.Now().Add(40 * time.Second)
	for !strings.Contains(out.String(), "waiting for JetStream") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	<-done
	log := out.String()
	t.Logf("log:\n%s", log)
	for _, want := range []string{
		`"level":"ERROR","msg":"NATS refused the connection; trying again"`,
		`NATS authorization violation: the server refused user \"admin\"`,
		`"msg":"waiting for JetStream"`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the log has no %s:\n%s", want, log)
		}
	}
	if strings.Contains(log, "not provisioned") || strings.Contains(log, "wrong-pw-9") {
		t.Errorf("the log says not provisioned, or shows the password:\n%s", log)
	}
}
