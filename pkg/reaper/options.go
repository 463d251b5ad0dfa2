package reaper

import "os"

// Options configure [Main]; nil means none.
type Options struct {
	// Notify subscribes a reaper's process to signals: signal.Notify, given by a
	// binary's main. With it, SIGTERM, SIGINT, SIGHUP and SIGQUIT sent to a reaper itself
	// (a service manager stopping every process, `pkill`) reach its program, and the
	// reaper stays to sweep what the program leaves; without it a reaper dies of such a
	// signal and its program's descendants may outlive it. It is an option because a
	// signal handler is the program's decision, not a library's.
	Notify func(c chan<- os.Signal, sig ...os.Signal)
}
