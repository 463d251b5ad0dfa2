// Command toolbus runs toolbus: `toolbus run` answers LLM responses on an embedded NATS,
// `toolbus serve` runs the services, and the other commands talk to a running bus.
package main

import (
	"context"
	"github.com/toolbus/toolbus/pkg/reaper"
	"os"
	"os/signal"
	"syscall"

	"github.com/toolbus/toolbus/internal/cli"
)

func main() {
	reaper.Main() // a reaper of this binary's tools and stdio servers runs here, and exits
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr})
	stop()
	os.Exit(code)
}
