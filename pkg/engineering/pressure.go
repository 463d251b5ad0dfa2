package engineering

import (
	"fmt"
	"math"
)

// pressureCalculators are the pressure domain. Pressures are in bar and stresses in
// N/mm², as German pressure-vessel practice writes them; 1 bar = 0.1 N/mm² is why the
// formulas carry a factor 10 (20 = 2·10).
func pressureCalculators() []Calculator {
	return []Calculator{kesselformel(), ad2000CylinderWall(), pressureForce()}
}

const barToNmm2 = "1 bar = 0.1 N/mm²"

func kesselformel() Calculator {
	return Calculator{
		Name: "pressure.solve_kesselformel",
		Description: "Boiler formula (Kesselformel, Barlow) for the hoop stress in a thin-walled cylinder " +
			"under internal pressure: σ = p·d/(2·s). Give any three of sigma, p, d, s and get the fourth.",
		Formula: "σ = p·d/(2·s)",
		Vars: []Var{
			{Name: "sigma", Symbol: "σ", Aliases: []string{"σ"}, Description: "hoop stress in the wall", Unit: "N/mm²"},
			{Name: "p", Description: "internal overpressure", Unit: "bar"},
			{Name: "d", Description: "inside diameter", Unit: "mm"},
			{Name: "s", Description: "wall thickness", Unit: "mm"},
		},
		Equation: func(v Values) float64 { return v["sigma"] - v["p"]*v["d"]/(20*v["s"]) },
		Solutions: map[string]Solution{
			"sigma": {"σ = p·d/(20·s)", func(v Values) float64 { return v["p"] * v["d"] / (20 * v["s"]) }},
			"p":     {"p = 20·σ·s/d", func(v Values) float64 { return 20 * v["sigma"] * v["s"] / v["d"] }},
			"d":     {"d = 20·σ·s/p", func(v Values) float64 { return 20 * v["sigma"] * v["s"] / v["p"] }},
			"s":     {"s = p·d/(20·σ)", func(v Values) float64 { return v["p"] * v["d"] / (20 * v["sigma"]) }},
		},
		Conversions: []string{barToNmm2 + ", so with p in bar the formula reads σ = p·d/(20·s)"},
		Notes:       []string{"units: σ [N/mm²], p [bar], d [mm], s [mm]", "thin-wall formula: valid for s ≤ d/10 (outside/inside diameter ≤ 1.2)"},
		Remarks: func(v Values) []string {
			if r := v["s"] / v["d"]; r > 0.1 {
				return []string{fmt.Sprintf("s/d = %s > 0.1: the wall is too thick for the thin-wall formula; use a thick-wall method such as AD 2000-Merkblatt B10", formatNumber(r))}
			}
			return nil
		},
		Example: map[string]any{"p": 10, "d": 100, "sigma": 160},
	}
}

func ad2000CylinderWall() Calculator {
	s0 := func(v Values) float64 { return v["s"] - v["c1"] - v["c2"] }
	strength := func(v Values) float64 { return 20 * v["K"] * v["v"] / v["S"] }
	return Calculator{
		Name: "pressure.ad2000_cylinder_wall",
		Description: "Required wall thickness of a cylindrical shell under internal overpressure, AD 2000-Merkblatt B1: " +
			"s = Da·p/(20·K/S·v + p) + c1 + c2. Give all but one of s, Da, p, K (or material), S, v; c1 and c2 default to 0.",
		Formula: "s = Da·p/(20·K/S·v + p) + c1 + c2",
		Vars: []Var{
			{Name: "s", Description: "wall thickness including the allowances c1 and c2", Unit: "mm"},
			{Name: "Da", Aliases: []string{"D_a", "da"}, Description: "outside diameter", Unit: "mm"},
			{Name: "p", Description: "design pressure (overpressure)", Unit: "bar"},
			{Name: "K", Description: "strength value at design temperature (ReH or Rp0.2; Rp1.0 for austenitic steels)", Unit: "N/mm²"},
			{Name: "S", Description: "safety factor (AD 2000-Merkblatt B0: 1.5 for rolled and forged steels)", Unit: "1", Min: 1},
			{Name: "v", Description: "weld joint factor (1 for a fully tested seam, 0.85 for a partly tested one)", Unit: "1", Max: 1},
			{Name: "c1", Description: "allowance for the minus tolerance of the wall thickness", Unit: "mm", Optional: true},
			{Name: "c2", Description: "corrosion or wear allowance", Unit: "mm", Optional: true},
		},
		Equation: func(v Values) float64 { return s0(v) - v["Da"]*v["p"]/(strength(v)+v["p"]) },
		Solutions: map[string]Solution{
			"s":  {"s = Da·p/(20·K/S·v + p) + c1 + c2", func(v Values) float64 { return v["Da"]*v["p"]/(strength(v)+v["p"]) + v["c1"] + v["c2"] }},
			"Da": {"Da = (s − c1 − c2)·(20·K/S·v + p)/p", func(v Values) float64 { return s0(v) * (strength(v) + v["p"]) / v["p"] }},
			"p":  {"p = 20·K/S·v·(s − c1 − c2)/(Da − (s − c1 − c2))", func(v Values) float64 { return strength(v) * s0(v) / (v["Da"] - s0(v)) }},
			"K":  {"K = S·p·(Da − (s − c1 − c2))/(20·v·(s − c1 − c2))", func(v Values) float64 { return v["S"] * v["p"] * (v["Da"] - s0(v)) / (20 * v["v"] * s0(v)) }},
			"S":  {"S = 20·K·v·(s − c1 − c2)/(p·(Da − (s − c1 − c2)))", func(v Values) float64 { return 20 * v["K"] * v["v"] * s0(v) / (v["p"] * (v["Da"] - s0(v))) }},
			"v":  {"v = S·p·(Da − (s − c1 − c2))/(20·K·(s − c1 − c2))", func(v Values) float64 { return v["S"] * v["p"] * (v["Da"] - s0(v)) / (20 * v["K"] * s0(v)) }},
		},
		Material:    materialK(),
		Conversions: []string{barToNmm2 + ", hence the factor 20 = 2·10 with p in bar and K in N/mm²"},
		Notes: []string{
			"units: s, Da, c1, c2 [mm], p [bar], K [N/mm²], S and v [1]",
			"AD 2000-Merkblatt B1 applies to cylindrical shells with Da/Di ≤ 1.2",
		},
		Check: func(v Values) error {
			if s, c := v["s"], v["c1"]+v["c2"]; s <= c {
				return fmt.Errorf("s (%s mm) must be greater than c1 + c2 (%s mm)", formatNumber(s), formatNumber(c))
			}
			if 2*v["s"] >= v["Da"] {
				return fmt.Errorf("s (%s mm) must be less than half of Da (%s mm)", formatNumber(v["s"]), formatNumber(v["Da"]))
			}
			return nil
		},
		Remarks: func(v Values) []string {
			di := v["Da"] - 2*v["s"]
			if r := v["Da"] / di; r > 1.2 {
				return []string{fmt.Sprintf("Da/Di = %s > 1.2: outside the range of AD 2000-Merkblatt B1; use AD 2000-Merkblatt B10 for thick-walled shells", formatNumber(r))}
			}
			return nil
		},
		Derive: func(v Values) []Derived {
			return []Derived{
				{Name: "Di", Description: "inside diameter Da − 2·s", Unit: "mm", Value: v["Da"] - 2*v["s"]},
				{Name: "s0", Description: "wall thickness without allowances s − c1 − c2", Unit: "mm", Value: s0(v)},
				{Name: "K_S", Description: "allowable stress K/S", Unit: "N/mm²", Value: v["K"] / v["S"]},
			}
		},
		Example: map[string]any{"Da": "508 mm", "p": "16 bar", "material": "P265GH", "S": 1.5, "v": 0.85, "c1": 0.3, "c2": 1},
	}
}

func pressureForce() Calculator {
	return Calculator{
		Name:        "pressure.solve_force",
		Description: "Force of a pressure on an area (a cover, a piston, a flange): F = p·A. Give two of F, p, A (or d for a circular area) and get the third.",
		Formula:     "F = p·A",
		Vars: []Var{
			{Name: "F", Description: "force", Unit: "N"},
			{Name: "p", Description: "pressure (overpressure)", Unit: "bar"},
			{Name: "A", Description: "loaded area", Unit: "mm²", Alt: &Alt{
				Name: "d", Description: "diameter of a circular loaded area", Unit: "mm", Relation: "A = π·d²/4",
				ToVar:   func(d float64) float64 { return math.Pi * d * d / 4 },
				FromVar: func(a float64) float64 { return math.Sqrt(4 * a / math.Pi) },
			}},
		},
		Equation: func(v Values) float64 { return v["F"] - v["p"]*v["A"]/10 },
		Solutions: map[string]Solution{
			"F": {"F = p·A/10", func(v Values) float64 { return v["p"] * v["A"] / 10 }},
			"p": {"p = 10·F/A", func(v Values) float64 { return 10 * v["F"] / v["A"] }},
			"A": {"A = 10·F/p", func(v Values) float64 { return 10 * v["F"] / v["p"] }},
		},
		Conversions: []string{barToNmm2 + ", so with p in bar and A in mm² the force in N is F = p·A/10"},
		Notes:       []string{"units: F [N], p [bar], A [mm²]"},
		Example:     map[string]any{"p": 10, "d": "200 mm"},
	}
}
