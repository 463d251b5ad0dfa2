package toolbus_test

import (
	"os"
	"testing"

	"github.com/toolbus/toolbus/pkg/reaper"
)

// TestMain makes the test binary answer to reaper mode, as a toolbus binary's main
// does: the tools and stdio servers the tests start run under reapers.
func TestMain(m *testing.M) {
	reaper.Main(nil)
	os.Exit(m.Run())
}
