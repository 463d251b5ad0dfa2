package catalog

import (
	"fmt"

	"github.com/toolbus/toolbus/pkg/messages"
)

// Ref names a tool as allow- and block-lists see it: its server ("" for a tool of no
// server: a built-in, a tools-folder tool, an engineering calculator) and its name there.
type Ref struct {
	Server string
	Tool   string
}

// Lists are the allow- and block-list of one place in the configuration: the top level
// ("allowedTools", "blockedTools"), which covers every backend, or an MCP server's own.
// Their patterns are read by [MatchTool].
type Lists struct {
	// Scope is where the lists are, for the error that names the list refusing a call:
	// "" for the top level, "mcpServers.<server>" for a server's.
	Scope string
	// Allowed, when not empty, allows only the tools it matches.
	Allowed []string
	// Blocked refuses the tools it matches, whatever Allowed says.
	Blocked []string
}

// Empty reports whether the lists refuse nothing.
func (l Lists) Empty() bool { return len(l.Allowed) == 0 && len(l.Blocked) == 0 }

// Validate says which pattern of the lists is not a valid glob (ValidPattern), naming
// its list by its key ("allowedTools", "blockedTools").
func (l Lists) Validate() error {
	for _, list := range []struct {
		key      string
		patterns []string
	}{{"allowedTools", l.Allowed}, {"blockedTools", l.Blocked}} {
		for _, p := range list.patterns {
			if !ValidPattern(p) {
				return fmt.Errorf("%s: %q is not a valid pattern", list.key, p)
			}
		}
	}
	return nil
}

// name is the configuration's name of one of the lists: key under the scope.
func (l Lists) name(key string) string {
	if l.Scope == "" {
		return key
	}
	return l.Scope + "." + key
}

// Permit is toolbus's one decision whether a tool may be called: it may when every one of
// lists lets it through — Blocked matches it not, and Allowed is empty or matches it —
// else the error is a [*NotAllowedError] naming the first list that refuses it. It
// decides on the tool's canonical server and name, whatever a model spelled it with,
// and whichever backend offers it (the executor's router asks it for every call, an MCP
// pool's catalog for every server's tool, listed or not).
func Permit(t Ref, lists ...Lists) error {
	for _, l := range lists {
		if p, ok := matching(l.Blocked, t.Server, t.Tool); ok {
			return &NotAllowedError{Tool: t, List: l.name("blockedTools"), Pattern: p}
		}
		if len(l.Allowed) > 0 && !MatchTool(l.Allowed, t.Server, t.Tool) {
			return &NotAllowedError{Tool: t, List: l.name("allowedTools")}
		}
	}
	return nil
}

// NotAllowedError is [ErrNotAllowed] saying which list refused the tool.
type NotAllowedError struct {
	Tool Ref
	// List is the refusing list's key in the configuration: "allowedTools",
	// "blockedTools", "mcpServers.<server>.blockedTools", ...
	List string
	// Pattern is the block-list's pattern the tool matched; empty when an allow-list
	// refused it for matching none.
	Pattern string
}

// Reason says why, for a model and an operator: "blockedTools lists it (\"file_*\")",
// "allowedTools does not list it".
func (e *NotAllowedError) Reason() string {
	if e.Pattern != "" {
		return fmt.Sprintf("%s lists it (%q)", e.List, messages.EchoName(e.Pattern))
	}
	return e.List + " does not list it"
}

func (e *NotAllowedError) Error() string {
	if e.Tool.Server == "" {
		return fmt.Sprintf("%s: %q: %s", ErrNotAllowed, messages.EchoName(e.Tool.Tool), e.Reason())
	}
	return fmt.Sprintf("%s: %q of server %q: %s", ErrNotAllowed, messages.EchoName(e.Tool.Tool), e.Tool.Server, e.Reason())
}

// Unwrap makes the error [ErrNotAllowed].
func (e *NotAllowedError) Unwrap() error { return ErrNotAllowed }

// Name is the tool's one canonical name, whatever spelling a model used for it:
// "<server>__<tool>" for a server's tool, the tool's name for a tool of no server. Metric
// labels and span names use it, so that one tool is one series and one span name.
func (r Ref) Name() string {
	if r.Server == "" {
		return r.Tool
	}
	return r.Server + Separator + r.Tool
}
