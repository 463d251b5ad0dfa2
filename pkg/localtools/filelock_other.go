//go:build !unix

package localtools

import (
	"context"
	"os"
)

// lockRoot does nothing where flock(2) is missing: writes are serialised within one
// process only.
func lockRoot(context.Context, *os.Root) (func(), error) { return func() {}, nil }
