package reaper

import (
	"os"
	"testing"
)

// TestMain makes the test binary answer to reaper mode, as a toolbus binary's main does.
func TestMain(m *testing.M) {
	Main()
	os.Exit(m.Run())
}
