//go:build unix

package localtools

import (
	"context"
	"errors"
	"os"
	"syscall"
	"time"
)

// lockRoot takes the exclusive lock of root's lock file (flock(2)), which every
// file_writer of every process writing into root takes too, waiting until it is free or
// ctx is done; unlock releases it.
func lockRoot(ctx context.Context, root *os.Root) (unlock func(), err error) {
	f, err := root.OpenFile(lockFile, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	for pause := time.Millisecond; ; pause = min(2*pause, 20*time.Millisecond) {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, err
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(pause):
		}
	}
}
