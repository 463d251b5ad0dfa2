package engineering

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/toolbus/toolbus/pkg/catalog"
	"github.com/toolbus/toolbus/pkg/messages"
)

// DomainInfo is one domain in the answer of dispatch_engineering info.
type DomainInfo struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Tools       int    `json:"tools"`
	Active      bool   `json:"active"`
}

// ToolListing is one calculator in the answers of list and activate.
type ToolListing struct {
	Name        string            `json:"name"`
	Description string            `json:"description"`
	Formula     string            `json:"formula,omitempty"`
	SolvableFor []string          `json:"solvable_for,omitempty"`
	Parameters  map[string]string `json:"parameters"`
	// InputSchema is the JSON schema of the parameters; list shows it, activate does not.
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
	Example     *Example        `json:"example,omitempty"`
}

// Example is a worked execute_tool call.
type Example struct {
	Call   ExecuteArgs     `json:"call"`
	Result json.RawMessage `json:"result,omitempty"`
}

// ExecuteArgs are execute_tool's arguments.
type ExecuteArgs struct {
	ToolName   string         `json:"tool_name"`
	Parameters map[string]any `json:"parameters"`
}

// DispatchResult is the answer of dispatch_engineering.
type DispatchResult struct {
	Action        string        `json:"action"`
	Domain        string        `json:"domain,omitempty"`
	Description   string        `json:"description,omitempty"`
	Domains       []DomainInfo  `json:"domains,omitempty"`
	Activated     bool          `json:"activated,omitempty"`
	ActiveDomains []string      `json:"active_domains"`
	Tools         []ToolListing `json:"tools,omitempty"`
	Next          string        `json:"next"`
	Notes         []string      `json:"notes,omitempty"`
}

func (s *Suite) dispatch(ctx context.Context, conversation string, raw json.RawMessage, perRequest bool) (json.RawMessage, error) {
	args, _, err := decodeArgs(raw)
	if err != nil {
		return nil, err
	}
	action, err := stringArg(args, "action")
	if err != nil {
		return nil, err
	}
	domain, err := stringArg(args, "domain")
	if err != nil {
		return nil, err
	}
	action, domain = strings.ToLower(action), strings.ToLower(domain)
	actions := "info, list or activate"
	switch action {
	case "":
		return nil, invalidArguments("action is missing: give one of %s, e.g. {\"action\": \"info\"}", actions)
	case actionInfo, actionList, actionActivate:
	default:
		return nil, invalidArguments("unknown action %q: give one of %s", messages.EchoArguments(action), actions)
	}
	if action != actionInfo && !slices.Contains(s.domains, domain) {
		what := "domain is missing"
		if domain != "" {
			what = fmt.Sprintf("unknown domain %q", messages.EchoArguments(domain))
		}
		return nil, invalidArguments("%s: the domains are %s", what, strings.Join(s.domains, ", "))
	}

	var sess Session
	if !perRequest {
		if action == actionActivate {
			err = s.sessions.Update(ctx, conversation, func(sess *Session) error {
				sess.activate(domain, s.domainTools(domain), s.exclusive)
				return nil
			})
			if err != nil {
				return nil, storeError(err)
			}
			s.log.DebugContext(ctx, "domain activated", "conversation", conversation, "domain", domain)
		}
		if sess, err = s.sessions.Get(ctx, conversation); err != nil {
			return nil, storeError(err)
		}
	}
	if sess.ActiveDomains == nil {
		sess.ActiveDomains = []string{}
	}
	res := DispatchResult{Action: action, ActiveDomains: sess.ActiveDomains}

	switch action {
	case actionInfo:
		for _, d := range s.domains {
			res.Domains = append(res.Domains, DomainInfo{Name: d, Description: s.domainDescription(d), Tools: len(s.domainTools(d)), Active: sess.Active(d)})
		}
		res.Next = `dispatch_engineering {"domain": "<domain>", "action": "list"} shows a domain's calculators; "activate" makes them callable through execute_tool`
	case actionList:
		res.Domain, res.Description = domain, s.domainDescription(domain)
		res.Tools = s.listings(domain, false)
		if sess.Active(domain) || perRequest || s.flat {
			res.Next = `call a calculator with execute_tool {"tool_name": "<name>", "parameters": {...}}`
		} else {
			res.Next = fmt.Sprintf(`activate the domain before using its calculators: dispatch_engineering {"domain": %q, "action": "activate"}`, domain)
		}
	case actionActivate:
		res.Domain, res.Description, res.Activated = domain, s.domainDescription(domain), true
		res.Tools = s.listings(domain, true)
		first := res.Tools[0].Name
		res.Next = fmt.Sprintf(`call a calculator with execute_tool {"tool_name": %q, "parameters": {...}}: give all its variables but the one to solve for`, first)
		if perRequest {
			res.ActiveDomains = []string{domain}
			res.Notes = append(res.Notes, "no conversation id: activation is not kept between requests; execute_tool runs calculators of any domain without it")
		}
	}
	return mustJSON(res), nil
}

// domainTools lists a domain's calculators by name.
func (s *Suite) domainTools(domain string) []string {
	var names []string
	for _, c := range s.calcs {
		if c.Domain() == domain {
			names = append(names, c.Name)
		}
	}
	return names
}

func (s *Suite) domainDescription(domain string) string {
	if d, ok := domainDescriptions[domain]; ok {
		return d
	}
	return "calculators of the " + domain + " domain"
}

// listings describes a domain's calculators: for list with their schemas, for activate
// (withResults) with each example's result instead.
func (s *Suite) listings(domain string, withResults bool) []ToolListing {
	var out []ToolListing
	for _, c := range s.calcs {
		if c.Domain() != domain {
			continue
		}
		l := ToolListing{Name: c.Name, Description: calculatorDescription(c), Formula: c.Formula, Parameters: c.ParameterSummary()}
		if !withResults {
			l.InputSchema = c.InputSchema()
		}
		if c.Formula != "" {
			l.SolvableFor = c.SolvableFor()
		}
		if c.Example != nil {
			l.Example = &Example{Call: ExecuteArgs{ToolName: c.Name, Parameters: c.Example}}
			if withResults {
				l.Example.Result = s.examples[c.Name]
			}
		}
		out = append(out, l)
	}
	return out
}

// exampleSummary keeps the lines of a result that show what the call does.
func exampleSummary(result json.RawMessage) json.RawMessage {
	var full map[string]json.RawMessage
	if err := json.Unmarshal(result, &full); err != nil {
		return result
	}
	if _, ok := full["answer"]; !ok {
		return result
	}
	keep := map[string]json.RawMessage{}
	for _, k := range []string{"solved_for", "value", "unit", "answer", "method"} {
		keep[k] = full[k]
	}
	return mustJSON(keep)
}

func (s *Suite) execute(ctx context.Context, conversation string, raw json.RawMessage, perRequest bool) (json.RawMessage, error) {
	args, repairs, err := decodeArgs(raw)
	if err != nil {
		return nil, err
	}
	name, err := stringArg(args, "tool_name", "tool", "name")
	if err != nil {
		return nil, err
	}
	if name == "" {
		return nil, invalidArguments(`tool_name is missing: execute_tool {"tool_name": "<calculator>", "parameters": {...}}; dispatch_engineering {"action": "info"} shows the domains`)
	}
	c, ok := s.byName[name]
	if !ok {
		return nil, messages.Errorf(messages.CodeUnknownTool, "%s", s.unknownCalculator(name))
	}

	var params json.RawMessage
	for _, k := range []string{"parameters", "params", "arguments", "args"} {
		if p, ok := args[k]; ok {
			params = p
			break
		}
	}
	if params == nil {
		// Models sometimes put the calculator's parameters beside tool_name.
		rest := map[string]json.RawMessage{}
		for k, v := range args {
			if !slices.Contains([]string{"tool_name", "tool", "name"}, k) {
				rest[k] = v
			}
		}
		if len(rest) > 0 {
			params = mustJSON(rest)
			repairs = append(repairs, "parameters were given beside tool_name; used them as parameters")
		}
	}

	var notes []string
	switch {
	case s.flat:
	case perRequest:
		notes = append(notes, "no conversation id: ran without domain activation")
	default:
		sess, err := s.sessions.Get(ctx, conversation)
		if err != nil {
			return nil, storeError(err)
		}
		if f, ok := s.sessions.(FreshSessionStore); ok && !sess.Active(c.Domain()) && !sess.Allowed(c.Name) {
			// A cached session may lag an activation made a moment ago elsewhere: ask
			// the store itself before refusing.
			if sess, err = f.GetFresh(ctx, conversation); err != nil {
				return nil, storeError(err)
			}
		}
		if !sess.Active(c.Domain()) && !sess.Allowed(c.Name) {
			return nil, messages.Errorf(messages.CodeDomainNotActive,
				"%s belongs to the domain %q, which is not active in this conversation. Call dispatch_engineering with {\"domain\": %q, \"action\": \"activate\"} first, then repeat this execute_tool call.",
				c.Name, c.Domain(), c.Domain())
		}
	}
	out, err := s.runCalculatorRepaired(c, params, repairs, notes)
	if err == nil && s.log.Enabled(ctx, slog.LevelDebug) {
		s.log.DebugContext(ctx, "calculator ran", "conversation", conversation, "tool", c.Name)
	}
	return out, err
}

// unknownCalculator explains an unknown calculator name: the domain's calculators when
// the domain is right, else the nearest names.
func (s *Suite) unknownCalculator(name string) string {
	name = messages.EchoName(name) // a name of kilobytes is compared and quoted by its start
	domain, _, hasDot := strings.Cut(name, ".")
	if hasDot && slices.Contains(s.domains, domain) {
		return fmt.Sprintf("unknown calculator %q; the calculators of %s are %s", name, domain, strings.Join(s.domainTools(domain), ", "))
	}
	var near []string
	for _, c := range s.calcs {
		_, tool, _ := strings.Cut(c.Name, ".")
		n := strings.ToLower(name)
		if strings.Contains(n, strings.ToLower(tool)) || strings.Contains(tool, n) || catalog.EditDistance(n, strings.ToLower(c.Name)) <= 3 || catalog.EditDistance(n, tool) <= 3 {
			near = append(near, c.Name)
		}
	}
	if len(near) > 0 {
		return fmt.Sprintf("unknown calculator %q; did you mean %s?", name, strings.Join(near, " or "))
	}
	return fmt.Sprintf("unknown calculator %q; the domains are %s: dispatch_engineering {\"domain\": \"<domain>\", \"action\": \"list\"} shows their calculators", name, strings.Join(s.domains, ", "))
}

// runCalculator runs c on its JSON parameters.
func (s *Suite) runCalculator(c *Calculator, params json.RawMessage) (json.RawMessage, error) {
	return s.runCalculatorRepaired(c, params, nil, nil)
}

func (s *Suite) runCalculatorRepaired(c *Calculator, raw json.RawMessage, repairs, notes []string) (json.RawMessage, error) {
	params, more, err := decodeParameters(raw)
	if err != nil {
		return nil, err
	}
	repairs = append(repairs, more...)
	if c.Run != nil {
		out, err := c.Run(params, s.materials)
		if err != nil {
			return nil, err
		}
		return withExtras(mustJSON(out), repairs, notes), nil
	}
	refs := s.refs[c]
	if refs == nil { // not one of the suite's own
		refs = c.paramRefs()
	}
	res, err := c.solveWith(refs, params, s.materials)
	if err != nil {
		return nil, err
	}
	res.Repairs = repairs
	res.Notes = append(res.Notes, notes...)
	return mustJSON(res), nil
}

// withExtras adds repairs and notes to a JSON object result.
func withExtras(out json.RawMessage, repairs, notes []string) json.RawMessage {
	if len(repairs) == 0 && len(notes) == 0 {
		return out
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		return out
	}
	if len(repairs) > 0 {
		m["repairs"] = repairs
	}
	if len(notes) > 0 {
		existing, _ := m["notes"].([]any)
		for _, n := range notes {
			existing = append(existing, n)
		}
		m["notes"] = existing
	}
	return mustJSON(m)
}
