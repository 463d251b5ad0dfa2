package toolbus

import "syscall"

// harden makes the process non-dumpable: other processes of the same user — the tools
// and stdio servers the executor starts among them — can then neither read its
// /proc/<pid>/environ (where NATS credentials and tokens live) nor attach to it.
func harden() error {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 0, 0); errno != 0 {
		return errno
	}
	return nil
}
