package engineering

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// schemaProperty is one property of a JSON schema.
type schemaProperty struct {
	Type        any      `json:"type"`
	Description string   `json:"description,omitempty"`
	Enum        []string `json:"enum,omitempty"`
}

// objectSchema is a JSON schema of an object.
type objectSchema struct {
	Type       string                    `json:"type"`
	Properties map[string]schemaProperty `json:"properties"`
	Required   []string                  `json:"required,omitempty"`
}

// mustJSON encodes a value that always encodes, without HTML escaping: results are read
// by models, and "σ > 0" reads better than "σ \u003e 0".
func mustJSON(v any) json.RawMessage {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(fmt.Sprintf("engineering: %v", err))
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

var numberOrString = []string{"number", "string"}

// InputSchema is the JSON schema of the calculator's parameters. No parameter is
// required: the one left out is the one solved for. Units are in the descriptions.
func (c *Calculator) InputSchema() json.RawMessage {
	props := map[string]schemaProperty{}
	for _, v := range c.Vars {
		d := fmt.Sprintf("%s %s [%s]. %s", v.symbol(), v.Description, v.Unit, howToGive(v.Unit))
		if v.Optional {
			d += " Optional, default 0."
		} else {
			d += " Leave it out to solve for it."
		}
		if v.Min > 0 {
			d += fmt.Sprintf(" At least %s.", formatNumber(v.Min))
		}
		if v.Max > 0 {
			d += fmt.Sprintf(" At most %s.", formatNumber(v.Max))
		}
		props[v.Name] = schemaProperty{Type: numberOrString, Description: d}
		if a := v.Alt; a != nil {
			props[a.Name] = schemaProperty{Type: numberOrString, Description: fmt.Sprintf(
				"%s %s [%s], instead of %s (%s). %s", a.symbol(), a.Description, a.Unit, v.Name, a.Relation, howToGive(a.Unit))}
		}
	}
	if c.Material != nil {
		props["material"] = schemaProperty{Type: "string", Description: fmt.Sprintf(
			"A material from the materials domain (e.g. \"P265GH\", \"1.4571\"), instead of %s: gives %s from the materials table.", c.Material.Var, c.Material.Var)}
	}
	var required []string
	for _, p := range c.Params {
		props[p.Name] = schemaProperty{Type: "string", Description: p.Description}
		if p.Required {
			required = append(required, p.Name)
		}
	}
	return mustJSON(objectSchema{Type: "object", Properties: props, Required: required})
}

// howToGive says how a value in unitSym may be given, for schema descriptions.
func howToGive(unitSym string) string {
	example := "12 " + unitSym
	switch unitSym {
	case "1":
		return "A plain number, e.g. 0.85 or \"85 %\"."
	case "bar":
		example = "10 bar\" or \"1 MPa\" or \"145 psi"
	case "N/mm²":
		example = "160 N/mm²\" or \"160 MPa"
	case "mm":
		example = "100 mm\" or \"0.1 m"
	case "m":
		example = "0.5 m\" or \"500 mm"
	}
	return fmt.Sprintf("A number in %s, or a string with a unit, e.g. \"%s\".", unitSym, example)
}

// ParameterSummary describes each parameter in one line: symbol, meaning, unit.
func (c *Calculator) ParameterSummary() map[string]string {
	out := map[string]string{}
	words := c.words()
	also := func(name string) string {
		if w := words[name]; len(w) > 0 {
			return "; also as " + strings.Join(w, ", ")
		}
		return ""
	}
	for _, v := range c.Vars {
		d := fmt.Sprintf("%s %s [%s]", v.symbol(), v.Description, v.Unit)
		if v.Optional {
			d += ", optional, default 0"
		}
		out[v.Name] = d + also(v.Name)
		if a := v.Alt; a != nil {
			out[a.Name] = fmt.Sprintf("%s %s [%s], instead of %s (%s)", a.symbol(), a.Description, a.Unit, v.Name, a.Relation) + also(a.Name)
		}
	}
	if c.Material != nil {
		out["material"] = "material name or number, instead of " + c.Material.Var
	}
	for _, p := range c.Params {
		out[p.Name] = p.Description
	}
	return out
}

const (
	descClock = "Current date and time in UTC (RFC 3339), with Unix time, weekday and ISO week."
	descExec  = "Runs an engineering calculator of an activated domain. Each calculator is one formula: " +
		"give all its variables but one (numbers in the documented units, or strings with units such as \"10 bar\" or \"100 mm\") " +
		"and it returns the missing one with its unit, the formula used and the unit conversions applied. " +
		"Activate the domain first with dispatch_engineering."
)

func descDispatch(domains []string) string {
	return "Engineering calculators, grouped in domains (" + strings.Join(domains, ", ") + "). " +
		"action \"info\" lists the domains and which are active; \"list\" shows a domain's calculators with their parameters and units; " +
		"\"activate\" makes a domain's calculators callable through execute_tool in this conversation."
}

func dispatchSchema(domains []string) json.RawMessage {
	return mustJSON(objectSchema{Type: "object", Properties: map[string]schemaProperty{
		"domain": {Type: "string", Enum: domains, Description: "the domain; not needed for info"},
		"action": {Type: "string", Enum: []string{actionInfo, actionList, actionActivate}, Description: "info, list or activate"},
	}, Required: []string{"action"}})
}

func executeSchema() json.RawMessage {
	return mustJSON(objectSchema{Type: "object", Properties: map[string]schemaProperty{
		"tool_name":  {Type: "string", Description: "the calculator, e.g. \"pressure.solve_kesselformel\""},
		"parameters": {Type: []string{"object", "string"}, Description: "the calculator's parameters as an object, e.g. {\"p\": 10, \"d\": 100, \"sigma\": 160}"},
	}, Required: []string{"tool_name", "parameters"}})
}

func clockSchema() json.RawMessage {
	return mustJSON(objectSchema{Type: "object", Properties: map[string]schemaProperty{}})
}
