package localtools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolbus/toolbus/pkg/engineering"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolcall"
)

func TestConfigJSON(t *testing.T) {
	var c Config
	err := json.Unmarshal([]byte(`{
		"clock": false,
		"tools": {"folder": "tools", "env": ["PATH", "MODE=test"], "timeout": "5s", "max_output_bytes": 100, "rescan_interval": 1},
		"knowledge_base": {"folder": "docs", "max_results": 3, "refresh_interval": "1m", "extensions": [".md"]},
		"file_writer": {"root": "out", "enabled": false, "max_write_bytes": 10, "max_file_bytes": 20}
	}`), &c)
	if err != nil {
		t.Fatal(err)
	}
	if *c.Clock || time.Duration(c.Tools.Timeout) != 5*time.Second || time.Duration(c.Tools.RescanInterval) != time.Second ||
		time.Duration(c.KnowledgeBase.RefreshInterval) != time.Minute || c.FileWriter.on() || !c.Tools.on() || !c.KnowledgeBase.on() {
		t.Errorf("decoded %+v", c)
	}
	var d messages.Duration
	if err := json.Unmarshal([]byte(`"soon"`), &d); err == nil {
		t.Error("a bad duration was accepted")
	}
}

func TestConfigValidate(t *testing.T) {
	on := true
	tests := []struct {
		name    string
		c       Config
		wantErr string
	}{
		{name: "zero"},
		{name: "all", c: Config{Tools: ToolsConfig{Folder: "t", Env: []string{"A", "B=c"}}, KnowledgeBase: KnowledgeBaseConfig{Folder: "k"}, FileWriter: FileWriterConfig{Root: "o"}}},
		{name: "tools on without folder", c: Config{Tools: ToolsConfig{Enabled: &on}}, wantErr: "local.tools.folder"},
		{name: "bad env", c: Config{Tools: ToolsConfig{Folder: "t", Env: []string{"=x"}}}, wantErr: "local.tools.env"},
		{name: "negative timeout", c: Config{Tools: ToolsConfig{Folder: "t", Timeout: -1}}, wantErr: "local.tools"},
		{name: "knowledge base on without folder", c: Config{KnowledgeBase: KnowledgeBaseConfig{Enabled: &on}}, wantErr: "local.knowledge_base.folder"},
		{name: "file writer on without root", c: Config{FileWriter: FileWriterConfig{Enabled: &on}}, wantErr: "local.file_writer.root"},
		{name: "negative limit", c: Config{FileWriter: FileWriterConfig{Root: "o", MaxWriteBytes: -1}}, wantErr: "local.file_writer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.c.Validate()
			if (err != nil) != (tt.wantErr != "") || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Validate = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestConfigure(t *testing.T) {
	base := t.TempDir()
	for _, d := range []string{"tools", "docs", "out"} {
		if err := os.Mkdir(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	copyTool(t, "testdata/shtools/sh_echo", filepath.Join(base, "tools"))
	writeFiles(t, base, map[string]string{"docs/a.md": "# A\nhello world"})
	c := Config{
		Tools:         ToolsConfig{Folder: "tools"},
		KnowledgeBase: KnowledgeBaseConfig{Folder: "docs"},
		FileWriter:    FileWriterConfig{Root: filepath.Join(base, "out")}, // absolute stays as it is
	}
	now := time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)
	r := New()
	if err := Configure(r, c, &Options{BaseDir: base, Now: func() time.Time { return now }}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(toolNames(r), ","); got != "clock,file_writer,search_knowledge_base,sh_echo" {
		t.Errorf("tools = %s", got)
	}
	if out, err := call(t, r, "clock", `{}`); err != nil || string(out) != string(engineering.Clock(now)) {
		t.Errorf("clock = %s, %v", out, err)
	}
	if _, err := call(t, r, "file_writer", `{"file_path": "x.txt", "content": "hi"}`); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(base, "out/x.txt")); string(data) != "hi" {
		t.Errorf("file_writer wrote %q", data)
	}
	if out, err := call(t, r, "search_knowledge_base", `{"query": "hello"}`); err != nil || !strings.Contains(string(out), `"path":"a.md"`) {
		t.Errorf("search = %s, %v", out, err)
	}

	// The embedding program's own tool keeps its name; switches turn tools off.
	off := false
	r = New()
	if err := AddFunc(r, messages.ToolInfo{Name: "clock", Description: "mine"}, func(context.Context, any) (any, error) { return 1, nil }); err != nil {
		t.Fatal(err)
	}
	c.KnowledgeBase.Enabled, c.Tools.Enabled = &off, &off
	if err := Configure(r, c, &Options{BaseDir: base}); err != nil {
		t.Fatal(err)
	}
	if tool, _ := r.Lookup("clock"); tool.Info.Description != "mine" {
		t.Errorf("clock replaced: %+v", tool.Info)
	}
	if got := strings.Join(toolNames(r), ","); got != "clock,file_writer" {
		t.Errorf("tools = %s", got)
	}
}

func TestConfigureErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	tests := []struct {
		name    string
		c       Config
		wantErr string
	}{
		{name: "tools folder missing", c: Config{Tools: ToolsConfig{Folder: missing}}, wantErr: "local.tools"},
		{name: "knowledge base missing", c: Config{KnowledgeBase: KnowledgeBaseConfig{Folder: missing}}, wantErr: "local.knowledge_base"},
		{name: "file writer root missing", c: Config{FileWriter: FileWriterConfig{Root: missing}}, wantErr: "local.file_writer"},
		{name: "invalid", c: Config{Tools: ToolsConfig{Folder: "x", Env: []string{""}}}, wantErr: "local.tools.env"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Configure(New(), tt.c, nil)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Configure = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestClock(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("CET", 3600))
	tool := Clock(func() time.Time { return now })
	out, err := tool.Run(context.Background(), nil)
	if err != nil || string(out) != string(engineering.Clock(now)) || !strings.Contains(string(out), "02:04:05") {
		t.Errorf("clock = %s, %v", out, err)
	}
	if !strings.Contains(string(tool.Info.OutputSchema), `"iso_week"`) {
		t.Errorf("output schema = %s", tool.Info.OutputSchema)
	}
	s, err := toolcall.ResolveSchema(tool.Info.OutputSchema)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkResult(s, out); err != nil {
		t.Errorf("the clock's result does not match its output schema: %v", err)
	}
}

// Folders the configuration names but that do not exist are all reported at once, with
// the command that creates them.
func TestConfigureMissingFolders(t *testing.T) {
	base := t.TempDir()
	os.Mkdir(filepath.Join(base, "tools"), 0o755)
	c := Config{Tools: ToolsConfig{Folder: "tools"}, KnowledgeBase: KnowledgeBaseConfig{Folder: "knowledge"}, FileWriter: FileWriterConfig{Root: "out"}}
	err := Configure(New(), c, &Options{BaseDir: base})
	if err == nil {
		t.Fatal("no error for missing folders")
	}
	for _, want := range []string{`local.knowledge_base.folder "knowledge"`, `local.file_writer.root "out"`, "mkdir -p " + filepath.Join(base, "knowledge") + " " + filepath.Join(base, "out")} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "local.tools.folder") {
		t.Errorf("error %q names a folder that exists", err)
	}
}
