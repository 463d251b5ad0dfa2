package reaper

import (
	"os"
	"os/signal"
	"testing"
)

// TestMain makes the test binary answer to reaper mode, as a toolbus binary's main does.
func TestMain(m *testing.M) {
	Main(&Options{Notify: signal.Notify}) // as the toolbus binaries do
	os.Exit(m.Run())
}
