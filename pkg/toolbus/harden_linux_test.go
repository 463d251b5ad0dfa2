package toolbus

import (
	"context"
	"syscall"
	"testing"

	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/config"
)

// A process running an executor with Harden is not dumpable: the tools and servers it
// starts, which run as the same user, cannot read its /proc/<pid>/environ, where the
// NATS credentials are. (root reads any process's /proc whatever its dumpable flag; the
// container image runs toolbus as uid 10001.) Without Harden, an embedding program's
// process is left as it was.
func TestExecutorProcessIsNotDumpable(t *testing.T) {
	dumpable := func() uintptr {
		t.Helper()
		v, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_GET_DUMPABLE, 0, 0)
		if errno != 0 {
			t.Fatal(errno)
		}
		return v
	}
	setDumpable := func() {
		if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 1, 0); errno != 0 {
			t.Fatal(errno)
		}
	}
	setDumpable()
	t.Cleanup(setDumpable)
	nc, _ := bustest.JetStream(t)
	for _, harden := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		n, err := Start(ctx, Options{Provision: true, Conn: nc, Config: &config.Config{}, Services: []string{Executor}, Harden: harden})
		if err != nil {
			t.Fatal(err)
		}
		got := dumpable()
		cancel()
		n.Wait()
		if want := map[bool]uintptr{false: 1, true: 0}[harden]; got != want {
			t.Errorf("Harden %v: PR_GET_DUMPABLE = %d, want %d", harden, got, want)
		}
	}
}
