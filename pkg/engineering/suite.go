package engineering

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/toolbus/toolbus/pkg/messages"
)

// Names of the visible tools.
const (
	ToolClock    = "clock"
	ToolDispatch = "dispatch_engineering"
	ToolExecute  = "execute_tool"
)

// Values of [Options.Expose].
const (
	// ExposeHierarchical shows only clock, dispatch_engineering and execute_tool.
	ExposeHierarchical = "hierarchical"
	// ExposeFlat also shows every calculator as a tool of its own, callable directly.
	ExposeFlat = "flat"
)

const (
	actionInfo     = "info"
	actionList     = "list"
	actionActivate = "activate"
)

// Options configure a [Suite]. The zero value and nil mean defaults.
type Options struct {
	// Sessions keeps each conversation's active domains; default NewMemorySessions().
	Sessions SessionStore
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Logger defaults to discarding.
	Logger *slog.Logger
	// Expose is ExposeHierarchical (default) or ExposeFlat.
	Expose string
	// ExclusiveDomains makes activating a domain deactivate the others.
	ExclusiveDomains bool
	// Calculators replaces DefaultCalculators().
	Calculators []Calculator
	// Materials replaces DefaultMaterials().
	Materials []Material
}

// Validate reports an option New cannot honour.
func (o *Options) Validate() error {
	if o == nil {
		return nil
	}
	switch o.Expose {
	case "", ExposeHierarchical, ExposeFlat:
		return nil
	}
	return fmt.Errorf("engineering: expose %q: want %q or %q", o.Expose, ExposeHierarchical, ExposeFlat)
}

// DefaultCalculators returns the built-in calculators, a fresh copy each call.
func DefaultCalculators() []Calculator {
	return slices.Concat(pressureCalculators(), geometryCalculators(), materialsCalculators())
}

// domainDescriptions describe the built-in domains; others get a generic description.
var domainDescriptions = map[string]string{
	"pressure":  "pressure vessels and pressure loads: boiler formula (Kesselformel), AD 2000 cylinder wall thickness, force from pressure",
	"geometry":  "areas, volumes and surfaces: circle, cylinder, pipe cross-section",
	"materials": "pressure-vessel steels (EN 10028): strength and density, allowable stress, mass from density",
}

// Suite serves the engineering tools: clock, dispatch_engineering and execute_tool in
// front of the hidden calculators. It is safe for concurrent use; all conversation
// state is in its SessionStore.
type Suite struct {
	sessions  SessionStore
	now       func() time.Time
	log       *slog.Logger
	flat      bool
	exclusive bool
	materials []Material
	calcs     []*Calculator // sorted by name
	byName    map[string]*Calculator
	refs      map[*Calculator]map[string]paramRef // each calculator's parameter names, read-only
	domains   []string                            // sorted
	examples  map[string]json.RawMessage
	tools     []messages.ToolInfo
}

// New returns a Suite. It panics when a calculator declaration is invalid or its example
// does not solve: both are programming errors. Call [Options.Validate] first to check
// configuration; New treats an unknown Expose as hierarchical.
func New(opts *Options) *Suite {
	var o Options
	if opts != nil {
		o = *opts
	}
	s := &Suite{
		sessions: o.Sessions, now: o.Now, log: o.Logger,
		flat: o.Expose == ExposeFlat, exclusive: o.ExclusiveDomains,
		materials: o.Materials, byName: map[string]*Calculator{}, examples: map[string]json.RawMessage{},
		refs: map[*Calculator]map[string]paramRef{},
	}
	if s.sessions == nil {
		s.sessions = NewMemorySessions()
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if err := o.Validate(); err != nil {
		s.log.Error("unknown expose option, hiding the calculators", "err", err)
	}
	if s.materials == nil {
		s.materials = DefaultMaterials()
	}
	calcs := o.Calculators
	if calcs == nil {
		calcs = DefaultCalculators()
	}
	for i := range calcs {
		c := &calcs[i]
		if err := c.validate(); err != nil {
			panic("engineering: " + err.Error())
		}
		if _, dup := s.byName[c.Name]; dup {
			panic("engineering: calculator " + c.Name + " declared twice")
		}
		s.byName[c.Name] = c
		s.refs[c] = c.paramRefs()
		s.calcs = append(s.calcs, c)
		if !slices.Contains(s.domains, c.Domain()) {
			s.domains = append(s.domains, c.Domain())
		}
	}
	slices.SortFunc(s.calcs, func(a, b *Calculator) int { return strings.Compare(a.Name, b.Name) })
	slices.Sort(s.domains)
	for _, c := range s.calcs {
		if c.Example == nil {
			continue
		}
		out, err := s.runCalculator(c, mustJSON(c.Example))
		if err != nil {
			panic(fmt.Sprintf("engineering: example of %s fails: %v", c.Name, err))
		}
		s.examples[c.Name] = exampleSummary(out)
	}

	s.tools = []messages.ToolInfo{
		{Name: ToolClock, Description: descClock, InputSchema: clockSchema(), ReadOnly: true, Idempotent: true},
		{Name: ToolDispatch, Description: descDispatch(s.domains), InputSchema: dispatchSchema(s.domains), Idempotent: true,
			ReadOnlyWhen: &messages.ArgIn{Arg: "action", Values: []string{actionInfo, actionList}}},
		{Name: ToolExecute, Description: descExec, InputSchema: executeSchema(), ReadOnly: true, Idempotent: true},
	}
	if s.flat {
		for _, c := range s.calcs {
			s.tools = append(s.tools, messages.ToolInfo{
				Name: c.Name, Description: calculatorDescription(c), InputSchema: c.InputSchema(), ReadOnly: true, Idempotent: true,
			})
		}
	}
	return s
}

func calculatorDescription(c *Calculator) string {
	if c.Formula == "" {
		return c.Description
	}
	var units []string
	for _, v := range c.Vars {
		units = append(units, v.symbol()+" ["+v.Unit+"]")
	}
	return c.Description + " Units: " + strings.Join(units, ", ") + "."
}

// Tools lists the visible tools: clock, dispatch_engineering and execute_tool, and in
// flat mode every calculator.
func (s *Suite) Tools() []messages.ToolInfo { return slices.Clone(s.tools) }

// Has reports whether name is a visible tool.
func (s *Suite) Has(name string) bool {
	return slices.ContainsFunc(s.tools, func(t messages.ToolInfo) bool { return t.Name == name })
}

// Calculators returns the hidden calculators, sorted by name.
func (s *Suite) Calculators() []*Calculator { return slices.Clone(s.calcs) }

// Domains returns the domain names, sorted.
func (s *Suite) Domains() []string { return slices.Clone(s.domains) }

// Call runs the visible tool name for a conversation with JSON arguments. Every error is
// a *messages.ToolError. An empty conversation has no state: activation is not kept and
// execute_tool runs any calculator, with a note saying so.
func (s *Suite) Call(ctx context.Context, conversation, name string, args json.RawMessage) (json.RawMessage, error) {
	return s.call(ctx, conversation, name, args, conversation == "")
}

// call is Call; perRequest runs calculators without checking activation, for callers
// that cannot keep state between requests.
func (s *Suite) call(ctx context.Context, conversation, name string, args json.RawMessage, perRequest bool) (out json.RawMessage, err error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("engineering tool panicked", "tool", name, "panic", r)
			out, err = nil, &messages.ToolError{Code: messages.CodeInternal, Message: fmt.Sprintf("%s failed unexpectedly", name), Err: fmt.Errorf("panic: %v", r)}
		}
	}()
	switch name {
	case ToolClock:
		return Clock(s.now()), nil
	case ToolDispatch:
		return s.dispatch(ctx, conversation, args, perRequest)
	case ToolExecute:
		return s.execute(ctx, conversation, args, perRequest)
	}
	if c, ok := s.byName[name]; ok {
		if s.flat {
			return s.runCalculator(c, args)
		}
		return nil, messages.Errorf(messages.CodeUnknownTool,
			"%s is not a tool of its own: activate its domain with dispatch_engineering {\"domain\": %q, \"action\": \"activate\"}, then call execute_tool {\"tool_name\": %q, \"parameters\": {...}}",
			name, c.Domain(), name)
	}
	return nil, messages.Errorf(messages.CodeUnknownTool, "unknown tool %q; the engineering tools are %s", name, strings.Join(s.toolNames(), ", "))
}

func (s *Suite) toolNames() []string {
	names := make([]string, len(s.tools))
	for i, t := range s.tools {
		names[i] = t.Name
	}
	return names
}

// decodeArgs reads a tool's top-level arguments.
func decodeArgs(args json.RawMessage) (map[string]json.RawMessage, []string, error) {
	m, repairs, err := decodeParameters(args)
	if err != nil {
		var te *messages.ToolError
		if errors.As(err, &te) {
			te.Message = strings.Replace(te.Message, "parameters", "arguments", 1)
		}
	}
	return m, repairs, err
}

// stringArg reads an optional string argument; a non-string is an error naming it.
func stringArg(args map[string]json.RawMessage, names ...string) (string, error) {
	for _, n := range names {
		raw, ok := args[n]
		if !ok || string(raw) == "null" {
			continue
		}
		v, err := messages.DecodeString(raw)
		if err != nil {
			return "", invalidArguments("%s must be a string", n)
		}
		return strings.TrimSpace(v), nil
	}
	return "", nil
}

func storeError(err error) error {
	code := messages.CodeServerUnavailable
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		code = messages.CodeTimeout
	}
	return &messages.ToolError{Code: code, Message: "the engineering session store is not available; try again", Err: err}
}
