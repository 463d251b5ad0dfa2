package cli

import (
	"github.com/toolbus/toolbus/pkg/reaper"
)

// The test binary answers to reaper mode, as a toolbus binary does, and from an init
// rather than TestMain: a reaper starts for each tool or stdio server the tests run, and
// each package initialized before reaper.Main is time each of them waits.
func init() { reaper.Main(nil) }
