// Package asyncapitest holds what toolbus puts on NATS to its published description,
// docs/asyncapi.yaml: it loads the document, compiles the JSON Schemas of its messages
// and checks a message seen on a subject against the channel that subject belongs to.
// It also reads the constants pkg/messages defines (error codes, header names) from its
// source, so that a test can hold the document and docs/protocol.md to all of them,
// not to a list that could lag behind.
//
// The tests that use it: pkg/messages (every message kind built by its constructors and
// encoders), pkg/toolbus (every message a running toolbus publishes, end to end), this
// package (the official AsyncAPI parser validates the document) and docs (the protocol
// page).
//
// # Example
//
//	doc := asyncapitest.Load(t)
//	if err := doc.Check(msg.Subject, msg.Header, msg.Data); err != nil {
//		t.Error(err)
//	}
package asyncapitest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v4"

	"github.com/toolbus/toolbus/internal/mcptest"
)

// Path is the document's path in the repository.
const Path = "docs/asyncapi.yaml"

// Document is docs/asyncapi.yaml with its schemas compiled.
type Document struct {
	// Raw is the document as YAML decodes it.
	Raw      map[string]any
	compiler *jsonschema.Compiler
	channels []*Channel
}

// Channel is one channel of the document and its messages.
type Channel struct {
	ID      string
	Address string // "" for a reply channel without an address
	match   *regexp.Regexp
	// Messages are the channel's messages; a message on the channel is valid when it
	// fits one of them.
	Messages []*Message
}

// Message is one message of a channel, with its compiled schemas.
type Message struct {
	ID string
	// Text: the body is not JSON (contentType text/plain or application/octet-stream):
	// it is validated as a JSON string.
	Text    bool
	Headers *jsonschema.Schema // nil: no headers described
	Payload *jsonschema.Schema
}

const docURL = "file:///toolbus/asyncapi.json"

// Load reads and compiles the document of the repository t runs in.
func Load(t testing.TB) *Document {
	t.Helper()
	d, err := Parse(filepath.Join(mcptest.RepoRoot(t), filepath.FromSlash(Path)))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Parse reads and compiles the document at path.
func Parse(path string) (*Document, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var raw map[string]any
	if err := yaml.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	// Through JSON, so that the compiler sees the types it knows (json.Number,
	// map[string]any).
	js, err := json.Marshal(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(js))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	// AsyncAPI's schema format is a superset of JSON Schema draft-07.
	c.DefaultDraft(jsonschema.Draft7)
	c.AssertFormat()
	if err := c.AddResource(docURL, doc); err != nil {
		return nil, err
	}
	d := &Document{Raw: raw, compiler: c}
	channels, _ := raw["channels"].(map[string]any)
	ids := make([]string, 0, len(channels))
	for id := range channels {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		ch, _ := channels[id].(map[string]any)
		addr, _ := ch["address"].(string)
		c := &Channel{ID: id, Address: addr}
		if addr != "" {
			// A parameter is one token or more: a conversation may be "<tenant>.<id>".
			re := regexp.QuoteMeta(addr)
			re = regexp.MustCompile(`\\\{[a-zA-Z]+\\\}`).ReplaceAllString(re, `[^.\s]+(?:\.[^.\s]+)*`)
			c.match = regexp.MustCompile("^" + re + "$")
		}
		msgs, _ := ch["messages"].(map[string]any)
		mids := make([]string, 0, len(msgs))
		for mid := range msgs {
			mids = append(mids, mid)
		}
		sort.Strings(mids)
		for _, mid := range mids {
			m, err := d.message(id, mid, msgs[mid])
			if err != nil {
				return nil, err
			}
			c.Messages = append(c.Messages, m)
		}
		d.channels = append(d.channels, c)
	}
	return d, nil
}

// message compiles the message mid of channel id, a reference to components/messages.
func (d *Document) message(id, mid string, v any) (*Message, error) {
	ref, _ := v.(map[string]any)["$ref"].(string)
	name, ok := strings.CutPrefix(ref, "#/components/messages/")
	if !ok {
		return nil, fmt.Errorf("channel %s, message %s: want a $ref to #/components/messages/, got %v", id, mid, v)
	}
	comps, _ := d.Raw["components"].(map[string]any)
	msgs, _ := comps["messages"].(map[string]any)
	m, ok := msgs[name].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("channel %s: no message %s in components", id, name)
	}
	out := &Message{ID: name}
	ct, _ := m["contentType"].(string)
	out.Text = ct == "text/plain" || ct == "application/octet-stream"
	var err error
	if _, ok := m["headers"]; ok {
		if out.Headers, err = d.compile("/components/messages/" + name + "/headers"); err != nil {
			return nil, err
		}
	}
	if out.Payload, err = d.compile("/components/messages/" + name + "/payload"); err != nil {
		return nil, err
	}
	return out, nil
}

func (d *Document) compile(ptr string) (*jsonschema.Schema, error) {
	s, err := d.compiler.Compile(docURL + "#" + ptr)
	if err != nil {
		return nil, fmt.Errorf("%s#%s: %w", Path, ptr, err)
	}
	return s, nil
}

// Schema is the compiled schema components/schemas/name.
func (d *Document) Schema(t testing.TB, name string) *jsonschema.Schema {
	t.Helper()
	s, err := d.compile("/components/schemas/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Properties are the property names of components/schemas/name.
func (d *Document) Properties(name string) []string {
	props, _ := d.component("schemas", name)["properties"].(map[string]any)
	var out []string
	for p := range props {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// Enum is the enum of components/schemas/name.
func (d *Document) Enum(name string) []string {
	vals, _ := d.component("schemas", name)["enum"].([]any)
	var out []string
	for _, v := range vals {
		out = append(out, fmt.Sprint(v))
	}
	return out
}

func (d *Document) component(kind, name string) map[string]any {
	comps, _ := d.Raw["components"].(map[string]any)
	all, _ := comps[kind].(map[string]any)
	m, _ := all[name].(map[string]any)
	return m
}

// HeaderNames are the header names the document's messages describe: the property
// names of every message's headers schema.
func (d *Document) HeaderNames() map[string]bool {
	names := map[string]bool{}
	comps, _ := d.Raw["components"].(map[string]any)
	msgs, _ := comps["messages"].(map[string]any)
	for _, m := range msgs {
		h, _ := m.(map[string]any)["headers"].(map[string]any)
		if ref, ok := h["$ref"].(string); ok {
			h = d.component("schemas", strings.TrimPrefix(ref, "#/components/schemas/"))
		}
		props, _ := h["properties"].(map[string]any)
		for p := range props {
			names[p] = true
		}
	}
	return names
}

// Channel is the channel whose address subject fits; nil when none does.
func (d *Document) Channel(subject string) *Channel {
	for _, c := range d.channels {
		if c.match != nil && c.match.MatchString(subject) {
			return c
		}
	}
	return nil
}

// ChannelByID is the channel named id; nil when there is none.
func (d *Document) ChannelByID(id string) *Channel {
	for _, c := range d.channels {
		if c.ID == id {
			return c
		}
	}
	return nil
}

// Check validates a message seen on subject against the channel its address fits: it
// must fit one of the channel's messages, headers and body.
func (d *Document) Check(subject string, h nats.Header, data []byte) error {
	c := d.Channel(subject)
	if c == nil {
		return fmt.Errorf("%s: no channel of %s has this address", subject, Path)
	}
	return c.Check(h, data)
}

// Check validates a message against the channel's messages; it names the message that
// fits, or says why each does not.
func (c *Channel) Check(h nats.Header, data []byte) error {
	var errs []error
	for _, m := range c.Messages {
		if err := m.Check(h, data); err != nil {
			errs = append(errs, fmt.Errorf("as %s: %w", m.ID, err))
			continue
		}
		return nil
	}
	return fmt.Errorf("channel %s (%s): the message fits none of its messages: %w\nheaders: %v\nbody: %.2000s", c.ID, c.Address, errors.Join(errs...), h, data)
}

// Check validates headers and body against the message's schemas.
func (m *Message) Check(h nats.Header, data []byte) error {
	if m.Headers != nil {
		hv := map[string]any{}
		for k, vs := range h {
			if len(vs) != 1 {
				return fmt.Errorf("header %s has %d values, want one", k, len(vs))
			}
			hv[k] = vs[0]
		}
		if err := m.Headers.Validate(hv); err != nil {
			return fmt.Errorf("headers: %w", err)
		}
	} else if len(h) > 0 {
		return fmt.Errorf("headers %v, where the document describes none", h)
	}
	var body any
	if m.Text {
		body = string(data)
	} else {
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
		if err != nil {
			return fmt.Errorf("body: %w", err)
		}
		body = v
	}
	if err := m.Payload.Validate(body); err != nil {
		return fmt.Errorf("body: %w", err)
	}
	return nil
}

// Validate validates the JSON data against schema s.
func Validate(s *jsonschema.Schema, data []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return err
	}
	return s.Validate(v)
}

// Const is a constant of pkg/messages.
type Const struct {
	Name, Value string
	Type        string // "" for an untyped constant
}

// MessagesConstants are the string constants pkg/messages defines, read from its source:
// what a test holds a description to, so that a constant added there is one the
// description must name.
func MessagesConstants(t testing.TB) []Const {
	t.Helper()
	dir := filepath.Join(mcptest.RepoRoot(t), "pkg", "messages")
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out []Const
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range af.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				typ := ""
				if id, ok := vs.Type.(*ast.Ident); ok {
					typ = id.Name
				}
				for i, name := range vs.Names {
					if i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					v, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					out = append(out, Const{Name: name.Name, Value: v, Type: typ})
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no constants found in %s", dir)
	}
	return out
}

// ErrorCodes are the values of pkg/messages' ErrorCode constants.
func ErrorCodes(t testing.TB) []Const {
	t.Helper()
	return filter(MessagesConstants(t), func(c Const) bool { return c.Type == "ErrorCode" })
}

// Headers are pkg/messages' header name constants (Header...).
func Headers(t testing.TB) []Const {
	t.Helper()
	return filter(MessagesConstants(t), func(c Const) bool { return strings.HasPrefix(c.Name, "Header") })
}

func filter(cs []Const, keep func(Const) bool) []Const {
	return slices.DeleteFunc(cs, func(c Const) bool { return !keep(c) })
}

// CheckOutputText validates what an output's text holds, which its schema can only call
// a string: one <tool_result> block per result, in order, each holding a
// ToolResultBlock of the document, and the block of a result kept whole (stored) a
// Preview whose size and sha256 are the stored result's.
func (d *Document) CheckOutputText(t testing.TB, data []byte) error {
	t.Helper()
	var out struct {
		Kind    string `json:"kind"`
		Text    string `json:"text"`
		Results []struct {
			Success bool `json:"success"`
			Stored  *struct {
				Size   int    `json:"size"`
				SHA256 string `json:"sha256"`
			} `json:"stored"`
		} `json:"results"`
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return err
	}
	blockSchema, previewSchema := d.Schema(t, "ToolResultBlock"), d.Schema(t, "Preview")
	text := out.Text
	for i, r := range out.Results {
		if i > 0 {
			var ok bool
			if text, ok = strings.CutPrefix(text, "\n"); !ok {
				return fmt.Errorf("block %d: not separated from the one before by a newline: %.100q", i, text)
			}
		}
		rest, ok := strings.CutPrefix(text, "<tool_result>\n")
		if !ok {
			return fmt.Errorf("block %d: the text does not open a <tool_result> block here: %.100q", i, text)
		}
		body, after, ok := strings.Cut(rest, "</tool_result>")
		if !ok {
			return fmt.Errorf("block %d is not closed", i)
		}
		text = after
		if err := Validate(blockSchema, []byte(body)); err != nil {
			return fmt.Errorf("block %d: %w\n%.2000s", i, err, body)
		}
		if r.Stored == nil {
			continue
		}
		var b struct {
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal([]byte(body), &b); err != nil {
			return err
		}
		if err := Validate(previewSchema, b.Result); err != nil {
			return fmt.Errorf("block %d of a stored result: %w", i, err)
		}
		var p struct {
			Size   int    `json:"size"`
			SHA256 string `json:"sha256"`
		}
		if err := json.Unmarshal(b.Result, &p); err != nil || p.Size != r.Stored.Size || p.SHA256 != r.Stored.SHA256 {
			return fmt.Errorf("block %d: the preview says %+v, the result is stored as %+v", i, p, *r.Stored)
		}
	}
	if text != "" {
		return fmt.Errorf("the text goes on after its %d blocks: %.100q", len(out.Results), text)
	}
	if out.Kind == "no_tool_call" && (out.Text != "" || len(out.Results) != 0) {
		return fmt.Errorf("a no_tool_call output with text or results")
	}
	return nil
}
