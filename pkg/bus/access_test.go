package bus_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
)

// A wrong password is an authorization violation naming the user: when connecting, and
// for a service whose connection keeps retrying, from the JetStream requests that wait
// on it — which bus.Check reports as such, not as streams waiting to be provisioned (issue
// 52: the service looped on "not provisioned").
func TestWrongPasswordSaysAuthorization(t *testing.T) {
	urls := bustest.ServerWithUsers(t)
	url := fmt.Sprintf(urls, "admin:wrong-pw")
	_, err := nats.Connect(url)
	a := bus.Access(err, bus.Credentials(url))
	if a == nil || !errors.Is(a, nats.ErrAuthorization) {
		t.Fatalf("bus.Access(%v) = %v, want an authorization violation", err, a)
	}
	want := `NATS authorization violation: the server refused user "admin"`
	if !strings.HasPrefix(a.Error(), want) || strings.Contains(a.Error(), "wrong-pw") {
		t.Errorf("%q, want it to start %q and not show the password", a, want)
	}

	// A service: retrying for ever, never giving up on its credentials.
	nc, err := nats.Connect(url, nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1), nats.IgnoreAuthErrorAbort(),
		nats.ReconnectWait(50*time.Millisecond), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	err = bus.Check(ctx, js, bus.Topology{Memory: true})
	if errors.Is(err, bus.ErrNotProvisioned) || !errors.As(err, new(*bus.AccessError)) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("bus.Check = %v, want an authorization violation (and the deadline it caused), not %v", err, bus.ErrNotProvisioned)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("bus.Check = %q, want it to say %q", err, want)
	}
}

// A user without a right gets an error naming the permission and the subject: the
// violation the server reports on the side (the connection's error handler notes it)
// explains the request that timed out — a key-value lookup, a JetStream publish, bus.Check —
// and a subscription refused is said with its subject.
func TestMissingRightSaysPermission(t *testing.T) {
	urls := bustest.ServerWithUsers(t)
	url := fmt.Sprintf(urls, "reader:reader-pw-2")
	async := make(chan *bus.AccessError, 16)
	nc, err := nats.Connect(url, bus.UserInbox(url), nats.ErrorHandler(func(nc *nats.Conn, _ *nats.Subscription, err error) {
		if a := bus.NoteAccess(nc, err); a != nil {
			async <- a
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)

	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	_, err = js.KeyValue(ctx, "toolbus_health")
	cancel()
	err = bus.Explain(nc, err)
	want := `NATS permissions violation: user "reader" may not publish to "$JS.API.STREAM.INFO.KV_toolbus_health"`
	if !strings.HasPrefix(err.Error(), want) || !errors.Is(err, nats.ErrPermissionViolation) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("key-value lookup: %q, want %q (a permissions violation and the deadline)", err, want)
	}

	ctx, cancel = context.WithTimeout(context.Background(), 500*time.Millisecond)
	_, err = js.Publish(ctx, "toolbus.responses.cli", []byte("x"))
	cancel()
	if err := bus.Explain(nc, err); !strings.HasPrefix(err.Error(), `NATS permissions violation: user "reader" may not publish to "toolbus.responses.cli"`) {
		t.Errorf("publish: %q", err)
	}

	ctx, cancel = context.WithTimeout(context.Background(), 500*time.Millisecond)
	err = bus.Check(ctx, js, bus.Topology{Memory: true})
	cancel()
	var a *bus.AccessError
	if errors.Is(err, bus.ErrNotProvisioned) || !errors.As(err, &a) || !a.Violation || !errors.Is(err, nats.ErrPermissionViolation) ||
		!strings.Contains(err.Error(), `user "reader" may not publish to "$JS.API.STREAM.INFO.`) {
		t.Errorf("bus.Check = %v, want the permissions violation", err)
	}

	if _, err := nc.SubscribeSync("secret.stuff"); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(5 * time.Second)
	for {
		select {
		case a := <-async:
			if a.Op != "subscribe" {
				continue
			}
			if a.Subject != "secret.stuff" || !strings.Contains(a.Error(), `user "reader" may not subscribe to "secret.stuff"`) {
				t.Errorf("subscription refused: %q (op %q, subject %q)", a, a.Op, a.Subject)
			}
			return
		case <-deadline:
			t.Fatal("no permissions violation reported for the subscription")
		}
	}
}

// An error that is not a refusal is left as it is, and a timeout is not blamed on a
// refusal of another connection; the user is named only when the URL has a password (a
// lone user name is NATS's token).
func TestExplainLeavesOthersAlone(t *testing.T) {
	if err := bus.Explain(nil, context.DeadlineExceeded); err != context.DeadlineExceeded {
		t.Errorf("bus.Explain(nil, deadline) = %v", err)
	}
	plain := errors.New("stream not found")
	if err := bus.Explain(nil, plain); err != plain {
		t.Errorf("bus.Explain(plain) = %v", err)
	}
	for urls, want := range map[string]string{
		"nats://svc:pw@h:4222":         `user "svc"`,
		"nats://h1:4222,nats://a:b@h2": `user "a"`,
		"nats://s3cr3t-token@h:4222":   "the connection's token",
		"nats://h:4222":                "the connection (no user in its URL)",
	} {
		if got := bus.Credentials(urls); got != want {
			t.Errorf("bus.Credentials(%s) = %q, want %q", urls, got, want)
		}
	}
	a := bus.Access(errors.New(`nats: permissions violation: Permissions Violation for Subscription to "x.y" using queue "q"`), `user "u"`)
	if a == nil || a.Op != "subscribe" || a.Subject != "x.y" || !errors.Is(a, nats.ErrPermissionViolation) {
		t.Errorf("a queue subscription's violation: %+v", a)
	}
}
