package localtools

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/toolbus/toolbus/pkg/messages"
)

// FileWriterOptions configure [FileWriter]. The zero value is usable.
type FileWriterOptions struct {
	// MaxWriteBytes bounds the content of one call. Default 1 MiB.
	MaxWriteBytes int64
	// MaxFileBytes bounds the size of a file after the write. Default 16 MiB.
	MaxFileBytes int64
}

// FileWriter is the file_writer tool: it writes or appends text to a file inside the
// folder root, creating folders as needed, and nowhere else. An absolute file_path, a
// path with a ".." element, and one that leaves root through a symbolic link are
// refused as not_allowed; content over the limits as invalid_arguments. The root is
// opened as an [os.Root] for every call, so a link swapped in during a call cannot lead
// out either. A write goes to a temporary file beside the target, is synced, and
// renamed over it: a crash leaves the old file or the new one, never half of one.
// Appends re-write the whole file for the same reason. Writes are serialised within a
// process and, through a lock file in root (flock(2), ".file_writer.lock"), across the
// processes of one host writing into the same root — executor replicas sharing a
// folder; a root shared over NFS is not covered.
func FileWriter(root string, opts *FileWriterOptions) (Tool, error) {
	var o FileWriterOptions
	if opts != nil {
		o = *opts
	}
	if o.MaxWriteBytes <= 0 {
		o.MaxWriteBytes = 1 << 20
	}
	if o.MaxFileBytes <= 0 {
		o.MaxFileBytes = 16 << 20
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return Tool{}, fmt.Errorf("localtools: file_writer root: %w", err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return Tool{}, fmt.Errorf("localtools: file_writer root: %w", err)
	}
	if fi, err := os.Stat(real); err != nil {
		return Tool{}, fmt.Errorf("localtools: file_writer root: %w", err)
	} else if !fi.IsDir() {
		return Tool{}, fmt.Errorf("localtools: file_writer root %s is not a folder", abs)
	}
	w := &fileWriter{root: abs, real: real, opts: o}
	return NewTool(messages.ToolInfo{
		Name: "file_writer",
		Description: fmt.Sprintf("Writes text to a file in the output folder, creating folders as needed. "+
			"file_path is relative to that folder (no absolute paths, no '..'). "+
			"mode \"overwrite\" replaces the file, \"append\" adds to its end. At most %d bytes per call.", o.MaxWriteBytes),
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"file_path":{"type":"string","minLength":1,"description":"the file, relative to the output folder, e.g. reports/summary.md"},` +
			`"content":{"type":"string","description":"the text to write"},` +
			`"mode":{"type":"string","enum":["overwrite","append"],"default":"overwrite","description":"overwrite the file or append to it"}},` +
			`"required":["file_path","content"],"additionalProperties":false}`),
	}, w.write)
}

type fileWriter struct {
	root, real string // as configured, and with symbolic links resolved
	opts       FileWriterOptions
	mu         sync.Mutex
}

type writeInput struct {
	FilePath string `json:"file_path"`
	Content  string `json:"content"`
	Mode     string `json:"mode"`
}

type writeOutput struct {
	Path         string `json:"path" jsonschema:"the file written, relative to the output folder"`
	Mode         string `json:"mode"`
	BytesWritten int    `json:"bytes_written"`
	Size         int64  `json:"size" jsonschema:"the file's size after the write"`
}

func (w *fileWriter) write(ctx context.Context, in writeInput) (writeOutput, error) {
	rel, err := localPath(in.FilePath)
	if err != nil {
		return writeOutput{}, err
	}
	if filepath.Base(rel) == lockFile && filepath.Dir(rel) == "." {
		return writeOutput{}, messages.Errorf(messages.CodeNotAllowed, "file_path %q is file_writer's own lock file", messages.EchoArguments(in.FilePath))
	}
	if in.Mode == "" {
		in.Mode = "overwrite"
	}
	if in.Mode != "overwrite" && in.Mode != "append" {
		return writeOutput{}, messages.Errorf(messages.CodeInvalidArguments, `mode must be "overwrite" or "append", not %q`, messages.EchoArguments(in.Mode))
	}
	if n := int64(len(in.Content)); n > w.opts.MaxWriteBytes {
		return writeOutput{}, messages.Errorf(messages.CodeInvalidArguments, "content is %d bytes; file_writer takes at most %d bytes per call", n, w.opts.MaxWriteBytes)
	}
	if err := ctx.Err(); err != nil {
		return writeOutput{}, err
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	root, err := os.OpenRoot(w.root)
	if err != nil {
		return writeOutput{}, &messages.ToolError{Code: messages.CodeInternal, Message: "the output folder cannot be opened", Err: err}
	}
	defer root.Close()
	unlock, err := lockRoot(ctx, root)
	if err != nil {
		if ctx.Err() != nil {
			return writeOutput{}, ctx.Err()
		}
		return writeOutput{}, &messages.ToolError{Code: messages.CodeInternal, Message: "the output folder's lock cannot be taken", Err: err}
	}
	defer unlock()
	target, err := w.resolveLinks(root, rel)
	if err != nil {
		return writeOutput{}, w.refusal(in.FilePath, err)
	}
	dir := filepath.Dir(target)
	if err := root.MkdirAll(dir, 0o755); err != nil {
		return writeOutput{}, w.refusal(in.FilePath, err)
	}
	perm, existed := fs.FileMode(0o644), false
	var old []byte
	fi, err := root.Stat(target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return writeOutput{}, w.refusal(in.FilePath, err)
	case fi.IsDir():
		return writeOutput{}, messages.Errorf(messages.CodeInvalidArguments, "file_path %q is a folder, not a file", messages.EchoArguments(in.FilePath))
	case !fi.Mode().IsRegular():
		return writeOutput{}, messages.Errorf(messages.CodeNotAllowed, "file_path %q is not a regular file", messages.EchoArguments(in.FilePath))
	default:
		perm, existed = fi.Mode().Perm(), true
		if in.Mode == "append" {
			if old, err = root.ReadFile(target); err != nil {
				return writeOutput{}, w.refusal(in.FilePath, err)
			}
		}
	}
	size := int64(len(old) + len(in.Content))
	if size > w.opts.MaxFileBytes {
		return writeOutput{}, messages.Errorf(messages.CodeInvalidArguments, "the file would grow to %d bytes; file_writer keeps files under %d bytes", size, w.opts.MaxFileBytes)
	}
	if err := replaceFile(root, target, perm, existed, old, []byte(in.Content)); err != nil {
		return writeOutput{}, w.refusal(in.FilePath, err)
	}
	return writeOutput{Path: filepath.ToSlash(target), Mode: in.Mode, BytesWritten: len(in.Content), Size: size}, nil
}

// localPath checks that p names a file below the root, lexically: relative, no ".."
// element, not the root itself.
func localPath(p string) (string, error) {
	switch {
	case p == "":
		return "", messages.Errorf(messages.CodeInvalidArguments, "file_path is empty")
	case strings.ContainsRune(p, 0):
		return "", messages.Errorf(messages.CodeInvalidArguments, "file_path contains a NUL byte")
	case filepath.IsAbs(p) || strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\`) || filepath.VolumeName(p) != "":
		return "", messages.Errorf(messages.CodeNotAllowed, "file_path %q is absolute; give a path relative to the output folder", messages.EchoArguments(p))
	case strings.HasSuffix(p, "/") || strings.HasSuffix(p, `\`):
		return "", messages.Errorf(messages.CodeInvalidArguments, "file_path %q names a folder, not a file", messages.EchoArguments(p))
	}
	for _, e := range strings.FieldsFunc(p, func(r rune) bool { return r == '/' || r == '\\' }) {
		if e == ".." {
			return "", messages.Errorf(messages.CodeNotAllowed, "file_path %q contains '..'; files can only be written inside the output folder", messages.EchoArguments(p))
		}
	}
	clean := filepath.Clean(p)
	if clean == "." {
		return "", messages.Errorf(messages.CodeInvalidArguments, "file_path %q names the output folder itself, not a file", messages.EchoArguments(p))
	}
	if !filepath.IsLocal(clean) {
		return "", messages.Errorf(messages.CodeNotAllowed, "file_path %q is not a plain path inside the output folder", messages.EchoArguments(p))
	}
	return clean, nil
}

// resolveLinks follows symbolic links in the last element of rel, so that a link to a
// file inside the root is written through rather than replaced, and one leading out of
// the root is refused. Links in the folders of rel are the os.Root's to check.
func (w *fileWriter) resolveLinks(root *os.Root, rel string) (string, error) {
	for range 40 {
		fi, err := root.Lstat(rel)
		if errors.Is(err, fs.ErrNotExist) {
			return rel, nil
		}
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			return rel, nil
		}
		target, err := root.Readlink(rel)
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(target) {
			if target, err = filepath.Rel(w.real, target); err != nil {
				return "", errEscapes
			}
		} else {
			target = filepath.Join(filepath.Dir(rel), target)
		}
		if !filepath.IsLocal(target) {
			return "", errEscapes
		}
		rel = target
	}
	return "", errors.New("too many levels of symbolic links")
}

var errEscapes = errors.New("path escapes from parent")

// refusal explains a failed file operation: leaving the root is not_allowed, anything
// else is a tool_error.
func (w *fileWriter) refusal(p string, err error) error {
	// os.Root reports an escape with an unexported error of this text.
	if errors.Is(err, errEscapes) || strings.Contains(err.Error(), errEscapes.Error()) {
		return &messages.ToolError{Code: messages.CodeNotAllowed, Message: fmt.Sprintf("file_path %q leads out of the output folder through a symbolic link", messages.EchoArguments(p)), Err: err}
	}
	return &messages.ToolError{Code: messages.CodeToolError, Message: fmt.Sprintf("cannot write %q: %v", messages.EchoArguments(p), stripRoot(err)), Err: err}
}

// stripRoot keeps the operation and the cause of err, not the server's paths.
func stripRoot(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// lockFile is the lock every file_writer writing into a root takes.
const lockFile = ".file_writer.lock"

// tempName is the name of the temporary file a write of name goes through: hidden,
// random, and within the 255 bytes a file name may have however long name is.
func tempName(name string) string {
	const keep = 200 // "." + 200 + ".tmp-" + 10 = 216 bytes
	if len(name) > keep {
		n := keep
		for n > 0 && !utf8.RuneStart(name[n]) {
			n--
		}
		name = name[:n]
	}
	return "." + name + ".tmp-" + rand.Text()[:10]
}

// replaceFile writes old then data to a new temporary file beside target, syncs it,
// renames it over target and syncs the folder. The file of a target that existed gets
// its mode.
func replaceFile(root *os.Root, target string, perm fs.FileMode, existed bool, old, data []byte) (err error) {
	dir := filepath.Dir(target)
	tmp := filepath.Join(dir, tempName(filepath.Base(target)))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = root.Remove(tmp)
		}
	}()
	_, err = f.Write(old)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil && existed {
		err = f.Chmod(perm) // the umask must not change an existing file's mode
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := root.Rename(tmp, target); err != nil {
		return err
	}
	d, err := root.Open(dir)
	if err != nil {
		return nil // the file is in place; only durability of the rename is unproven
	}
	defer d.Close()
	_ = d.Sync()
	return nil
}
