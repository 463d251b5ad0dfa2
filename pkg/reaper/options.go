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

// Limits bound a contained program and every process it starts (setrlimit(2), set
// before the program's first instruction and inherited by its children), and may run it
// as another user. The zero value sets none; see DefaultToolLimits and
// DefaultServerLimits for what toolbus uses.
type Limits struct {
	// MemoryBytes bounds each process's data (RLIMIT_DATA: heap and private writable
	// mappings; unlike the address space it does not count the reservations of
	// runtimes such as V8's or Go's). An allocation past it fails.
	MemoryBytes int64 `json:"memoryBytes,omitempty"`
	// CPUSeconds bounds each process's CPU time (RLIMIT_CPU): past it the process gets
	// SIGXCPU, a second later SIGKILL.
	CPUSeconds int64 `json:"cpuSeconds,omitempty"`
	// FileSizeBytes bounds the size of any file a process writes (RLIMIT_FSIZE): past it
	// the write fails and the process gets SIGXFSZ.
	FileSizeBytes int64 `json:"fileSizeBytes,omitempty"`
	// Processes bounds the processes of the user the program runs as (RLIMIT_NPROC,
	// counted per user: meaningful with RunAs, a user of its own).
	Processes int64 `json:"processes,omitempty"`
	// OpenFiles bounds each process's open files (RLIMIT_NOFILE).
	OpenFiles int64 `json:"openFiles,omitempty"`
	// RunAs runs the program, and its reaper, as this user: "uid", "uid:gid", a user
	// name or "name:group". It needs toolbus to run as root (or with CAP_SETUID and
	// CAP_SETGID); a user of its own keeps the program from reading toolbus's processes
	// and those of programs run as other users (/proc/PID/environ).
	RunAs string `json:"runAs,omitempty"`
}

// DefaultToolLimits are the limits of a tool of a tools folder: enough for a script,
// not for a runaway one (1 GiB of memory, 5 minutes of CPU, 256 MiB per file, 1024 open
// files).
var DefaultToolLimits = Limits{MemoryBytes: 1 << 30, CPUSeconds: 300, FileSizeBytes: 256 << 20, OpenFiles: 1024}

// DefaultServerLimits are the limits of a stdio MCP server, which lives as long as the
// executor (so no CPU limit, which would count its whole life): 4 GiB of memory, 1 GiB
// per file, 4096 open files.
var DefaultServerLimits = Limits{MemoryBytes: 4 << 30, FileSizeBytes: 1 << 30, OpenFiles: 4096}

// Or returns l with each limit it leaves at zero taken from d; a negative limit means
// none and stays.
func (l Limits) Or(d Limits) Limits {
	pick := func(v, def int64) int64 {
		if v == 0 {
			return def
		}
		return v
	}
	l.MemoryBytes, l.CPUSeconds, l.FileSizeBytes = pick(l.MemoryBytes, d.MemoryBytes), pick(l.CPUSeconds, d.CPUSeconds), pick(l.FileSizeBytes, d.FileSizeBytes)
	l.Processes, l.OpenFiles = pick(l.Processes, d.Processes), pick(l.OpenFiles, d.OpenFiles)
	if l.RunAs == "" {
		l.RunAs = d.RunAs
	}
	return l
}

// Effective is l with its negative limits (none) as zero, as the reaper takes them.
func (l Limits) Effective() Limits {
	for _, v := range []*int64{&l.MemoryBytes, &l.CPUSeconds, &l.FileSizeBytes, &l.Processes, &l.OpenFiles} {
		*v = max(*v, 0)
	}
	return l
}
