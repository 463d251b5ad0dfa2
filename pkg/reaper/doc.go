// Package reaper keeps a child program's descendants from outliving it.
//
// A process group is not enough: a tool that calls setsid, or a server that
// daemonizes, leaves the group and survives a group kill. Contain runs the program
// under a small reaper — this very binary, started again in reaper mode — that makes
// itself a child subreaper (PR_SET_CHILD_SUBREAPER), so every orphan in the program's
// tree is handed to it rather than to init, whatever session or group it moved to.
// When the program exits, or when the caller kills it, the reaper kills every
// descendant it still has, waits for them, and exits with the program's own status.
//
// The caller holds the write end of a pipe, the lifeline; the reaper holds the read
// end. Closing the lifeline (Containment.Kill), or the caller dying, makes the reaper
// kill the whole tree at once. A signal for the program (Containment.Signal, e.g. a
// graceful SIGTERM) travels as a byte on the lifeline, so the reaper needs no signal
// handling of its own.
//
// Each containment has a reaper of its own, so concurrent calls never kill each
// other's processes, and the caller never waits for a process it did not start (a
// process-wide subreaper would have to reap strangers' zombies and could steal the
// exit statuses os/exec waits for).
//
// Reaper mode is a mode of the running binary, entered only when the program asks: a
// binary whose programs should run under reapers calls [Main] first thing in main (a
// program embedding toolbus, see pkg/toolbus), or from the init of a small package of its
// own that its main package imports, which runs Main before the binary's heavier
// packages are initialized — each reaper pays for what is initialized before Main (the
// toolbus binaries do that: cmd/internal/reapfirst). Nothing happens at import time of
// this package; without Main, Contain runs the program in a process group of
// its own. On systems other than Linux, Contain keeps the program in a process group of
// its own and Kill kills that group.
//
//	func main() {
//		reaper.Main(&reaper.Options{Notify: signal.Notify}) // returns at once, unless this process is a reaper
//		...
//	}
package reaper
