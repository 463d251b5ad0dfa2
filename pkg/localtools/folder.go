package localtools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/toolbus/toolbus/pkg/reaper"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolcall"
)

// FolderOptions configure a [Folder]. The zero value is usable.
type FolderOptions struct {
	// Env is the whole environment of a tool: "NAME" passes the executor's variable of
	// that name when it is set, "NAME=value" sets one. Nothing else is passed, not
	// even PATH.
	Env []string
	// Timeout bounds a tool whose manifest names none. Default 30s.
	Timeout time.Duration
	// MaxOutputBytes bounds what a tool may print on stdout. Default 1 MiB.
	MaxOutputBytes int64
	// Limits bound each tool's process and what it starts (memory, CPU time, file
	// size, processes, open files), and may run it as another user; a manifest's own
	// limits win. Zero fields take reaper.DefaultToolLimits; a negative one sets none.
	Limits reaper.Limits
	// RescanInterval is how old the folder's listing may get before it is read again.
	// Default 2s; negative means on every lookup.
	RescanInterval time.Duration
	// Logger reports manifests that cannot be used. Default: discard.
	Logger *slog.Logger
}

// Folder is a tools folder: each tool is an executable NAME, in any language, beside
// NAME.mcp.json (name, description, inputSchema, optional outputSchema, annotations,
// timeout). A call runs the executable in the folder with the arguments as JSON on
// stdin; it must print one JSON value on stdout and exit 0. A non-zero exit is a
// tool_error carrying the last lines of stderr; a tool still running at its timeout is
// killed with every process it started, and the call is a timeout.
//
// The folder is listed again, at most once per RescanInterval, when it is consulted;
// a tool whose files are unchanged (size, time, mode) is not reloaded. Manifests that
// cannot be used are logged, and [Folder.Rescan] returns why.
type Folder struct {
	dir  string
	opts FolderOptions
	env  []string

	mu      sync.Mutex
	scanned time.Time
	tools   map[string]*folderTool
	errs    map[string]string // by manifest file name: the last problem logged
	scanErr error
}

type folderTool struct {
	manifest, exe fileStamp
	tool          Tool
}

// fileStamp is what tells a changed file from an unchanged one without reading it.
type fileStamp struct {
	size    int64
	modTime time.Time
	mode    fs.FileMode
}

func stampOf(fi fs.FileInfo) fileStamp {
	return fileStamp{size: fi.Size(), modTime: fi.ModTime(), mode: fi.Mode()}
}

// NewFolder opens the tools folder dir and reads it.
func NewFolder(dir string, opts *FolderOptions) (*Folder, error) {
	var o FolderOptions
	if opts != nil {
		o = *opts
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.MaxOutputBytes <= 0 {
		o.MaxOutputBytes = 1 << 20
	}
	o.Limits = o.Limits.Or(reaper.DefaultToolLimits)
	if o.RescanInterval == 0 {
		o.RescanInterval = 2 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	abs, err := existingDir("tools folder", dir)
	if err != nil {
		return nil, err
	}
	env, err := environment(o.Env, os.LookupEnv)
	if err != nil {
		return nil, fmt.Errorf("localtools: tools folder: %w", err)
	}
	f := &Folder{dir: abs, opts: o, env: env, tools: map[string]*folderTool{}, errs: map[string]string{}}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rescan()
	return f, nil
}

// environment builds a tool's environment from the allow-list. It is never nil: a nil
// exec.Cmd.Env would pass the executor's whole environment.
func environment(allow []string, lookup func(string) (string, bool)) ([]string, error) {
	env := []string{}
	for _, e := range allow {
		name, _, literal := strings.Cut(e, "=")
		if name == "" {
			return nil, fmt.Errorf("env entry %q has no variable name", e)
		}
		if literal {
			env = append(env, e)
		} else if v, ok := lookup(name); ok {
			env = append(env, name+"="+v)
		}
	}
	return env, nil
}

// Dir is the folder's absolute path.
func (f *Folder) Dir() string { return f.dir }

// Rescan reads the folder now and reports the manifests that cannot be used.
func (f *Folder) Rescan() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rescan()
}

// Lookup returns the folder's tool called name.
func (f *Folder) Lookup(name string) (Tool, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rescanIfDue()
	t, ok := f.tools[name]
	if !ok {
		return Tool{}, false
	}
	return t.tool, true
}

// Tools lists the folder's tools by name.
func (f *Folder) Tools() []Tool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rescanIfDue()
	out := make([]Tool, 0, len(f.tools))
	for _, t := range f.tools {
		out = append(out, t.tool)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Info.Name < out[j].Info.Name })
	return out
}

func (f *Folder) rescanIfDue() {
	if f.opts.RescanInterval < 0 || time.Since(f.scanned) >= f.opts.RescanInterval {
		f.rescan()
	}
}

// rescan lists the folder and reloads the tools whose files changed. f.mu is held.
func (f *Folder) rescan() error {
	f.scanned = time.Now()
	entries, err := os.ReadDir(f.dir)
	if err != nil {
		// Keep serving the tools we have: a folder briefly gone (a deploy swapping it)
		// should not make every tool unknown.
		if f.scanErr == nil || f.scanErr.Error() != err.Error() {
			f.opts.Logger.Warn("cannot read the tools folder", "folder", f.dir, "err", err)
		}
		f.scanErr = err
		return err
	}
	f.scanErr = nil
	seen, manifests := map[string]bool{}, map[string]bool{}
	var problems []error
	for _, e := range entries {
		file := e.Name()
		if strings.HasPrefix(file, ".") {
			continue
		}
		// A tool is NAME.mcp.json beside its program (NAME, or NAME.py), or both in a
		// folder NAME/.
		dir, stem := f.dir, ""
		if e.IsDir() {
			if _, err := os.Stat(filepath.Join(f.dir, file, file+ManifestSuffix)); err != nil {
				continue
			}
			dir, stem, file = filepath.Join(f.dir, file), file, filepath.Join(file, file+ManifestSuffix)
		} else {
			var ok bool
			if stem, ok = strings.CutSuffix(file, ManifestSuffix); !ok || stem == "" {
				continue
			}
		}
		manifests[file] = true
		if seen[stem] {
			problems = append(problems, fmt.Errorf("%s: the tool %q is in the folder twice (flat and in %s/)", file, stem, stem))
			continue
		}
		t, err := f.load(dir, stem)
		if err != nil {
			problems = append(problems, fmt.Errorf("%s: %w", file, err))
			if f.errs[file] != err.Error() {
				f.errs[file] = err.Error()
				f.opts.Logger.Warn("tool skipped", "folder", f.dir, "manifest", file, "err", err)
			}
			delete(f.tools, stem)
			continue
		}
		delete(f.errs, file)
		if old := f.tools[stem]; old != t {
			f.opts.Logger.Info("tool loaded", "folder", f.dir, "tool", stem)
		}
		f.tools[stem] = t
		seen[stem] = true
	}
	for name := range f.tools {
		if !seen[name] {
			delete(f.tools, name)
			f.opts.Logger.Info("tool removed", "folder", f.dir, "tool", name)
		}
	}
	for file := range f.errs {
		if !manifests[file] {
			delete(f.errs, file)
		}
	}
	return errors.Join(problems...)
}

// load returns the tool of stem in dir, reusing the loaded one when its files are
// unchanged. Its program is the executable stem or, without one, the Python module
// stem.py.
func (f *Folder) load(dir, stem string) (*folderTool, error) {
	manifestPath, exe := filepath.Join(dir, stem+ManifestSuffix), filepath.Join(dir, stem)
	mfi, err := os.Stat(manifestPath)
	if err != nil {
		return nil, err
	}
	var args []string
	efi, err := os.Stat(exe)
	if errors.Is(err, fs.ErrNotExist) {
		if pfi, perr := os.Stat(exe + PythonSuffix); perr == nil && pfi.Mode().IsRegular() {
			module := exe + PythonSuffix
			if exe, args, err = pythonCommand(module); err != nil {
				return nil, err
			}
			efi = pfi // a changed module reloads the tool
		}
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("no executable %q (or Python module %q) beside it", stem, stem+PythonSuffix)
	case err != nil:
		return nil, err
	case args != nil: // a Python module: read, not executed
	case !efi.Mode().IsRegular():
		return nil, fmt.Errorf("%q is not a regular file", stem)
	case efi.Mode().Perm()&0o111 == 0:
		return nil, fmt.Errorf("%q is not executable (chmod +x)", stem)
	}
	if old := f.tools[stem]; old != nil && old.manifest == stampOf(mfi) && old.exe == stampOf(efi) {
		return old, nil
	}
	if mfi.Size() > maxManifestBytes {
		return nil, fmt.Errorf("larger than %d bytes", maxManifestBytes)
	}
	data, err := readFileLimited(manifestPath, maxManifestBytes)
	if err != nil {
		return nil, err
	}
	spec, err := parseManifest(data, stem)
	if err != nil {
		return nil, err
	}
	timeout := spec.timeout
	if timeout <= 0 {
		timeout = f.opts.Timeout
	}
	p := process{name: stem, path: exe, args: args, dir: dir, env: f.env, timeout: timeout, maxOutput: f.opts.MaxOutputBytes,
		limits: spec.limits.Or(f.opts.Limits)}
	run := func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
		args, err := toolcall.CheckArguments(stem, spec.in, args)
		if err != nil {
			return nil, err
		}
		out, err := p.run(ctx, args)
		if err != nil {
			return nil, err
		}
		if err := checkResult(spec.out, out); err != nil {
			return nil, messages.Errorf(messages.CodeToolError, "the result of tool %q does not match its outputSchema: %s", stem, toolcall.DescribeSchemaError(err))
		}
		return out, nil
	}
	return &folderTool{manifest: stampOf(mfi), exe: stampOf(efi), tool: Tool{Info: spec.info, Run: run, Timeout: timeout}}, nil
}

// readFileLimited reads at most limit bytes of path, failing if there are more.
func readFileLimited(path string, limit int64) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	return data, nil
}

// existingDir returns dir made absolute, or an error naming what it is for when it is not
// an existing folder.
func existingDir(what, dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("localtools: %s: %w", what, err)
	}
	if fi, err := os.Stat(abs); err != nil {
		return "", fmt.Errorf("localtools: %s: %w", what, err)
	} else if !fi.IsDir() {
		return "", fmt.Errorf("localtools: %s %s is not a folder", what, abs)
	}
	return abs, nil
}
