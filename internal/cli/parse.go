package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/toolbus/toolbus/pkg/catalog"
	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/jsonrepair"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/parser"
	"github.com/toolbus/toolbus/pkg/toolbus"
	"github.com/toolbus/toolbus/pkg/toolcall"
)

// parsed is what `toolbus parse` prints for one LLM text.
type parsed struct {
	Calls   []parsedCall           `json:"calls"`
	Content string                 `json:"content"`
	Errors  []messages.ResultError `json:"errors"`
}

type parsedCall struct {
	// ID is the call's id where the response gives one (a hosted API's, Kimi K2's,
	// Mistral's [CALL_ID]); a call without one gets one generated when it runs.
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Format    toolcall.Format `json:"format"`
	Repairs   []string        `json:"repairs"`
}

func parseText(text string, opts *toolcall.Options) parsed {
	ext := toolcall.Extract(text, opts)
	p := parsed{Calls: []parsedCall{}, Content: ext.Content, Errors: []messages.ResultError{}}
	for _, c := range ext.Calls {
		if c.Err != nil {
			p.Errors = append(p.Errors, messages.ResultError{Code: c.Err.Code, Message: c.Err.Message})
			continue
		}
		repairs := c.Repairs
		if repairs == nil {
			repairs = []string{}
		}
		p.Calls = append(p.Calls, parsedCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments, Format: c.Format, Repairs: repairs})
	}
	return p
}

// eachLine calls f with every line of r decoded as a JSON string.
func eachLine(r io.Reader, f func(string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var s string
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			return fmt.Errorf("line %d is not a JSON string: %w", n, err)
		}
		if err := f(s); err != nil {
			return err
		}
	}
	return sc.Err()
}

func parseCmd(ctx context.Context, env Env, args []string) error {
	fs := newFlags("parse", env)
	cfgPath := fs.String("config", "", "configuration file: read the responses as its parser does, with the names and input schemas of its tools (its MCP servers are started to list theirs), its format pin and limits")
	wait := fs.Duration("wait", 20*time.Second, "with --config: how long to wait for the MCP servers to list their tools")
	known := fs.String("known-tools", "", "comma-separated tool names, for formats that need them (bare JSON); without --config")
	toolsPath := fs.String("tools", "", `JSON file of tool definitions, {"tools": [{"name", "inputSchema"}]} or OpenAI's tools array: read the responses as the parser does with that catalog (names, schema typing and checks); without --config`)
	format := fs.String("format", "auto", "pin the tool-call format: "+formatNames())
	jsonl := fs.Bool("jsonl", false, "each input line is a JSON string; print one object per line")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	f, err := toolcall.ParseFormat(*format)
	if err != nil {
		return usageError{err}
	}
	parse := func(text string) parsed {
		return parseText(text, &toolcall.Options{KnownTools: splitList(*known), Format: f})
	}
	pin := ""
	if f != toolcall.FormatAuto {
		pin = string(f)
	}
	if *toolsPath != "" {
		if *known != "" || *cfgPath != "" {
			return usageError{fmt.Errorf("--tools with --known-tools or --config: the file's tools are the known ones")}
		}
		stage, err := toolsStage(*toolsPath)
		if err != nil {
			return err
		}
		parse = func(text string) parsed { return previewText(stage, text, pin) }
	}
	if *cfgPath != "" {
		if *known != "" {
			return usageError{fmt.Errorf("--known-tools and --config: the configuration's tools are the known ones")}
		}
		stage, closeTools, err := previewStage(ctx, env, *cfgPath, *wait)
		if err != nil {
			return err
		}
		defer closeTools()
		parse = func(text string) parsed { return previewText(stage, text, pin) }
	}
	enc := json.NewEncoder(env.Stdout)
	enc.SetEscapeHTML(false)
	if *jsonl {
		return eachLine(env.Stdin, func(s string) error { return enc.Encode(parse(s)) })
	}
	inputs, err := readInputs(env, fs.Args())
	if err != nil {
		return err
	}
	for _, in := range inputs {
		if err := writeJSON(env.Stdout, parse(in.text)); err != nil {
			return err
		}
	}
	return nil
}

// previewStage is the parser of the configuration at path with the catalog its
// executors would publish: the tools of its MCP servers (started, and waited for up to
// wait), of its tools folder and of the engineering suite.
func previewStage(ctx context.Context, env Env, path string, wait time.Duration) (*parser.Stage, func(), error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, nil, err
	}
	pool, exec, err := startTools(ctx, env, "parse", cfg, wait)
	if err != nil {
		return nil, nil, err
	}
	cat := parser.NewCatalog()
	entries := toolbus.InProcessCatalog(exec.Router, pool)
	byServer := map[string][]catalog.Tool{}
	for _, t := range pool.Tools(ctx) {
		byServer[t.Server] = append(byServer[t.Server], t)
	}
	for server, tools := range byServer {
		entries = append(entries, toolbus.CatalogEntry{Key: server, Tools: tools})
	}
	for _, e := range entries {
		body, err := json.Marshal(e.Tools) // as the executors write the catalog bucket
		if err == nil {
			err = cat.Put(e.Key, body)
		}
		if err != nil {
			pool.Close()
			return nil, nil, fmt.Errorf("catalog of %s: %w", e.Key, err)
		}
	}
	return toolbus.ParserStage(cfg, cat), func() { pool.Close() }, nil
}

// toolsStage is a parser whose catalog is the tool definitions in the file at path:
// {"tools": [{"name": …, "inputSchema": {…}}]} (an MCP tools/list result), a bare array
// of those, or OpenAI's tools array ([{"type": "function", "function": {"name": …,
// "parameters": {…}}}]), bare or as "tools".
func toolsStage(path string) (*parser.Stage, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	tools, err := toolDefinitions(data)
	if err != nil {
		return nil, fmt.Errorf("--tools %s: %w", path, err)
	}
	cat := parser.NewCatalog()
	cat.Set("tools", tools)
	return &parser.Stage{Catalog: cat}, nil
}

// toolDefinitions reads a tools file (see toolsStage).
func toolDefinitions(data []byte) ([]catalog.Tool, error) {
	type entry struct {
		Name        string          `json:"name"`
		InputSchema json.RawMessage `json:"inputSchema"`
		Parameters  json.RawMessage `json:"parameters"` // a bare OpenAI function
		Function    *struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
	var list []entry
	if err := json.Unmarshal(data, &list); err != nil {
		var doc struct {
			Tools []entry `json:"tools"`
		}
		if err := json.Unmarshal(data, &doc); err != nil {
			return nil, fmt.Errorf(`expected {"tools": [...]} or an array of tools: %w`, err)
		}
		list = doc.Tools
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("no tools")
	}
	out := make([]catalog.Tool, 0, len(list))
	for i, e := range list {
		t := catalog.Tool{Name: e.Name, InputSchema: cmpRaw(e.InputSchema, e.Parameters)}
		if e.Function != nil {
			t = catalog.Tool{Name: e.Function.Name, InputSchema: e.Function.Parameters}
		}
		if t.Name == "" {
			return nil, fmt.Errorf("tool %d has no name", i+1)
		}
		out = append(out, t)
	}
	return out, nil
}

// cmpRaw returns the first of a and b that is set.
func cmpRaw(a, b json.RawMessage) json.RawMessage {
	if len(a) > 0 {
		return a
	}
	return b
}

// previewText is what the parser of stage makes of one response: the calls it would
// send, with their schema's defaults, and the errors they would be answered with.
func previewText(stage *parser.Stage, text, format string) parsed {
	ext, w := stage.Preview(text, format)
	p := parsed{Calls: []parsedCall{}, Content: ext.Content, Errors: []messages.ResultError{}}
	for i, c := range w.Calls {
		if c.Error != nil {
			p.Errors = append(p.Errors, *c.Error)
			continue
		}
		repairs := c.Repairs
		if repairs == nil {
			repairs = []string{}
		}
		p.Calls = append(p.Calls, parsedCall{ID: ext.Calls[i].ID, Name: c.Tool, Arguments: c.Arguments, Format: ext.Calls[i].Format, Repairs: repairs})
	}
	return p
}

func formatNames() string {
	var names []string
	for _, f := range toolcall.Formats() {
		names = append(names, string(f))
	}
	var aliases []string
	for alias, f := range toolcall.FormatAliases() {
		aliases = append(aliases, alias+"="+string(f))
	}
	sort.Strings(aliases)
	return "auto, " + strings.Join(names, ", ") + "; or a model's name: " + strings.Join(aliases, ", ")
}

func repairCmd(ctx context.Context, env Env, args []string) error {
	fs := newFlags("repair", env)
	jsonl := fs.Bool("jsonl", false, `each input line is a JSON string; print {"ok": true, "json": ...} or {"ok": false, "error": ...} per line`)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *jsonl {
		enc := json.NewEncoder(env.Stdout)
		enc.SetEscapeHTML(false)
		return eachLine(env.Stdin, func(s string) error {
			out, _, err := jsonrepair.Repair(s)
			if err != nil {
				return enc.Encode(map[string]any{"ok": false, "error": err.Error()})
			}
			return enc.Encode(map[string]any{"ok": true, "json": out})
		})
	}
	b, err := io.ReadAll(env.Stdin)
	if err != nil {
		return err
	}
	out, repairs, err := jsonrepair.Repair(string(b))
	if err != nil {
		return err
	}
	if len(repairs) > 0 {
		fmt.Fprintf(env.Stderr, "repairs: %s\n", strings.Join(repairs, ", "))
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, out); err != nil {
		return err
	}
	_, err = fmt.Fprintf(env.Stdout, "%s\n", compact.Bytes())
	return err
}
