// Command toolbus runs toolbus: `toolbus run` answers LLM responses on an embedded NATS,
// `toolbus serve` runs the services, and the other commands talk to a running bus.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/toolbus/toolbus/internal/cli"

	// A reaper of this binary's tools and stdio servers runs, and exits, as soon as
	// the runtime allows (reaper.Main in its init).
	_ "github.com/toolbus/toolbus/cmd/internal/reapfirst"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr})
	stop()
	os.Exit(code)
}
