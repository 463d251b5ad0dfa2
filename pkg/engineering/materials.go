package engineering

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"

	"github.com/toolbus/toolbus/pkg/messages"
)

// Material is one steel of the materials table: minimum properties at room temperature
// (20 °C) as the named standard specifies them for the named product form.
type Material struct {
	Name    string   `json:"name"`
	Number  string   `json:"number"`
	Aliases []string `json:"aliases,omitempty"`
	Kind    string   `json:"kind"`
	// Standard and Product say which table the strengths come from.
	Standard string `json:"standard"`
	Product  string `json:"product"`
	// ReH is the minimum upper yield strength (or 0.2 % proof strength Rp0.2) [N/mm²].
	ReH float64 `json:"ReH"`
	// Rp1 is the minimum 1 % proof strength Rp1.0 [N/mm²]; 0 for ferritic steels.
	Rp1 float64 `json:"Rp1_0,omitempty"`
	// RmMin and RmMax bound the tensile strength [N/mm²].
	RmMin float64 `json:"Rm_min"`
	RmMax float64 `json:"Rm_max"`
	// Density at 20 °C [kg/m³].
	Density       float64 `json:"density"`
	DensitySource string  `json:"density_source"`
}

// Austenitic reports whether the steel is austenitic, which changes its strength value K.
func (m Material) Austenitic() bool { return m.Rp1 > 0 }

// K is the strength value K [N/mm²] that AD 2000 uses at 20 °C, and where it comes from:
// ReH (Rp0.2) for ferritic steels, Rp1.0 for austenitic steels (AD 2000-Merkblatt B0).
func (m Material) K() (float64, string) {
	if m.Austenitic() {
		return m.Rp1, fmt.Sprintf("K = Rp1.0 of %s at 20 °C = %s N/mm² (austenitic steel; %s, %s)", m.Name, formatNumber(m.Rp1), m.Standard, m.Product)
	}
	return m.ReH, fmt.Sprintf("K = ReH of %s at 20 °C = %s N/mm² (%s, %s)", m.Name, formatNumber(m.ReH), m.Standard, m.Product)
}

// temperatureNote warns that table strengths are room-temperature values.
const temperatureNote = "strength values are minimums at 20 °C; at a higher design temperature use the lower elevated-temperature value (Rp0.2/t, Rp1.0/t) from the material standard"

// materialK lets a material give the strength value K.
func materialK() *MaterialInput {
	return &MaterialInput{Var: "K", Property: Material.K, Notes: []string{temperatureNote}}
}

// DefaultMaterials returns the built-in table: common pressure-vessel steels.
func DefaultMaterials() []Material {
	const (
		en10028_2 = "EN 10028-2:2017 (flat products for pressure purposes, non-alloy and alloy steels)"
		en10028_7 = "EN 10028-7:2016 (flat products for pressure purposes, stainless steels)"
		plate16   = "plate, t ≤ 16 mm"
		plate75   = "hot-rolled plate (P), t ≤ 75 mm, solution annealed"
		carbonRho = "7850 kg/m³, the usual value for carbon and low-alloy steel (EN 1993-1-1)"
	)
	return []Material{
		{Name: "P235GH", Number: "1.0345", Kind: "non-alloy steel", Standard: en10028_2, Product: plate16,
			ReH: 235, RmMin: 360, RmMax: 480, Density: 7850, DensitySource: carbonRho},
		{Name: "P265GH", Number: "1.0425", Kind: "non-alloy steel", Standard: en10028_2, Product: plate16,
			ReH: 265, RmMin: 410, RmMax: 530, Density: 7850, DensitySource: carbonRho},
		{Name: "P295GH", Number: "1.0481", Kind: "non-alloy steel", Standard: en10028_2, Product: plate16,
			ReH: 295, RmMin: 460, RmMax: 580, Density: 7850, DensitySource: carbonRho},
		{Name: "P355GH", Number: "1.0473", Kind: "non-alloy steel", Standard: en10028_2, Product: plate16,
			ReH: 355, RmMin: 510, RmMax: 650, Density: 7850, DensitySource: carbonRho},
		{Name: "16Mo3", Number: "1.5415", Kind: "alloy steel (Mo)", Standard: en10028_2, Product: plate16,
			ReH: 275, RmMin: 440, RmMax: 590, Density: 7850, DensitySource: carbonRho},
		{Name: "X5CrNi18-10", Number: "1.4301", Kind: "austenitic stainless steel", Standard: en10028_7, Product: plate75,
			ReH: 210, Rp1: 250, RmMin: 520, RmMax: 720, Density: 7900, DensitySource: "7.9 kg/dm³ (EN 10088-1:2014, Annex A)"},
		{Name: "X6CrNiMoTi17-12-2", Number: "1.4571", Kind: "austenitic stainless steel", Standard: en10028_7, Product: plate75,
			ReH: 220, Rp1: 260, RmMin: 520, RmMax: 670, Density: 8000, DensitySource: "8.0 kg/dm³ (EN 10088-1:2014, Annex A)"},
	}
}

// materialKey folds the spellings of a material name: "1.4301", "14301" and "1 4301"
// are the same steel, and so are "P265GH" and "p265gh".
func materialKey(name string) string {
	var b strings.Builder
	for _, r := range name {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

// findMaterial looks a material up by name, number or alias. The error lists the known
// materials, so the model can pick one.
func findMaterial(table []Material, name string) (Material, error) {
	key := materialKey(name)
	for _, m := range table {
		for _, n := range append([]string{m.Name, m.Number}, m.Aliases...) {
			if key != "" && materialKey(n) == key {
				return m, nil
			}
		}
	}
	return Material{}, fmt.Errorf("unknown material %q; known materials: %s", name, materialNames(table))
}

func materialNames(table []Material) string {
	names := make([]string, len(table))
	for i, m := range table {
		names[i] = m.Name + " (" + m.Number + ")"
	}
	return strings.Join(names, ", ")
}

// materialsCalculators are the materials domain.
func materialsCalculators() []Calculator {
	return []Calculator{materialLookup(), allowableStress(), massFromDensity()}
}

// LookupResult is what materials.lookup answers.
type LookupResult struct {
	Tool       string              `json:"tool"`
	Material   string              `json:"material"`
	Number     string              `json:"number"`
	Kind       string              `json:"kind"`
	Properties map[string]Quantity `json:"properties"`
	Source     string              `json:"source"`
	Notes      []string            `json:"notes"`
}

func materialLookup() Calculator {
	return Calculator{
		Name: "materials.lookup",
		Description: "Properties of a common pressure-vessel steel at 20 °C: minimum yield strength ReH (Rp0.2), " +
			"Rp1.0 for austenitic steels, tensile strength Rm, density and the AD 2000 strength value K, with the source.",
		Params: []Param{{Name: "material", Required: true,
			Description: "steel name or number, e.g. \"P265GH\", \"1.0425\", \"16Mo3\", \"1.4301\", \"X6CrNiMoTi17-12-2\""}},
		Run: func(params map[string]json.RawMessage, table []Material) (any, error) {
			var name string
			raw, ok := params["material"]
			if ok && json.Unmarshal(raw, &name) != nil {
				return nil, invalidArguments("materials.lookup: material must be a string; known materials: %s", materialNames(table))
			}
			for key := range params {
				if key != "material" {
					return nil, invalidArguments("materials.lookup: unknown parameter %q; the only parameter is material", messages.EchoArguments(key))
				}
			}
			if strings.TrimSpace(name) == "" {
				return nil, invalidArguments("materials.lookup: material is missing; known materials: %s", materialNames(table))
			}
			m, err := findMaterial(table, name)
			if err != nil {
				return nil, invalidArguments("materials.lookup: %v", err)
			}
			k, kNote := m.K()
			props := map[string]Quantity{
				"ReH":     {Value: m.ReH, Unit: "N/mm²", Description: "minimum upper yield strength ReH (or 0.2 % proof strength Rp0.2) at 20 °C"},
				"Rm_min":  {Value: m.RmMin, Unit: "N/mm²", Description: "minimum tensile strength at 20 °C"},
				"Rm_max":  {Value: m.RmMax, Unit: "N/mm²", Description: "maximum tensile strength at 20 °C"},
				"density": {Value: m.Density, Unit: "kg/m³", Description: "density at 20 °C: " + m.DensitySource},
				"K":       {Value: k, Unit: "N/mm²", Description: "AD 2000 strength value at 20 °C: " + kNote},
			}
			if m.Austenitic() {
				props["Rp1_0"] = Quantity{Value: m.Rp1, Unit: "N/mm²", Description: "minimum 1 % proof strength Rp1.0 at 20 °C"}
			}
			return LookupResult{
				Tool: "materials.lookup", Material: m.Name, Number: m.Number, Kind: m.Kind, Properties: props,
				Source: m.Standard + ", " + m.Product,
				Notes:  []string{temperatureNote, "thicker products have lower minimum strengths; see the standard's table for other thicknesses"},
			}, nil
		},
		Example: map[string]any{"material": "P265GH"},
	}
}

func allowableStress() Calculator {
	return Calculator{
		Name: "materials.allowable_stress",
		Description: "Allowable design stress from a strength value and a safety factor (AD 2000-Merkblatt B0): f = K/S. " +
			"Give two of f, K (or material), S and get the third.",
		Formula: "f = K/S",
		Vars: []Var{
			{Name: "f", Description: "allowable design stress", Unit: "N/mm²"},
			{Name: "K", Description: "strength value (ReH or Rp0.2; Rp1.0 for austenitic steels)", Unit: "N/mm²"},
			{Name: "S", Description: "safety factor (1.5 for rolled and forged steels at design conditions)", Unit: "1", Min: 1},
		},
		Equation: func(v Values) float64 { return v["f"] - v["K"]/v["S"] },
		Solutions: map[string]Solution{
			"f": {"f = K/S", func(v Values) float64 { return v["K"] / v["S"] }},
			"K": {"K = f·S", func(v Values) float64 { return v["f"] * v["S"] }},
			"S": {"S = K/f", func(v Values) float64 { return v["K"] / v["f"] }},
		},
		Material: materialK(),
		Notes:    []string{"units: f and K [N/mm²], S [1]"},
		Example:  map[string]any{"material": "P265GH", "S": 1.5},
	}
}

func massFromDensity() Calculator {
	return Calculator{
		Name:        "materials.solve_mass",
		Description: "Mass from density and volume: m = ρ·V. Give two of m, rho (or material), V and get the third.",
		Formula:     "m = ρ·V",
		Vars: []Var{
			{Name: "m", Description: "mass", Unit: "kg"},
			{Name: "rho", Symbol: "ρ", Aliases: []string{"ρ", "density"}, Description: "density", Unit: "kg/m³"},
			{Name: "V", Description: "volume", Unit: "m³"},
		},
		Equation: func(v Values) float64 { return v["m"] - v["rho"]*v["V"] },
		Solutions: map[string]Solution{
			"m":   {"m = ρ·V", func(v Values) float64 { return v["rho"] * v["V"] }},
			"rho": {"ρ = m/V", func(v Values) float64 { return v["m"] / v["V"] }},
			"V":   {"V = m/ρ", func(v Values) float64 { return v["m"] / v["rho"] }},
		},
		Material: &MaterialInput{Var: "rho", Property: func(m Material) (float64, string) {
			return m.Density, fmt.Sprintf("ρ of %s = %s kg/m³ (%s)", m.Name, formatNumber(m.Density), m.DensitySource)
		}},
		Notes:   []string{"units: m [kg], ρ [kg/m³], V [m³]; 1 g/cm³ = 1000 kg/m³, 1 l = 0.001 m³"},
		Example: map[string]any{"material": "P265GH", "V": "10 l"},
	}
}
