// Command executor runs toolbus's executor service against a NATS server (--nats or
// TOOLBUS_NATS_URL); see 'toolbus serve' to run every service in one process.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/toolbus/toolbus/internal/cli"
	"github.com/toolbus/toolbus/pkg/toolbus"

	// A reaper of this binary's tools and stdio servers runs, and exits, as soon as
	// the runtime allows (reaper.Main in its init).
	_ "github.com/toolbus/toolbus/cmd/internal/reapfirst"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Service(ctx, toolbus.Executor, os.Args[1:], cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr})
	stop()
	os.Exit(code)
}
