// Package reapfirst makes a toolbus binary answer to reaper mode as early as the Go
// runtime allows: imported for its side effect by each binary's main package, its init
// calls [reaper.Main] once the few packages it depends on are initialized — before the
// binary's heavier dependencies (OpenTelemetry, gRPC, ...) and long before main. A
// reaper is started for every call of a tools-folder tool and every stdio server, and
// each package initialized before Main is time each of those calls waits: called from
// main, Main ran about 45 ms into the process on this project's 2-core VM, from here about
// 22 ms, and the crash test's executors, killed every 400 ms, answered their calls in
// 215 s instead of not within 316 s.
//
// Only binaries import it: a side effect at import time belongs to a program's own
// choice, never to a library (pkg/ has no init). An embedding program calls
// reaper.Main first thing in main, or imports a package like this one of its own.
package reapfirst

import (
	"os/signal"

	"github.com/toolbus/toolbus/pkg/reaper"
)

// The binary's reapers pass on stop signals sent to them (reaper.Options.Notify).
func init() { reaper.Main(&reaper.Options{Notify: signal.Notify}) }
