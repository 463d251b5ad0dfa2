package catalog

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors of [Catalog.Resolve]. Callers branch on them with errors.Is.
var (
	// ErrUnknownTool: no tool of the catalog answers to the name.
	ErrUnknownTool = errors.New("unknown tool")
	// ErrAmbiguous: more than one tool answers to the name; see [AmbiguousError].
	ErrAmbiguous = errors.New("ambiguous tool name")
	// ErrNotAllowed: the tool exists but [Options].Permitted forbids it; toolbus's
	// refusals are a [*NotAllowedError] naming the list.
	ErrNotAllowed = errors.New("tool not allowed")
)

// AmbiguousError is the error of a name that more than one tool answers to: a bare tool
// name that several servers have, or the name of several servers' tools (in a catalog
// built without [Options].Distinct). It is [ErrAmbiguous].
type AmbiguousError struct {
	// Name is the name resolved (for a vendor alias, the name it stands for).
	Name string
	// Tools are the tools it may mean, sorted by name, then server.
	Tools []Tool
}

func (e *AmbiguousError) Error() string {
	if len(e.Tools) > 0 && e.Tools[0].Name == e.Name {
		// One name that several servers' tools have: which runs is the caller's choice.
		servers := make([]string, len(e.Tools))
		for i, t := range e.Tools {
			servers[i] = t.Server
		}
		return fmt.Sprintf("%s: %d servers offer a tool called %q: %s", ErrAmbiguous, len(e.Tools), e.Name, strings.Join(servers, ", "))
	}
	names := make([]string, len(e.Tools))
	for i, t := range e.Tools {
		names[i] = t.Name
	}
	return fmt.Sprintf("%s: %d servers have a tool called %q; call one of %s", ErrAmbiguous, len(e.Tools), e.Name, strings.Join(names, ", "))
}

// Unwrap makes the error [ErrAmbiguous].
func (e *AmbiguousError) Unwrap() error { return ErrAmbiguous }
