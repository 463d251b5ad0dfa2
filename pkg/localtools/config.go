package localtools

import (
	"errors"
	"fmt"
	"github.com/toolbus/toolbus/pkg/reaper"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/toolbus/toolbus/pkg/messages"
)

// Config is the "local" section of toolbus's configuration: which built-in tools are on
// and where the tools folder is. The zero value turns on the clock only.
//
//	"local": {
//	  "clock": true,
//	  "tools": {"folder": "tools", "env": ["PATH", "LANG"], "timeout": "30s"},
//	  "knowledge_base": {"folder": "docs"},
//	  "file_writer": {"root": "out", "max_write_bytes": 1048576}
//	}
//
// Relative folders are relative to [Options.BaseDir], normally the configuration
// file's folder. A section with a folder is on unless its "enabled" is false.
type Config struct {
	// Clock turns the clock tool on or off; nil means on.
	Clock         *bool               `json:"clock,omitempty"`
	Tools         ToolsConfig         `json:"tools,omitzero"`
	KnowledgeBase KnowledgeBaseConfig `json:"knowledge_base,omitzero"`
	FileWriter    FileWriterConfig    `json:"file_writer,omitzero"`
}

// ToolsConfig configures the tools folder; see [Folder] and [FolderOptions].
type ToolsConfig struct {
	Enabled *bool  `json:"enabled,omitempty"`
	Folder  string `json:"folder,omitempty"`
	// Env lists the environment a tool gets: "NAME" passes the executor's variable,
	// "NAME=value" sets one. Nothing else is passed.
	Env            []string          `json:"env,omitempty"`
	Timeout        messages.Duration `json:"timeout,omitzero"`
	MaxOutputBytes int64             `json:"max_output_bytes,omitempty"`
	RescanInterval messages.Duration `json:"rescan_interval,omitzero"`
	// Limits of every tool's process (FolderOptions.Limits); a manifest's win.
	Limits reaper.Limits `json:"limits,omitzero"`
}

// KnowledgeBaseConfig configures search_knowledge_base; see [KnowledgeOptions].
type KnowledgeBaseConfig struct {
	Enabled         *bool             `json:"enabled,omitempty"`
	Folder          string            `json:"folder,omitempty"`
	Extensions      []string          `json:"extensions,omitempty"`
	MaxFileBytes    int64             `json:"max_file_bytes,omitempty"`
	MaxResults      int               `json:"max_results,omitempty"`
	RefreshInterval messages.Duration `json:"refresh_interval,omitzero"`
}

// FileWriterConfig configures file_writer; see [FileWriterOptions].
type FileWriterConfig struct {
	Enabled       *bool  `json:"enabled,omitempty"`
	Root          string `json:"root,omitempty"`
	MaxWriteBytes int64  `json:"max_write_bytes,omitempty"`
	MaxFileBytes  int64  `json:"max_file_bytes,omitempty"`
}

func (c ToolsConfig) on() bool         { return c.Folder != "" && (c.Enabled == nil || *c.Enabled) }
func (c KnowledgeBaseConfig) on() bool { return c.Folder != "" && (c.Enabled == nil || *c.Enabled) }
func (c FileWriterConfig) on() bool    { return c.Root != "" && (c.Enabled == nil || *c.Enabled) }

// Validate reports settings that cannot work, naming the key. It does not look at the
// file system; [Configure] does.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("local.%s: %s", key, fmt.Sprintf(format, args...)))
	}
	if c.Tools.Enabled != nil && *c.Tools.Enabled && c.Tools.Folder == "" {
		bad("tools.folder", "enabled but no folder given")
	}
	for _, e := range c.Tools.Env {
		if name, _, _ := strings.Cut(e, "="); name == "" {
			bad("tools.env", "entry %q has no variable name", e)
		}
	}
	if c.Tools.Timeout < 0 || c.Tools.MaxOutputBytes < 0 {
		bad("tools", "timeout and max_output_bytes must not be negative")
	}
	if c.KnowledgeBase.Enabled != nil && *c.KnowledgeBase.Enabled && c.KnowledgeBase.Folder == "" {
		bad("knowledge_base.folder", "enabled but no folder given")
	}
	if c.KnowledgeBase.MaxFileBytes < 0 || c.KnowledgeBase.MaxResults < 0 {
		bad("knowledge_base", "max_file_bytes and max_results must not be negative")
	}
	if c.FileWriter.Enabled != nil && *c.FileWriter.Enabled && c.FileWriter.Root == "" {
		bad("file_writer.root", "enabled but no root folder given")
	}
	if c.FileWriter.MaxWriteBytes < 0 || c.FileWriter.MaxFileBytes < 0 {
		bad("file_writer", "max_write_bytes and max_file_bytes must not be negative")
	}
	return errors.Join(errs...)
}

// Options are what [Configure] needs besides the configuration.
type Options struct {
	// BaseDir is what relative folders are relative to; "" is the working directory.
	BaseDir string
	// Logger reports tools skipped and indexes built. Default: discard.
	Logger *slog.Logger
	// Now is the clock tool's time source. Default time.Now.
	Now func() time.Time
}

// Configure adds to r the built-in tools that c turns on and its tools folder. A tool
// already in r keeps its place: the embedding program's own "clock" wins.
func Configure(r *Registry, c Config, opts *Options) error {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if err := c.Validate(); err != nil {
		return err
	}
	path := func(p string) string {
		if filepath.IsAbs(p) || o.BaseDir == "" {
			return p
		}
		return filepath.Join(o.BaseDir, p)
	}
	// Every folder the configuration names must exist: say which are missing, all at
	// once, with the command that creates them, rather than one per run.
	var missing, mkdir []string
	for _, f := range []struct {
		on        bool
		key, path string
	}{{c.Tools.on(), "local.tools.folder", c.Tools.Folder}, {c.KnowledgeBase.on(), "local.knowledge_base.folder", c.KnowledgeBase.Folder},
		{c.FileWriter.on(), "local.file_writer.root", c.FileWriter.Root}} {
		if !f.on {
			continue
		}
		if fi, err := os.Stat(path(f.path)); err != nil || !fi.IsDir() {
			missing = append(missing, fmt.Sprintf("%s %q (%s)", f.key, f.path, path(f.path)))
			mkdir = append(mkdir, path(f.path))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("local: the configuration names folders that do not exist: %s; create them with: mkdir -p %s",
			strings.Join(missing, ", "), strings.Join(mkdir, " "))
	}
	var builtins []Tool
	if c.Clock == nil || *c.Clock {
		builtins = append(builtins, Clock(o.Now))
	}
	if kc := c.KnowledgeBase; kc.on() {
		kb, err := NewKnowledgeBase(path(kc.Folder), &KnowledgeOptions{
			Extensions: kc.Extensions, MaxFileBytes: kc.MaxFileBytes, MaxResults: kc.MaxResults,
			RefreshInterval: time.Duration(kc.RefreshInterval), Logger: o.Logger,
		})
		if err != nil {
			return fmt.Errorf("local.knowledge_base: %w", err)
		}
		builtins = append(builtins, kb.Tool())
	}
	if fc := c.FileWriter; fc.on() {
		t, err := FileWriter(path(fc.Root), &FileWriterOptions{MaxWriteBytes: fc.MaxWriteBytes, MaxFileBytes: fc.MaxFileBytes})
		if err != nil {
			return fmt.Errorf("local.file_writer: %w", err)
		}
		builtins = append(builtins, t)
	}
	for _, t := range builtins {
		if _, ok := r.Lookup(t.Info.Name); ok {
			continue
		}
		if err := r.Add(t); err != nil {
			return err
		}
	}
	if tc := c.Tools; tc.on() {
		f, err := NewFolder(path(tc.Folder), &FolderOptions{
			Env: tc.Env, Timeout: time.Duration(tc.Timeout), MaxOutputBytes: tc.MaxOutputBytes, Limits: tc.Limits,
			RescanInterval: time.Duration(tc.RescanInterval), Logger: o.Logger,
		})
		if err != nil {
			return fmt.Errorf("local.tools: %w", err)
		}
		r.AddFolder(f)
	}
	return nil
}
