package node

import (
	"context"
	"syscall"
	"testing"

	"github.com/toolbus/toolbus/internal/bus/bustest"
	"github.com/toolbus/toolbus/internal/config"
)

// A process running an executor is not dumpable: the tools and servers it starts, which
// run as the same user, cannot read its /proc/<pid>/environ, where the NATS credentials
// are. (root reads any process's /proc whatever its dumpable flag; the container image
// runs toolbus as uid 10001.)
func TestExecutorProcessIsNotDumpable(t *testing.T) {
	nc, _ := bustest.JetStream(t)
	ctx, cancel := context.WithCancel(context.Background())
	n, err := Start(ctx, nc, Options{Config: &config.Config{}, Services: []string{Executor}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); n.Wait() }()
	dumpable, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_GET_DUMPABLE, 0, 0)
	if errno != 0 || dumpable != 0 {
		t.Errorf("PR_GET_DUMPABLE = %d (%v), want 0", dumpable, errno)
	}
}
