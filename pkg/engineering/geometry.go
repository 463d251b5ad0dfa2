package engineering

import (
	"fmt"
	"math"
)

// geometryCalculators are the geometry domain: SI units (m, m², m³) for shapes, mm and
// mm² for pipe sections as pipe tables write them.
func geometryCalculators() []Calculator {
	return []Calculator{circleArea(), cylinderVolume(), cylinderSurface(), pipeCrossSection()}
}

// diameterFor lets a radius r [m] be given as a diameter d [m].
func diameterFor() *Alt {
	return &Alt{
		Name: "d", Description: "diameter", Unit: "m", Relation: "d = 2·r",
		ToVar:   func(d float64) float64 { return d / 2 },
		FromVar: func(r float64) float64 { return 2 * r },
	}
}

func circleArea() Calculator {
	return Calculator{
		Name:        "geometry.solve_circle_area",
		Description: "Area of a circle: A = π·r². Give the radius r (or the diameter d) and get A, or give A and get r and d.",
		Formula:     "A = π·r²",
		Vars: []Var{
			{Name: "A", Description: "area of the circle", Unit: "m²"},
			{Name: "r", Description: "radius", Unit: "m", Alt: diameterFor()},
		},
		Equation: func(v Values) float64 { return v["A"] - math.Pi*v["r"]*v["r"] },
		Solutions: map[string]Solution{
			"A": {"A = π·r²", func(v Values) float64 { return math.Pi * v["r"] * v["r"] }},
			"r": {"r = √(A/π)", func(v Values) float64 { return math.Sqrt(v["A"] / math.Pi) }},
		},
		Notes:   []string{"units: A [m²], r and d [m]; give lengths in mm as strings, e.g. \"100 mm\""},
		Example: map[string]any{"d": "100 mm"},
	}
}

func cylinderVolume() Calculator {
	return Calculator{
		Name:        "geometry.solve_cylinder_volume",
		Description: "Volume of a circular cylinder: V = π·r²·h. Give two of V, r (or d), h and get the third.",
		Formula:     "V = π·r²·h",
		Vars: []Var{
			{Name: "V", Description: "volume", Unit: "m³"},
			{Name: "r", Description: "radius", Unit: "m", Alt: diameterFor()},
			{Name: "h", Aliases: []string{"L"}, Description: "height (length)", Unit: "m"},
		},
		Equation: func(v Values) float64 { return v["V"] - math.Pi*v["r"]*v["r"]*v["h"] },
		Solutions: map[string]Solution{
			"V": {"V = π·r²·h", func(v Values) float64 { return math.Pi * v["r"] * v["r"] * v["h"] }},
			"r": {"r = √(V/(π·h))", func(v Values) float64 { return math.Sqrt(v["V"] / (math.Pi * v["h"])) }},
			"h": {"h = V/(π·r²)", func(v Values) float64 { return v["V"] / (math.Pi * v["r"] * v["r"]) }},
		},
		Notes: []string{"units: V [m³], r, d and h [m]; 1 m³ = 1000 l"},
		Derive: func(v Values) []Derived {
			return []Derived{{Name: "V_l", Description: "volume in litres", Unit: "l", Value: v["V"] * 1000}}
		},
		Example: map[string]any{"d": "1 m", "h": "2 m"},
	}
}

func cylinderSurface() Calculator {
	return Calculator{
		Name: "geometry.solve_cylinder_surface",
		Description: "Total surface of a closed circular cylinder (shell and both ends): A = 2·π·r·(r + h). " +
			"Give two of A, r (or d), h and get the third.",
		Formula: "A = 2·π·r·(r + h)",
		Vars: []Var{
			{Name: "A", Description: "total surface, shell plus both ends", Unit: "m²"},
			{Name: "r", Description: "radius", Unit: "m", Alt: diameterFor()},
			{Name: "h", Aliases: []string{"L"}, Description: "height (length)", Unit: "m"},
		},
		Equation: func(v Values) float64 { return v["A"] - 2*math.Pi*v["r"]*(v["r"]+v["h"]) },
		// r has no declared closed form: the numeric solver finds it (the surface grows
		// monotonically with r, so the root is unique).
		Solutions: map[string]Solution{
			"A": {"A = 2·π·r·(r + h)", func(v Values) float64 { return 2 * math.Pi * v["r"] * (v["r"] + v["h"]) }},
			"h": {"h = A/(2·π·r) − r", func(v Values) float64 { return v["A"]/(2*math.Pi*v["r"]) - v["r"] }},
		},
		Notes: []string{"units: A [m²], r, d and h [m]"},
		Derive: func(v Values) []Derived {
			return []Derived{
				{Name: "A_shell", Description: "shell (lateral) surface 2·π·r·h", Unit: "m²", Value: 2 * math.Pi * v["r"] * v["h"]},
				{Name: "A_end", Description: "surface of one end π·r²", Unit: "m²", Value: math.Pi * v["r"] * v["r"]},
			}
		},
		Example: map[string]any{"d": "1 m", "h": "2 m"},
	}
}

func pipeCrossSection() Calculator {
	return Calculator{
		Name: "geometry.solve_pipe_cross_section",
		Description: "Metal cross-section of a pipe from outside diameter and wall thickness: A = π·s·(Da − s) = π·(Da² − Di²)/4. " +
			"Give two of A, Da, s and get the third; the result adds the inside diameter and the flow area.",
		Formula: "A = π·s·(Da − s)",
		Vars: []Var{
			{Name: "A", Description: "metal cross-section of the pipe wall", Unit: "mm²"},
			{Name: "Da", Aliases: []string{"D_a", "da"}, Description: "outside diameter", Unit: "mm"},
			{Name: "s", Description: "wall thickness", Unit: "mm"},
		},
		Equation: func(v Values) float64 { return v["A"] - math.Pi*v["s"]*(v["Da"]-v["s"]) },
		Solutions: map[string]Solution{
			"A":  {"A = π·s·(Da − s)", func(v Values) float64 { return math.Pi * v["s"] * (v["Da"] - v["s"]) }},
			"Da": {"Da = A/(π·s) + s", func(v Values) float64 { return v["A"]/(math.Pi*v["s"]) + v["s"] }},
			// The quadratic has two roots, s and Da − s; the wall is the smaller one.
			"s": {"s = (Da − √(Da² − 4·A/π))/2", func(v Values) float64 {
				return (v["Da"] - math.Sqrt(v["Da"]*v["Da"]-4*v["A"]/math.Pi)) / 2
			}},
		},
		Notes: []string{"units: A [mm²], Da and s [mm]; Di = Da − 2·s"},
		Check: func(v Values) error {
			if 2*v["s"] >= v["Da"] {
				return fmt.Errorf("s (%s mm) must be less than half of Da (%s mm), or the pipe has no bore", formatNumber(v["s"]), formatNumber(v["Da"]))
			}
			return nil
		},
		Derive: func(v Values) []Derived {
			di := v["Da"] - 2*v["s"]
			return []Derived{
				{Name: "Di", Description: "inside diameter Da − 2·s", Unit: "mm", Value: di},
				{Name: "A_flow", Description: "flow cross-section π·Di²/4", Unit: "mm²", Value: math.Pi * di * di / 4},
			}
		},
		Example: map[string]any{"Da": "60.3 mm", "s": "2.9 mm"},
	}
}
