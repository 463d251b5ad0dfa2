// Command parser runs toolbus's parser service against a NATS server (--nats or
// TOOLBUS_NATS_URL); see 'toolbus serve' to run every service in one process.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/toolbus/toolbus/internal/cli"
	"github.com/toolbus/toolbus/internal/node"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Service(ctx, node.Parser, os.Args[1:], cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr})
	stop()
	os.Exit(code)
}
