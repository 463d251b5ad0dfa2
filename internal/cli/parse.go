package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolcall"
)

// parsed is what `toolbus parse` prints for one LLM text.
type parsed struct {
	Calls   []parsedCall           `json:"calls"`
	Content string                 `json:"content"`
	Errors  []messages.ResultError `json:"errors"`
}

type parsedCall struct {
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
		p.Calls = append(p.Calls, parsedCall{Name: c.Name, Arguments: c.Arguments, Format: c.Format, Repairs: repairs})
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
	known := fs.String("known-tools", "", "comma-separated tool names, for formats that need them (bare JSON)")
	format := fs.String("format", "auto", "pin the tool-call format: "+formatNames())
	jsonl := fs.Bool("jsonl", false, "each input line is a JSON string; print one object per line")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	f, err := toolcall.ParseFormat(*format)
	if err != nil {
		return usageError{err}
	}
	opts := &toolcall.Options{KnownTools: splitList(*known), Format: f}
	enc := json.NewEncoder(env.Stdout)
	enc.SetEscapeHTML(false)
	if *jsonl {
		return eachLine(env.Stdin, func(s string) error { return enc.Encode(parseText(s, opts)) })
	}
	inputs, err := readInputs(env, fs.Args())
	if err != nil {
		return err
	}
	for _, in := range inputs {
		if err := writeJSON(env.Stdout, parseText(in.text, opts)); err != nil {
			return err
		}
	}
	return nil
}

func formatNames() string {
	var names []string
	for _, f := range toolcall.Formats() {
		names = append(names, string(f))
	}
	return "auto, " + strings.Join(names, ", ")
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
			out, _, err := toolcall.RepairJSON(s)
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
	out, repairs, err := toolcall.RepairJSON(string(b))
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
