// Command healthd runs toolbus's healthd service against a NATS server (--nats or
// TOOLBUS_NATS_URL); see 'toolbus serve' to run every service in one process.
package main

import (
	"context"
	"github.com/toolbus/toolbus/pkg/reaper"
	"os"
	"os/signal"
	"syscall"

	"github.com/toolbus/toolbus/internal/cli"
	"github.com/toolbus/toolbus/pkg/toolbus"
)

func main() {
	reaper.Main() // a reaper of this binary's tools and stdio servers runs here, and exits
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Service(ctx, toolbus.Healthd, os.Args[1:], cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr})
	stop()
	os.Exit(code)
}
