package reaper

import (
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

// The resources of Limits, in the order of their spec: "data,cpu,fsize,nproc,nofile",
// each a number or empty.
var resources = [...]int{syscall.RLIMIT_DATA, syscall.RLIMIT_CPU, syscall.RLIMIT_FSIZE, rlimitNproc, syscall.RLIMIT_NOFILE}

// rlimitNproc is RLIMIT_NPROC, which package syscall does not name.
const rlimitNproc = 6

// spec encodes the limits the limiter sets; "" when there is none.
func (l Limits) spec() string {
	values := [...]int64{l.MemoryBytes, l.CPUSeconds, l.FileSizeBytes, l.Processes, l.OpenFiles}
	parts, any := make([]string, len(values)), false
	for i, v := range values {
		if v > 0 {
			parts[i], any = strconv.FormatInt(v, 10), true
		}
	}
	if !any {
		return ""
	}
	return strings.Join(parts, ",")
}

// limitExec sets the limits of spec on this process and executes path with argv; it
// returns only when it cannot. Everything execve needs is built before the limits are
// set, so that a memory limit below what this Go process already uses cannot make it
// fail on the way.
func limitExec(spec, path string, argv []string) int {
	argv0, err := syscall.BytePtrFromString(path)
	if err != nil {
		return fail(path, err)
	}
	argvp, err := syscall.SlicePtrFromStrings(argv)
	if err != nil {
		return fail(path, err)
	}
	envp, err := syscall.SlicePtrFromStrings(os.Environ())
	if err != nil {
		return fail(path, err)
	}
	for i, v := range strings.Split(spec, ",") {
		if v == "" || i >= len(resources) {
			continue
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return fail(path, fmt.Errorf("limits %q: %w", spec, err))
		}
		lim := syscall.Rlimit{Cur: n, Max: n}
		if resources[i] == syscall.RLIMIT_CPU {
			lim.Max = n + 1 // SIGXCPU at the limit, SIGKILL a second later
		}
		if err := syscall.Setrlimit(resources[i], &lim); err != nil {
			return fail(path, fmt.Errorf("setrlimit %d to %d: %w", resources[i], n, err))
		}
	}
	_, _, errno := syscall.RawSyscall(syscall.SYS_EXECVE, uintptr(unsafe.Pointer(argv0)),
		uintptr(unsafe.Pointer(&argvp[0])), uintptr(unsafe.Pointer(&envp[0])))
	return fail(path, errno)
}

func fail(path string, err error) int {
	fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
	if err == syscall.ENOENT {
		return 127
	}
	return 126
}

// credential resolves a RunAs: "uid", "uid:gid", "name" or "name:group".
func credential(runAs string) (*syscall.Credential, error) {
	name, group, hasGroup := strings.Cut(runAs, ":")
	uid, gid := uint32(0), uint32(0)
	if n, err := strconv.ParseUint(name, 10, 32); err == nil {
		uid, gid = uint32(n), uint32(n)
	} else {
		u, err := user.Lookup(name)
		if err != nil {
			return nil, fmt.Errorf("reaper: runAs %q: %w", runAs, err)
		}
		un, _ := strconv.ParseUint(u.Uid, 10, 32)
		gn, _ := strconv.ParseUint(u.Gid, 10, 32)
		uid, gid = uint32(un), uint32(gn)
	}
	if hasGroup {
		if n, err := strconv.ParseUint(group, 10, 32); err == nil {
			gid = uint32(n)
		} else {
			g, err := user.LookupGroup(group)
			if err != nil {
				return nil, fmt.Errorf("reaper: runAs %q: %w", runAs, err)
			}
			n, _ := strconv.ParseUint(g.Gid, 10, 32)
			gid = uint32(n)
		}
	}
	return &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{}}, nil
}

// Exceeded names the limit a program ended on, from how it ended (its reaper's exit
// code, 128 + the signal) and the end of what it printed on stderr, or "".
func (l Limits) Exceeded(exitCode int, stderr string) string {
	switch {
	case exitCode == 128+int(syscall.SIGXCPU):
		return fmt.Sprintf("its CPU time limit (%d s)", l.CPUSeconds)
	case exitCode == 128+int(syscall.SIGXFSZ) || l.FileSizeBytes > 0 && strings.Contains(stderr, "File too large"):
		return fmt.Sprintf("its file size limit (%d bytes)", l.FileSizeBytes)
	case l.MemoryBytes > 0 && memoryExhausted(stderr):
		return fmt.Sprintf("its memory limit (%d bytes)", l.MemoryBytes)
	}
	return ""
}

// memoryExhausted reports whether stderr is how a runtime says an allocation failed.
func memoryExhausted(stderr string) bool {
	for _, s := range []string{"MemoryError", "Cannot allocate memory", "out of memory", "bad_alloc", "heap out of memory", "failed to allocate", "Out of memory"} {
		if strings.Contains(stderr, s) {
			return true
		}
	}
	return false
}
