package cli

import (
	"os"
	"runtime/debug"
	"sync"
)

// gcPercent is the garbage collector's target of toolbus's processes unless GOGC says
// otherwise: the heap may grow to three times what is live before a collection, where
// Go's default is twice. toolbus's live heap is small (tens of MB) and its garbage is
// mostly short-lived decoding buffers — the MCP SDK allocates 32 KiB for each JSON value
// it decodes, four per remote call — so at the default it collects dozens of times a
// second. At 200, a remote call costs 0.46–0.47 ms of CPU instead of 0.52–0.59, and
// throughput rises about 13% (docs/performance.md).
const gcPercent = 200

var tuneGCOnce sync.Once

// tuneGC sets gcPercent, once, when GOGC is not set.
func tuneGC() {
	tuneGCOnce.Do(func() {
		if _, set := os.LookupEnv("GOGC"); !set {
			debug.SetGCPercent(gcPercent)
		}
	})
}
