package engineering

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/toolbus/toolbus/pkg/messages"
)

// Values holds a calculator's variables by name, each in its variable's unit.
type Values map[string]float64

// Var is one variable of a calculator's formula.
type Var struct {
	// Name is the parameter name and the key in results, e.g. "sigma".
	Name string
	// Symbol is how the formula writes it, e.g. "σ"; empty means Name.
	Symbol string
	// Aliases are other accepted parameter names.
	Aliases []string
	// Description says what the variable is, without its unit.
	Description string
	// Unit is the unit the formula uses, e.g. "N/mm²"; "1" for a pure number. Inputs in
	// any other unit of the same dimension are converted to it.
	Unit string
	// Optional marks an input that is never solved for and is 0 when omitted (allowances).
	Optional bool
	// Min and Max bound the physical range, inclusive; 0 means no bound. Without Min a
	// value must be greater than 0 (Optional: at least 0).
	Min, Max float64
	// Alt is another way to give the variable, e.g. a diameter instead of a radius.
	Alt *Alt
}

// Alt is an alternative parameter for a [Var], related to it one to one.
type Alt struct {
	Name        string
	Symbol      string
	Aliases     []string
	Description string
	// Unit is the alternative's unit.
	Unit string
	// Relation states the relation for results, e.g. "d = 2·r".
	Relation string
	// ToVar turns the alternative's value into the Var's; FromVar is its inverse.
	ToVar, FromVar func(float64) float64
}

// Solution is the closed form of a formula solved for one variable.
type Solution struct {
	// Formula is the rearranged formula as results show it, e.g. "s = p·d/(20·σ)".
	Formula string
	// Solve computes the variable from the others, all in their units.
	Solve func(v Values) float64
}

// MaterialInput lets a calculator take a "material" parameter from the materials table
// in place of one of its variables.
type MaterialInput struct {
	// Var names the variable the material provides.
	Var string
	// Property returns that variable's value from a material, and a note on where it
	// comes from.
	Property func(m Material) (float64, string)
	// Notes are added to the result when a material was given.
	Notes []string
}

// Derived is a quantity a result reports besides the solved variable.
type Derived struct {
	Name        string
	Description string
	Unit        string
	Value       float64
}

// Param is a non-numeric parameter of a calculator that [Calculator.Run] reads.
type Param struct {
	Name        string
	Description string
	Required    bool
}

// Calculator is one hidden engineering tool: a formula over variables with units that
// can be solved for any one of them. Declare the formula once as Equation; add a
// closed-form [Solution] for each variable that has one, and the others are found
// numerically (bracketing root finder on Equation, over positive values).
//
// A tool that is not a formula (a table lookup) sets Run and Params instead of Vars.
type Calculator struct {
	// Name is "<domain>.<tool>", e.g. "pressure.solve_kesselformel".
	Name        string
	Description string
	// Formula is the formula as results show it, e.g. "σ = p·d/(2·s)".
	Formula string
	Vars    []Var
	// Equation returns left side minus right side of the formula for values in the
	// variables' units: zero exactly when they satisfy it.
	Equation func(v Values) float64
	// Solutions are the closed forms, by variable name.
	Solutions map[string]Solution
	// Conversions are the unit conversions built into the formula, stated in every result
	// (e.g. "1 bar = 0.1 N/mm²").
	Conversions []string
	// Notes are stated in every result.
	Notes []string
	// Material, when set, accepts a "material" parameter for one variable.
	Material *MaterialInput
	// Check rejects a complete set of values that is not physical; nil accepts all.
	Check func(v Values) error
	// Remarks returns warnings for a complete set of values (validity range, ...).
	Remarks func(v Values) []string
	// Derive returns further quantities to report from a complete set of values.
	Derive func(v Values) []Derived
	// Example is a valid parameters object; activation shows it with its result.
	Example map[string]any

	// Run replaces the formula machinery for tools that are not a formula.
	Run func(params map[string]json.RawMessage, materials []Material) (any, error)
	// Params are Run's parameters, for its schema.
	Params []Param
}

// Domain is the part of the name before the dot.
func (c *Calculator) Domain() string {
	d, _, _ := strings.Cut(c.Name, ".")
	return d
}

func (v *Var) symbol() string {
	if v.Symbol != "" {
		return v.Symbol
	}
	return v.Name
}

func (a *Alt) symbol() string {
	if a.Symbol != "" {
		return a.Symbol
	}
	return a.Name
}

// SolvableFor lists the variables the calculator can solve for.
func (c *Calculator) SolvableFor() []string {
	var out []string
	for _, v := range c.Vars {
		if !v.Optional {
			out = append(out, v.Name)
		}
	}
	return out
}

func (c *Calculator) variable(name string) *Var {
	for i := range c.Vars {
		if c.Vars[i].Name == name {
			return &c.Vars[i]
		}
	}
	return nil
}

// validate reports a declaration mistake. New panics on one: it is a programming error.
func (c *Calculator) validate() error {
	domain, tool, ok := strings.Cut(c.Name, ".")
	if !ok || domain == "" || tool == "" {
		return fmt.Errorf("calculator %q: name must be <domain>.<tool>", c.Name)
	}
	if c.Description == "" {
		return fmt.Errorf("calculator %q: no description", c.Name)
	}
	if c.Run != nil {
		if len(c.Vars) > 0 {
			return fmt.Errorf("calculator %q: Run and Vars exclude each other", c.Name)
		}
		return nil
	}
	if c.Equation == nil || c.Formula == "" || len(c.SolvableFor()) < 2 {
		return fmt.Errorf("calculator %q: needs Formula, Equation and at least two solvable Vars", c.Name)
	}
	names := map[string]bool{"material": c.Material != nil}
	claim := func(n string) error {
		if names[n] {
			return fmt.Errorf("calculator %q: parameter name %q used twice", c.Name, n)
		}
		names[n] = true
		return nil
	}
	for _, v := range c.Vars {
		if _, ok := lookupUnit(v.Unit); !ok {
			return fmt.Errorf("calculator %q: variable %s: unknown unit %q", c.Name, v.Name, v.Unit)
		}
		for _, n := range append([]string{v.Name}, v.Aliases...) {
			if err := claim(n); err != nil {
				return err
			}
		}
		if a := v.Alt; a != nil {
			if _, ok := lookupUnit(a.Unit); !ok || a.ToVar == nil || a.FromVar == nil || a.Relation == "" {
				return fmt.Errorf("calculator %q: alternative %s of %s needs a known unit, Relation, ToVar and FromVar", c.Name, a.Name, v.Name)
			}
			for _, n := range append([]string{a.Name}, a.Aliases...) {
				if err := claim(n); err != nil {
					return err
				}
			}
		}
	}
	for name := range c.Solutions {
		if v := c.variable(name); v == nil || v.Optional {
			return fmt.Errorf("calculator %q: solution for %q, which is not a solvable variable", c.Name, name)
		}
	}
	if c.Material != nil && c.variable(c.Material.Var) == nil {
		return fmt.Errorf("calculator %q: material provides unknown variable %q", c.Name, c.Material.Var)
	}
	return nil
}

// Result is what a formula calculator answers.
type Result struct {
	Tool    string `json:"tool"`
	Formula string `json:"formula"`
	// SolvedFor names the variable that was missing; Value and Unit are its value.
	SolvedFor string  `json:"solved_for"`
	Value     float64 `json:"value"`
	Unit      string  `json:"unit"`
	// Answer is the same as one line of text, e.g. "s = 0.3125 mm".
	Answer string `json:"answer"`
	// Method is the rearranged formula used, or how it was solved numerically.
	Method string `json:"method"`
	// Inputs are the values used, in the formula's units.
	Inputs  map[string]Quantity `json:"inputs"`
	Derived map[string]Quantity `json:"derived,omitempty"`
	// Conversions are the unit conversions applied: to the inputs and in the formula.
	Conversions []string `json:"conversions,omitempty"`
	Notes       []string `json:"notes,omitempty"`
	Warnings    []string `json:"warnings,omitempty"`
	// Repairs say what was done to the parameters to read them.
	Repairs []string `json:"repairs,omitempty"`
}

// Quantity is a value with its unit; Given says how it was given when that differs.
type Quantity struct {
	Value       float64 `json:"value"`
	Unit        string  `json:"unit"`
	Description string  `json:"description,omitempty"`
	Given       string  `json:"given,omitempty"`
}

// paramRef is what one parameter name refers to.
type paramRef struct {
	v   *Var
	alt bool
}

// wordAlias is the plain-English parameter name of a variable described as desc: its
// words up to " of ", "(", "," or ":" , lower case, joined by '_' ("area of the circle" →
// "area", "wall thickness" → "wall_thickness"); "" when that is no identifier.
func wordAlias(desc string) string {
	w := strings.ToLower(desc)
	for _, stop := range []string{" of ", " (", "(", ",", ":", ";", " in ", " for "} {
		w, _, _ = strings.Cut(w, stop)
	}
	w = strings.Join(strings.Fields(strings.ReplaceAll(w, "-", " ")), "_")
	if w == "" || len(w) > 40 {
		return ""
	}
	for i, r := range w {
		if !(r >= 'a' && r <= 'z' || r == '_' || i > 0 && r >= '0' && r <= '9') {
			return ""
		}
	}
	return w
}

// paramRefs maps every name a parameter may be given by to what it refers to: each
// variable's name and aliases, its alternative's, and the plain word of each where it is
// no other's (a model, or a design note, that writes {"radius": 0.5} or {"area": 1}
// means r and A).
func (c *Calculator) paramRefs() map[string]paramRef {
	refs := map[string]paramRef{}
	for i := range c.Vars {
		v := &c.Vars[i]
		for _, n := range append([]string{v.Name}, v.Aliases...) {
			refs[n] = paramRef{v: v}
		}
		if v.Alt != nil {
			for _, n := range append([]string{v.Alt.Name}, v.Alt.Aliases...) {
				refs[n] = paramRef{v: v, alt: true}
			}
		}
	}
	for i := range c.Vars {
		v := &c.Vars[i]
		if w := wordAlias(v.Description); w != "" {
			if _, taken := refs[w]; !taken {
				refs[w] = paramRef{v: v}
			}
		}
		if v.Alt != nil {
			if w := wordAlias(v.Alt.Description); w != "" {
				if _, taken := refs[w]; !taken {
					refs[w] = paramRef{v: v, alt: true}
				}
			}
		}
	}
	return refs
}

// words gives, for each variable's name (and its alternative's), the other names it
// may be given by, sorted: its aliases and its plain word.
func (c *Calculator) words() map[string][]string {
	out := map[string][]string{}
	for n, ref := range c.paramRefs() {
		own := ref.v.Name
		if ref.alt {
			own = ref.v.Alt.Name
		}
		if n != own {
			out[own] = append(out[own], n)
		}
	}
	for _, names := range out {
		sort.Strings(names)
	}
	return out
}

// solve runs the formula machinery on decoded parameters.
func (c *Calculator) solve(params map[string]json.RawMessage, materials []Material) (*Result, error) {
	return c.solveWith(c.paramRefs(), params, materials)
}

// solveWith is solve with the calculator's parameter names already gathered
// ([Calculator.paramRefs], which a [Suite] keeps per calculator).
func (c *Calculator) solveWith(refs map[string]paramRef, params map[string]json.RawMessage, materials []Material) (*Result, error) {
	res := &Result{Tool: c.Name, Formula: c.Formula, Inputs: map[string]Quantity{}}
	values := Values{}
	givenAs := map[string]string{} // variable → parameter name it was given as
	for _, key := range sortedKeys(params) {
		if key == "material" && c.Material != nil {
			continue
		}
		ref, ok := refs[key]
		if !ok {
			return nil, c.invalid("unknown parameter %q; the parameters are %s", messages.EchoArguments(key), c.paramList())
		}
		v := ref.v
		name, unitSym := v.Name, v.Unit
		if ref.alt {
			name, unitSym = v.Alt.Name, v.Alt.Unit
		}
		x, conv, present, err := readQuantity(name, params[key], unitSym)
		if err != nil {
			return nil, c.invalid("%v", err)
		}
		if !present {
			continue
		}
		if prev, dup := givenAs[v.Name]; dup {
			return nil, c.invalid("%s is given twice (as %q and %q); give it once", v.Name, prev, key)
		}
		givenAs[v.Name] = key
		if conv != "" {
			res.Conversions = append(res.Conversions, conv)
		}
		q := Quantity{Unit: v.Unit, Description: v.Description}
		if ref.alt {
			if err := checkRange(v.Alt.Name, x, v.Alt.Unit, 0, 0, false); err != nil {
				return nil, c.invalid("%v", err)
			}
			alt := x
			x = v.Alt.ToVar(alt)
			q.Given = fmt.Sprintf("%s = %s %s", v.Alt.Name, formatNumber(alt), v.Alt.Unit)
			res.Conversions = append(res.Conversions, fmt.Sprintf("%s from %s = %s %s: %s = %s %s",
				v.Name, v.Alt.Name, formatNumber(alt), v.Alt.Unit, v.Name, formatNumber(x), v.Unit))
		}
		if err := checkRange(v.Name, x, v.Unit, v.Min, v.Max, v.Optional); err != nil {
			return nil, c.invalid("%v", err)
		}
		values[v.Name] = x
		q.Value = round(x)
		if key != v.Name && !ref.alt {
			// Answered in the caller's words: the input as it was given, with its symbol.
			q.Description += " (" + v.Name + ")"
			res.Inputs[key] = q
		} else {
			res.Inputs[v.Name] = q
		}
	}

	if raw, ok := params["material"]; ok && c.Material != nil {
		var name string
		if err := json.Unmarshal(raw, &name); err != nil {
			return nil, c.invalid("material must be a string naming a material; known materials: %s", materialNames(materials))
		}
		if name != "" {
			v := c.variable(c.Material.Var)
			if key, dup := givenAs[v.Name]; dup {
				return nil, c.invalid("give either material or %s, not both (%s was given as %q)", v.Name, v.Name, key)
			}
			m, err := findMaterial(materials, name)
			if err != nil {
				return nil, c.invalid("%v", err)
			}
			x, note := c.Material.Property(m)
			values[v.Name] = x
			givenAs[v.Name] = "material"
			res.Inputs[v.Name] = Quantity{Value: round(x), Unit: v.Unit, Description: v.Description, Given: "material " + m.Name + " (" + m.Number + ")"}
			res.Notes = append(append(res.Notes, note), c.Material.Notes...)
		}
	}

	var unknown []string
	for _, v := range c.Vars {
		if _, ok := values[v.Name]; ok {
			continue
		}
		if v.Optional {
			values[v.Name] = 0
			res.Inputs[v.Name] = Quantity{Value: 0, Unit: v.Unit, Description: v.Description, Given: "default"}
			continue
		}
		unknown = append(unknown, v.Name)
	}
	switch {
	case len(unknown) == 0:
		return nil, c.invalid("over-determined: all of %s are given; leave out the one to solve for", strings.Join(c.SolvableFor(), ", "))
	case len(unknown) > 1:
		return nil, c.invalid("under-determined: give all but one of %s; missing: %s", strings.Join(c.SolvableFor(), ", "), strings.Join(unknown, ", "))
	}

	v := c.variable(unknown[0])
	x, method, err := c.solveFor(v, values)
	if err != nil {
		return nil, c.invalid("%v", err)
	}
	values[v.Name] = x
	if c.Check != nil {
		if err := c.Check(values); err != nil {
			return nil, c.invalid("%v", err)
		}
	}
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil, c.invalid("no physical solution for %s with %s", v.Name, describeInputs(c, values, v.Name))
	}
	if err := checkRange(v.Name, x, v.Unit, v.Min, v.Max, false); err != nil {
		return nil, c.invalid("no physical solution for %s with %s: %v", v.Name, describeInputs(c, values, v.Name), err)
	}

	res.SolvedFor, res.Value, res.Unit, res.Method = v.Name, round(x), v.Unit, method
	res.Answer = fmt.Sprintf("%s = %s %s", v.Name, formatNumber(x), v.Unit)
	res.Conversions = append(res.Conversions, c.Conversions...)
	res.Notes = append(res.Notes, c.Notes...)
	if c.Remarks != nil {
		res.Warnings = c.Remarks(values)
	}
	res.Derived = map[string]Quantity{}
	if v.Alt != nil {
		res.Derived[v.Alt.Name] = Quantity{Value: round(v.Alt.FromVar(x)), Unit: v.Alt.Unit, Description: v.Alt.Description + " (" + v.Alt.Relation + ")"}
	}
	if c.Derive != nil {
		for _, d := range c.Derive(values) {
			res.Derived[d.Name] = Quantity{Value: round(d.Value), Unit: d.Unit, Description: d.Description}
		}
	}
	if len(res.Derived) == 0 {
		res.Derived = nil
	}
	return res, nil
}

// solveFor finds v from the other values: by its closed form, else numerically.
func (c *Calculator) solveFor(v *Var, values Values) (float64, string, error) {
	if s, ok := c.Solutions[v.Name]; ok {
		return s.Solve(values), s.Formula, nil
	}
	trial := make(Values, len(values)+1)
	for k, x := range values {
		trial[k] = x
	}
	f := func(x float64) float64 {
		trial[v.Name] = x
		return c.Equation(trial)
	}
	x, err := findRoot(f, v.Min, v.Max)
	if err != nil {
		return 0, "", fmt.Errorf("cannot solve for %s with %s: %v", v.Name, describeInputs(c, values, v.Name), err)
	}
	return x, fmt.Sprintf("%s solved numerically from %s (bracketing root finder, relative precision 1e-12)", v.Name, c.Formula), nil
}

// describeInputs writes the given values for error messages: "p = 10 bar, d = 100 mm".
func describeInputs(c *Calculator, values Values, except string) string {
	var parts []string
	for _, v := range c.Vars {
		if x, ok := values[v.Name]; ok && v.Name != except {
			parts = append(parts, fmt.Sprintf("%s = %s %s", v.Name, formatNumber(x), v.Unit))
		}
	}
	return strings.Join(parts, ", ")
}

// checkRange reports whether x is a physical value for the named variable.
func checkRange(name string, x float64, unitSym string, lo, hi float64, zeroOK bool) error {
	u := ""
	if unitSym != "1" {
		u = " " + unitSym
	}
	switch {
	case math.IsNaN(x) || math.IsInf(x, 0):
		return fmt.Errorf("%s is not a finite number", name)
	case lo > 0 && x < lo:
		return fmt.Errorf("%s must be at least %s%s (got %s%s)", name, formatNumber(lo), u, formatNumber(x), u)
	case lo == 0 && zeroOK && x < 0:
		return fmt.Errorf("%s must not be negative (got %s%s)", name, formatNumber(x), u)
	case lo == 0 && !zeroOK && x <= 0:
		return fmt.Errorf("%s must be greater than 0 (got %s%s)", name, formatNumber(x), u)
	case hi > 0 && x > hi:
		return fmt.Errorf("%s must be at most %s%s (got %s%s)", name, formatNumber(hi), u, formatNumber(x), u)
	}
	return nil
}

// paramList names the accepted parameters, with their units, for error messages.
func (c *Calculator) paramList() string {
	var parts []string
	for _, v := range c.Vars {
		parts = append(parts, fmt.Sprintf("%s [%s]", v.Name, v.Unit))
		if v.Alt != nil {
			parts = append(parts, fmt.Sprintf("%s [%s] instead of %s", v.Alt.Name, v.Alt.Unit, v.Name))
		}
	}
	if c.Material != nil {
		parts = append(parts, "material (instead of "+c.Material.Var+")")
	}
	for _, p := range c.Params {
		parts = append(parts, p.Name)
	}
	return strings.Join(parts, ", ")
}

func (c *Calculator) invalid(format string, args ...any) error {
	return invalidArguments(c.Name+": "+format, args...)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
