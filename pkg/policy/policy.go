package policy

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"cel.dev/cel-go/cel"
	"github.com/toolbus/toolbus/pkg/catalog"
	"github.com/toolbus/toolbus/pkg/messages"
)

// Effect is what a matching rule does with a call.
type Effect string

// The effects of a rule.
const (
	Allow Effect = "allow"
	Deny  Effect = "deny"
	// Approve: the call waits for a person's decision (see [Approvals]), at most the
	// rule's Timeout.
	Approve Effect = "approve"
)

// Rule is one rule as the configuration writes it.
type Rule struct {
	// Name names the rule in the answers it decides and in logs.
	Name string `json:"name"`
	// Tools are the tools the rule applies to, as allowedTools patterns are written
	// (catalog.MatchTool): a name, "server__tool", globs. None: every tool.
	Tools []string `json:"tools,omitempty"`
	// When is a CEL condition over tool, server, args, conversation, tenant and now;
	// empty: always.
	When string `json:"when,omitempty"`
	// Effect is "allow", "deny" or "approve".
	Effect Effect `json:"effect"`
	// Timeout is how long a call under an "approve" rule waits for a decision before it
	// is refused; default DefaultApprovalTimeout, at most MaxApprovalTimeout.
	Timeout messages.Duration `json:"timeout,omitempty"`
}

// The bounds of an approve rule's Timeout.
const (
	DefaultApprovalTimeout = 15 * time.Minute
	MaxApprovalTimeout     = 24 * time.Hour
)

// Call is what the rules see of a call.
type Call struct {
	// Tool is the tool's canonical name (catalog.Ref.Name): "server__tool", or the name
	// of a tool of no server.
	Tool string
	// Server is the tool's server as allow-lists see it; "" for a tool of no server.
	Server string
	// Name is the tool's name on its server (catalog.Ref.Tool), what Tools patterns
	// match with Server; empty: Tool.
	Name string
	// Args are the call's arguments, a JSON object.
	Args         json.RawMessage
	Conversation string
	Tenant       string
	// Now is the time the rules see; zero: time.Now.
	Now time.Time
}

// Decision is what the policy says of a call.
type Decision struct {
	// Effect is Allow, Deny or Approve.
	Effect Effect
	// Rule is the name of the rule that decided; empty when none matched (allowed).
	Rule string
	// When is that rule's condition.
	When string
	// Timeout is how long an Approve decision waits for a person.
	Timeout time.Duration
	// Failed is set when the rule's condition could not be evaluated for this call: a
	// deny rule denies then (fail closed).
	Failed error
}

// Reason says why, for a model and an operator.
func (d Decision) Reason() string {
	if d.Rule == "" {
		return "no rule matches it"
	}
	why := fmt.Sprintf("the rule %q", d.Rule)
	if d.When != "" {
		why += fmt.Sprintf(" (when %s)", d.When)
	}
	if d.Failed != nil {
		return why + fmt.Sprintf(" could not be evaluated for this call (%v), and a deny rule refuses what it cannot judge", d.Failed)
	}
	return why + fmt.Sprintf(" says %s", d.Effect)
}

// Policy is a compiled list of rules. A nil *Policy allows every call.
type Policy struct {
	rules    []compiled
	revision string
}

type compiled struct {
	Rule
	prg cel.Program // nil: no condition
}

// ErrInvalid is the error of a rule that cannot be used; the message says which and why.
var ErrInvalid = errors.New("invalid rule")

// invalidError is [ErrInvalid] with the rule and the reason.
type invalidError struct{ msg string }

func (e *invalidError) Error() string        { return e.msg }
func (e *invalidError) Is(target error) bool { return target == ErrInvalid }

func invalid(format string, args ...any) error {
	return &invalidError{msg: fmt.Sprintf(format, args...)}
}

func newEnv() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("tool", cel.StringType),
		cel.Variable("server", cel.StringType),
		cel.Variable("args", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("conversation", cel.StringType),
		cel.Variable("tenant", cel.StringType),
		cel.Variable("now", cel.TimestampType),
	)
}

// Compile checks and compiles rules, in order. An error names the rule (by its place in
// policy.rules and its name) and, for a condition, the position CEL reports.
func Compile(rules []Rule) (*Policy, error) {
	if len(rules) == 0 {
		return nil, nil
	}
	env, err := newEnv()
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	p := &Policy{}
	seen := map[string]bool{}
	for i, r := range rules {
		at := fmt.Sprintf("rules[%d]", i)
		if r.Name == "" {
			return nil, invalid("%s: a rule needs a name", at)
		}
		at += fmt.Sprintf(" (%q)", r.Name)
		if seen[r.Name] {
			return nil, invalid("%s: another rule has that name", at)
		}
		seen[r.Name] = true
		switch r.Effect {
		case Allow, Deny:
			if r.Timeout != 0 {
				return nil, invalid("%s: timeout is for a rule with effect \"approve\"", at)
			}
		case Approve:
			if r.Timeout < 0 || time.Duration(r.Timeout) > MaxApprovalTimeout {
				return nil, invalid("%s: timeout must be more than 0 and at most %v", at, MaxApprovalTimeout)
			}
		default:
			return nil, invalid("%s: effect %q is not \"allow\", \"deny\" or \"approve\"", at, r.Effect)
		}
		for _, pat := range r.Tools {
			if !catalog.ValidPattern(pat) {
				return nil, invalid("%s: tools: %q is not a valid pattern", at, pat)
			}
		}
		c := compiled{Rule: r}
		if strings.TrimSpace(r.When) != "" {
			ast, iss := env.Compile(r.When)
			if iss.Err() != nil {
				return nil, invalid("%s: when: %s", at, strings.TrimPrefix(iss.Err().Error(), "ERROR: "))
			}
			if t := ast.OutputType(); !t.IsExactType(cel.BoolType) && !t.IsExactType(cel.DynType) {
				return nil, invalid("%s: when: the condition is a %s, not a bool", at, t)
			}
			if c.prg, err = env.Program(ast, cel.EvalOptions(cel.OptOptimize)); err != nil {
				return nil, invalid("%s: when: %v", at, err)
			}
		}
		p.rules = append(p.rules, c)
	}
	canon, _ := json.Marshal(rules)
	sum := sha256.Sum256(canon)
	p.revision = hex.EncodeToString(sum[:6])
	return p, nil
}

// Revision is a short hash of the rules: two policies with the same rules have the same
// revision. "" for no policy.
func (p *Policy) Revision() string {
	if p == nil {
		return ""
	}
	return p.revision
}

// Len is the number of rules.
func (p *Policy) Len() int {
	if p == nil {
		return 0
	}
	return len(p.rules)
}

// Decide answers call with the first rule, in the order written, whose tools match the
// call's and whose condition holds; no such rule allows. A condition that cannot be
// evaluated (or is not a bool) for this call does not hold, except in a deny rule,
// which then decides: deny.
func (p *Policy) Decide(call Call) Decision {
	if p == nil {
		return Decision{Effect: Allow}
	}
	name := call.Name
	if name == "" {
		name = call.Tool
	}
	var vars map[string]any
	for _, r := range p.rules {
		if len(r.Tools) > 0 && !catalog.MatchTool(r.Tools, call.Server, name) {
			continue
		}
		d := Decision{Effect: r.Effect, Rule: r.Name, When: r.When}
		if r.Effect == Approve {
			d.Timeout = cmp.Or(time.Duration(r.Timeout), DefaultApprovalTimeout)
		}
		if r.prg == nil {
			return d
		}
		if vars == nil {
			vars = call.vars()
		}
		out, _, err := r.prg.Eval(vars)
		if err == nil {
			holds, ok := out.Value().(bool)
			if ok && holds {
				return d
			}
			if ok {
				continue
			}
			err = fmt.Errorf("the condition gave %v, not a bool", out.Value())
		}
		if r.Effect == Deny {
			d.Failed = err
			return d
		}
	}
	return Decision{Effect: Allow}
}

// vars are the variables a condition reads.
func (c Call) vars() map[string]any {
	args := map[string]any{}
	if len(c.Args) > 0 {
		_ = json.Unmarshal(c.Args, &args) // not an object: no arguments
		if args == nil {
			args = map[string]any{}
		}
	}
	now := c.Now
	if now.IsZero() {
		now = time.Now()
	}
	return map[string]any{"tool": c.Tool, "server": c.Server, "args": args,
		"conversation": c.Conversation, "tenant": c.Tenant, "now": now}
}

// Offers reports whether a tool may be offered to a model of tenant: false when the
// rules deny every call of it there whatever its arguments, conversation and time —
// the first rule (in order) whose tools match it and whose condition, read with only the
// tool, its server and the tenant known, holds is a deny rule. A condition that needs
// more to be decided (an argument, the time) offers the tool: its calls are judged one
// by one. tool is the canonical name; server and name as in [Call].
func (p *Policy) Offers(tool, server, name, tenant string) bool {
	if p == nil {
		return true
	}
	if name == "" {
		name = tool
	}
	vars := map[string]any{"tool": tool, "server": server, "tenant": tenant}
	for _, r := range p.rules {
		if len(r.Tools) > 0 && !catalog.MatchTool(r.Tools, server, name) {
			continue
		}
		if r.prg != nil {
			out, _, err := r.prg.Eval(vars)
			if err != nil {
				return true // it depends on the call
			}
			if holds, ok := out.Value().(bool); !ok || !holds {
				if ok {
					continue
				}
				return true
			}
		}
		return r.Effect != Deny
	}
	return true
}
