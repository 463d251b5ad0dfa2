package typescript

import "github.com/toolbus/toolbus/pkg/reaper"

// The test binary answers to reaper mode, as a toolbus binary does: the example's
// toolbus runs server-everything over stdio under a reaper, which is this binary started
// again.
func init() { reaper.Main(nil) }
