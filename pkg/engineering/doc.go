// Package engineering owns toolbus's engineering calculators and the small handshake
// through which a model reaches them.
//
// # Hierarchical tools
//
// A [Suite] shows a model three tools ([Suite.Tools]): clock, dispatch_engineering and
// execute_tool. The calculators themselves are hidden; a model finds and unlocks them
// per conversation:
//
//	dispatch_engineering {"action": "info"}                           domains, which are active, tool counts
//	dispatch_engineering {"domain": "pressure", "action": "list"}     calculators, parameters, units
//	dispatch_engineering {"domain": "pressure", "action": "activate"} unlock them, with a worked example each
//	execute_tool {"tool_name": "pressure.solve_kesselformel", "parameters": {"p": 10, "d": 100, "sigma": 160}}
//
// Before activation execute_tool fails with domain_not_active and a message naming the
// exact dispatch_engineering call to make. Activation is kept in a [SessionStore] keyed
// by conversation, so any replica of the executor sees it; activating one domain leaves
// the others active unless [Options.ExclusiveDomains] is set. With [Options.Expose] set
// to [ExposeFlat], every calculator is also a visible tool of its own.
//
// Every error [Suite.Call] returns is a *[messages.ToolError] whose message tells the
// model what to change.
//
// # Calculators
//
// A [Calculator] is one formula over variables with units, solvable for any one of them:
// the caller gives all variables but one and gets the missing one. Numbers are read in
// the variable's unit, strings may carry a unit ("10 bar", "1 MPa", "145 psi",
// "0.1 m"), and results state the formula, the rearranged formula used, the inputs as
// used and every unit conversion. Zero, negative and non-physical values, and calls
// with no or several unknowns, are invalid_arguments errors naming the parameter.
//
// The built-in calculators ([DefaultCalculators]):
//
//   - pressure.solve_kesselformel: σ = p·d/(2·s), σ [N/mm²], p [bar], d and s [mm]
//   - pressure.ad2000_cylinder_wall: s = Da·p/(20·K/S·v + p) + c1 + c2 (AD 2000-Merkblatt B1)
//   - pressure.solve_force: F = p·A
//   - geometry.solve_circle_area: A = π·r² (or diameter d)
//   - geometry.solve_cylinder_volume, geometry.solve_cylinder_surface
//   - geometry.solve_pipe_cross_section: A = π·s·(Da − s)
//   - materials.lookup: strengths and density of common pressure-vessel steels, with source
//   - materials.allowable_stress: f = K/S
//   - materials.solve_mass: m = ρ·V
//
// # Adding a calculator
//
// A calculator is a declaration: a name "<domain>.<tool>", a description, the formula
// as text, its variables with units, and the formula once as an Equation that is zero
// when the values satisfy it. Add a closed-form [Solution] for every variable that has
// one; any other variable is solved numerically from Equation by a bracketing root
// finder over positive values. Give an Example: activation shows it with its result,
// and [New] panics if it does not solve.
//
//	c := engineering.Calculator{
//		Name:        "mechanics.solve_tensile_stress",
//		Description: "Tensile stress in a bar: σ = F/A.",
//		Formula:     "σ = F/A",
//		Vars: []engineering.Var{
//			{Name: "sigma", Symbol: "σ", Description: "tensile stress", Unit: "N/mm²"},
//			{Name: "F", Description: "tensile force", Unit: "N"},
//			{Name: "A", Description: "cross-section", Unit: "mm²"},
//		},
//		Equation: func(v engineering.Values) float64 { return v["sigma"] - v["F"]/v["A"] },
//		Solutions: map[string]engineering.Solution{
//			"sigma": {Formula: "σ = F/A", Solve: func(v engineering.Values) float64 { return v["F"] / v["A"] }},
//		},
//		Example: map[string]any{"F": "10 kN", "A": 100},
//	}
//	suite := engineering.New(&engineering.Options{Calculators: append(engineering.DefaultCalculators(), c)})
//
// A new calculator of the built-in domains belongs in pressure.go, geometry.go or
// materials.go, with a table test for every variable it solves for, its expected values
// worked out by hand in the test (see the Example of adding a calculator).
//
// # MCP
//
// [Suite.MCPServer] serves the same tools as a Model Context Protocol server; cmd/engineering
// runs it over stdio or streamable HTTP.
package engineering
