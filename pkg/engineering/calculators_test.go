package engineering_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/toolbus/toolbus/pkg/engineering"
	"github.com/toolbus/toolbus/pkg/messages"
)

// calcCase is one calculator call. want is the value of wantFor in wantUnit, worked out
// by hand in the comment above the case; results carry 6 significant digits, so values
// are compared to 1e-5 relative.
type calcCase struct {
	name    string
	tool    string
	params  string
	wantFor string
	want    float64
	unit    string
	// wantText must each appear in the result (conversions, notes, method, warnings).
	wantText []string
	// wantErr, when set, must appear in the invalid_arguments error message.
	wantErr string
}

var calcCases = []calcCase{
	// ---- pressure.solve_kesselformel: σ = p·d/(2·s); with p in bar, 1 bar = 0.1 N/mm²,
	// so σ = p·d/(20·s).
	{
		// s = p·d/(20·σ) = 10·100/(20·160) = 1000/3200 = 0.3125 mm (the seed's 3.125 mm is 10× off).
		name: "kessel s", tool: "pressure.solve_kesselformel", params: `{"p": 10, "d": 100, "sigma": 160}`,
		wantFor: "s", want: 0.3125, unit: "mm", wantText: []string{"1 bar = 0.1 N/mm²", "s = p·d/(20·σ)"},
	},
	{
		// σ = p·d/(20·s) = 10·100/(20·0.3125) = 1000/6.25 = 160 N/mm².
		name: "kessel sigma", tool: "pressure.solve_kesselformel", params: `{"p": 10, "d": 100, "s": 0.3125}`,
		wantFor: "sigma", want: 160, unit: "N/mm²", wantText: []string{"σ = p·d/(20·s)"},
	},
	{
		// p = 20·σ·s/d = 20·160·0.3125/100 = 1000/100 = 10 bar.
		name: "kessel p", tool: "pressure.solve_kesselformel", params: `{"sigma": 160, "s": 0.3125, "d": 100}`,
		wantFor: "p", want: 10, unit: "bar", wantText: []string{"p = 20·σ·s/d"},
	},
	{
		// d = 20·σ·s/p = 20·160·0.3125/10 = 1000/10 = 100 mm.
		name: "kessel d", tool: "pressure.solve_kesselformel", params: `{"sigma": 160, "s": 0.3125, "p": 10}`,
		wantFor: "d", want: 100, unit: "mm", wantText: []string{"d = 20·σ·s/p"},
	},
	{
		// 1 MPa = 10 bar, 0.1 m = 100 mm, 160 MPa = 160 N/mm²: the same call as "kessel s".
		name: "kessel SI units", tool: "pressure.solve_kesselformel", params: `{"p": "1 MPa", "d": "0.1 m", "sigma": "160 MPa"}`,
		wantFor: "s", want: 0.3125, unit: "mm", wantText: []string{"p: 1 MPa = 10 bar", "d: 0.1 m = 100 mm"},
	},
	{
		// 1 psi = 4.4482216152605 N/(0.0254 m)² = 6894.757 Pa, so 145 psi = 999739.8 Pa = 9.997398 bar;
		// s = 9.997398·100/(20·160) = 999.7398/3200 = 0.3124187 mm.
		name: "kessel psi", tool: "pressure.solve_kesselformel", params: `{"p": "145 psi", "d": 100, "sigma": 160}`,
		wantFor: "s", want: 0.3124187, unit: "mm", wantText: []string{"p: 145 psi = 9.9974 bar (1 psi = 0.0689476 bar)"},
	},
	{
		// {"value": 10, "unit": "bar"} is 10 bar; "4 in" = 101.6 mm: s = 10·101.6/3200 = 0.3175 mm.
		name: "kessel value object and inches", tool: "pressure.solve_kesselformel", params: `{"p": {"value": 10, "unit": "bar"}, "d": "4 in", "sigma": "160 N/mm2"}`,
		wantFor: "s", want: 0.3175, unit: "mm", wantText: []string{"d: 4 in = 101.6 mm"},
	},
	{
		// null and "?" mark the unknown: s = 0.3125 mm as above.
		name: "kessel null unknown", tool: "pressure.solve_kesselformel", params: `{"p": "10bar", "d": 100, "sigma": 160, "s": null}`,
		wantFor: "s", want: 0.3125, unit: "mm",
	},
	{
		// s = 100·100/(20·40) = 10000/800 = 12.5 mm; s/d = 0.125 > 0.1: thick wall, warned.
		name: "kessel thick wall warns", tool: "pressure.solve_kesselformel", params: `{"p": 100, "d": 100, "sigma": 40}`,
		wantFor: "s", want: 12.5, unit: "mm", wantText: []string{"s/d = 0.125 > 0.1"},
	},
	{name: "kessel zero p", tool: "pressure.solve_kesselformel", params: `{"p": 0, "d": 100, "sigma": 160}`, wantErr: "p must be greater than 0 (got 0 bar)"},
	{name: "kessel negative d", tool: "pressure.solve_kesselformel", params: `{"p": 10, "d": "-100 mm", "sigma": 160}`, wantErr: "d must be greater than 0 (got -100 mm)"},
	{name: "kessel wrong dimension", tool: "pressure.solve_kesselformel", params: `{"p": "10 mm", "d": 100, "sigma": 160}`, wantErr: `p: "mm" is a unit of length, but p is a pressure or stress`},
	{name: "kessel unknown unit", tool: "pressure.solve_kesselformel", params: `{"p": "10 furlong", "d": 100, "sigma": 160}`, wantErr: `p: unknown unit "furlong"`},
	{name: "kessel not a number", tool: "pressure.solve_kesselformel", params: `{"p": "ten", "d": 100, "sigma": 160}`, wantErr: `p: "ten" is not a number`},
	{name: "kessel bool", tool: "pressure.solve_kesselformel", params: `{"p": true, "d": 100, "sigma": 160}`, wantErr: "p must be a number in bar"},
	{name: "kessel overflow", tool: "pressure.solve_kesselformel", params: `{"p": 1e999, "d": 100, "sigma": 160}`, wantErr: "out of range"},
	{name: "kessel over-determined", tool: "pressure.solve_kesselformel", params: `{"p": 10, "d": 100, "sigma": 160, "s": 1}`, wantErr: "over-determined: all of sigma, p, d, s are given"},
	{name: "kessel under-determined", tool: "pressure.solve_kesselformel", params: `{"p": 10, "sigma": 160}`, wantErr: "under-determined: give all but one of sigma, p, d, s; missing: d, s"},
	{name: "kessel unknown parameter", tool: "pressure.solve_kesselformel", params: `{"p": 10, "D": 100, "sigma": 160}`, wantErr: `unknown parameter "D"; the parameters are sigma [N/mm²], p [bar], d [mm], s [mm]`},
	{name: "kessel given twice", tool: "pressure.solve_kesselformel", params: `{"p": 10, "d": 100, "sigma": 160, "σ": 150}`, wantErr: "sigma is given twice"},

	// ---- pressure.ad2000_cylinder_wall: s = Da·p/(20·K/S·v + p) + c1 + c2.
	// Base case Da = 508 mm, p = 16 bar, K = 265 N/mm², S = 1.5, v = 0.85, c1 = 0.3, c2 = 1:
	// 20·K/S·v = 20·265·0.85/1.5 = 4505/1.5 = 3003.333; + p = 3019.333;
	// Da·p = 508·16 = 8128; 8128/3019.333 = 2.691985; s = 2.691985 + 1.3 = 3.991985 mm.
	{
		name: "ad2000 s", tool: "pressure.ad2000_cylinder_wall", params: `{"Da": 508, "p": 16, "K": 265, "S": 1.5, "v": 0.85, "c1": 0.3, "c2": 1}`,
		wantFor: "s", want: 3.991985, unit: "mm", wantText: []string{"1 bar = 0.1 N/mm²", "s = Da·p/(20·K/S·v + p) + c1 + c2"},
	},
	{
		// P265GH: K = ReH = 265 N/mm² (EN 10028-2, t ≤ 16 mm): the base case; 0.508 m = 508 mm, 1.6 MPa = 16 bar.
		name: "ad2000 s from material and units", tool: "pressure.ad2000_cylinder_wall", params: `{"Da": "0.508 m", "p": "1.6 MPa", "material": "P265GH", "S": 1.5, "v": "85 %", "c1": "0.3 mm", "c2": 1}`,
		wantFor: "s", want: 3.991985, unit: "mm", wantText: []string{"K = ReH of P265GH at 20 °C = 265 N/mm²", "v: 85 % = 0.85"},
	},
	{
		// 1.4571 is austenitic: K = Rp1.0 = 260 N/mm². 20·260·0.85/1.5 = 2946.667; + 16 = 2962.667;
		// s = 8128/2962.667 = 2.743474 mm (c1 = c2 = 0).
		name: "ad2000 s austenitic", tool: "pressure.ad2000_cylinder_wall", params: `{"Da": 508, "p": 16, "material": "1.4571", "S": 1.5, "v": 0.85}`,
		wantFor: "s", want: 2.743474, unit: "mm", wantText: []string{"K = Rp1.0 of X6CrNiMoTi17-12-2"},
	},
	// Inverse cases: s = 4 mm, so s0 = s − c1 − c2 = 4 − 1.3 = 2.7 mm and Da − s0 = 505.3 mm.
	{
		// p = 20·K/S·v·s0/(Da − s0) = 3003.333·2.7/505.3 = 8109/505.3 = 16.04789 bar.
		name: "ad2000 p", tool: "pressure.ad2000_cylinder_wall", params: `{"s": 4, "Da": 508, "K": 265, "S": 1.5, "v": 0.85, "c1": 0.3, "c2": 1}`,
		wantFor: "p", want: 16.04789, unit: "bar",
	},
	{
		// Da = s0·(20·K/S·v + p)/p = 2.7·3019.333/16 = 8152.2/16 = 509.5125 mm.
		name: "ad2000 Da", tool: "pressure.ad2000_cylinder_wall", params: `{"s": 4, "p": 16, "K": 265, "S": 1.5, "v": 0.85, "c1": 0.3, "c2": 1}`,
		wantFor: "Da", want: 509.5125, unit: "mm",
	},
	{
		// K = S·p·(Da − s0)/(20·v·s0) = 1.5·16·505.3/(20·0.85·2.7) = 12127.2/45.9 = 264.2092 N/mm².
		name: "ad2000 K", tool: "pressure.ad2000_cylinder_wall", params: `{"s": 4, "Da": 508, "p": 16, "S": 1.5, "v": 0.85, "c1": 0.3, "c2": 1}`,
		wantFor: "K", want: 264.2092, unit: "N/mm²",
	},
	{
		// S = 20·K·v·s0/(p·(Da − s0)) = 20·265·0.85·2.7/(16·505.3) = 12163.5/8084.8 = 1.504490.
		name: "ad2000 S", tool: "pressure.ad2000_cylinder_wall", params: `{"s": 4, "Da": 508, "p": 16, "K": 265, "v": 0.85, "c1": 0.3, "c2": 1}`,
		wantFor: "S", want: 1.504490, unit: "1",
	},
	{
		// v = S·p·(Da − s0)/(20·K·s0) = 1.5·16·505.3/(20·265·2.7) = 12127.2/14310 = 0.8474633.
		name: "ad2000 v", tool: "pressure.ad2000_cylinder_wall", params: `{"s": 4, "Da": 508, "p": 16, "K": 265, "S": 1.5, "c1": 0.3, "c2": 1}`,
		wantFor: "v", want: 0.8474633, unit: "1",
	},
	{
		// 20·265/1.5 = 3533.333; + 400 = 3933.333; s = 100·400/3933.333 = 10.16949 mm;
		// Di = 100 − 20.33898 = 79.66102; Da/Di = 1.255319 > 1.2: warned.
		name: "ad2000 thick wall warns", tool: "pressure.ad2000_cylinder_wall", params: `{"Da": 100, "p": 400, "K": 265, "S": 1.5, "v": 1}`,
		wantFor: "s", want: 10.16949, unit: "mm", wantText: []string{"Da/Di = 1.25532 > 1.2", "B10"},
	},
	{name: "ad2000 v above 1", tool: "pressure.ad2000_cylinder_wall", params: `{"Da": 508, "p": 16, "K": 265, "S": 1.5, "v": 1.2}`, wantErr: "v must be at most 1 (got 1.2)"},
	{name: "ad2000 S below 1", tool: "pressure.ad2000_cylinder_wall", params: `{"Da": 508, "p": 16, "K": 265, "S": 0.9, "v": 1}`, wantErr: "S must be at least 1 (got 0.9)"},
	{name: "ad2000 negative allowance", tool: "pressure.ad2000_cylinder_wall", params: `{"Da": 508, "p": 16, "K": 265, "S": 1.5, "v": 1, "c1": -1}`, wantErr: "c1 must not be negative (got -1 mm)"},
	{name: "ad2000 material and K", tool: "pressure.ad2000_cylinder_wall", params: `{"Da": 508, "p": 16, "K": 265, "material": "P265GH", "S": 1.5, "v": 1}`, wantErr: "give either material or K"},
	{name: "ad2000 unknown material", tool: "pressure.ad2000_cylinder_wall", params: `{"Da": 508, "p": 16, "material": "S235JR", "S": 1.5, "v": 1}`, wantErr: `unknown material "S235JR"; known materials: P235GH (1.0345), P265GH (1.0425)`},
	{name: "ad2000 s within allowances", tool: "pressure.ad2000_cylinder_wall", params: `{"s": 1, "Da": 508, "K": 265, "S": 1.5, "v": 0.85, "c1": 0.3, "c2": 1}`, wantErr: "s (1 mm) must be greater than c1 + c2 (1.3 mm)"},
	{
		// s0 = 2 − 1.3 = 0.7: v = 1.5·16·507.3/(20·265·0.7) = 12175.2/3710 = 3.281725 > 1: no weld can do it.
		name: "ad2000 v would exceed 1", tool: "pressure.ad2000_cylinder_wall", params: `{"s": 2, "Da": 508, "p": 16, "K": 265, "S": 1.5, "c1": 0.3, "c2": 1}`,
		wantErr: "no physical solution for v",
	},

	// ---- pressure.solve_force: F = p·A/10 with p in bar, A in mm², F in N.
	{
		// A = π·d²/4 = π·200²/4 = 10000·π = 31415.93 mm²; F = 10·31415.93/10 = 31415.93 N.
		name: "force F from diameter", tool: "pressure.solve_force", params: `{"p": 10, "d": "200 mm"}`,
		wantFor: "F", want: 31415.93, unit: "N", wantText: []string{"A from d = 200 mm: A = 31415.9 mm²", "1 bar = 0.1 N/mm²"},
	},
	{
		// p = 10·F/A = 10·1000/100 = 100 bar; 1 kN = 1000 N, 1 cm² = 100 mm².
		name: "force p", tool: "pressure.solve_force", params: `{"F": "1 kN", "A": "1 cm²"}`,
		wantFor: "p", want: 100, unit: "bar", wantText: []string{"F: 1 kN = 1000 N", "A: 1 cm² = 100 mm²"},
	},
	{
		// A = 10·F/p = 10·1000/100 = 100 mm²; derived d = √(4·100/π) = √127.324 = 11.28379 mm.
		name: "force A", tool: "pressure.solve_force", params: `{"F": 1000, "p": 100}`,
		wantFor: "A", want: 100, unit: "mm²", wantText: []string{`"d":{"value":11.2838`},
	},
	{name: "force A and d", tool: "pressure.solve_force", params: `{"p": 10, "A": 100, "d": 10}`, wantErr: "A is given twice"},
	{name: "force pressure in newtons", tool: "pressure.solve_force", params: `{"p": "10 N", "A": 100}`, wantErr: `p: "N" is a unit of force`},

	// ---- geometry.solve_circle_area: A = π·r².
	{
		// A = π·0.05² = π·0.0025 = 0.007853982 m².
		name: "circle A from r", tool: "geometry.solve_circle_area", params: `{"r": 0.05}`,
		wantFor: "A", want: 0.007853982, unit: "m²",
	},
	{
		// d = 100 mm = 0.1 m, r = d/2 = 0.05 m: A = 0.007853982 m² as above.
		name: "circle A from d in mm", tool: "geometry.solve_circle_area", params: `{"d": "100 mm"}`,
		wantFor: "A", want: 0.007853982, unit: "m²", wantText: []string{"d: 100 mm = 0.1 m", "r from d = 0.1 m: r = 0.05 m"},
	},
	{
		// r = √(A/π) = √(π/π) = 1 m; derived d = 2 m.
		name: "circle r", tool: "geometry.solve_circle_area", params: `{"A": 3.141592653589793}`,
		wantFor: "r", want: 1, unit: "m", wantText: []string{"r = √(A/π)", `"d":{"value":2,"unit":"m"`},
	},
	{
		// 1 cm² = 1e-4 m²: r = √(1e-4/π) = 0.01/1.7724539 = 0.005641896 m.
		name: "circle r from cm²", tool: "geometry.solve_circle_area", params: `{"A": "1 cm2"}`,
		wantFor: "r", want: 0.005641896, unit: "m", wantText: []string{"A: 1 cm² = 0.0001 m²"},
	},
	{name: "circle both", tool: "geometry.solve_circle_area", params: `{"A": 1, "r": 1}`, wantErr: "over-determined"},
	{name: "circle none", tool: "geometry.solve_circle_area", params: `{}`, wantErr: "under-determined: give all but one of A, r; missing: A, r"},
	{name: "circle zero d", tool: "geometry.solve_circle_area", params: `{"d": 0}`, wantErr: "d must be greater than 0"},

	// ---- geometry.solve_cylinder_volume: V = π·r²·h.
	{
		// r = 0.5 m: V = π·0.25·2 = π/2 = 1.570796 m³ (1570.796 l).
		name: "cylinder V", tool: "geometry.solve_cylinder_volume", params: `{"d": "1 m", "h": "2 m"}`,
		wantFor: "V", want: 1.570796, unit: "m³", wantText: []string{`"V_l":{"value":1570.8`},
	},
	{
		// r = √(V/(π·h)) = √(π/(π·1)) = 1 m.
		name: "cylinder r", tool: "geometry.solve_cylinder_volume", params: `{"V": 3.141592653589793, "h": 1}`,
		wantFor: "r", want: 1, unit: "m",
	},
	{
		// 1000 l = 1 m³: h = V/(π·r²) = 1/(π·0.25) = 4/π = 1.273240 m.
		name: "cylinder h", tool: "geometry.solve_cylinder_volume", params: `{"V": "1000 l", "r": "500 mm"}`,
		wantFor: "h", want: 1.273240, unit: "m", wantText: []string{"V: 1000 l = 1 m³"},
	},

	// ---- geometry.solve_cylinder_surface: A = 2·π·r·(r + h).
	{
		// A = 2·π·0.5·(0.5 + 2) = 2.5·π = 7.853982 m².
		name: "surface A", tool: "geometry.solve_cylinder_surface", params: `{"r": 0.5, "h": 2}`,
		wantFor: "A", want: 7.853982, unit: "m²",
	},
	{
		// h = A/(2·π·r) − r = 2.5·π/π − 0.5 = 2.5 − 0.5 = 2 m.
		name: "surface h", tool: "geometry.solve_cylinder_surface", params: `{"A": 7.853981633974483, "r": 0.5}`,
		wantFor: "h", want: 2, unit: "m",
	},
	{
		// 2·π·r·(r + 2) = 2.5·π ⇒ r² + 2·r − 1.25 = 0 ⇒ r = (−2 + √(4 + 5))/2 = (−2 + 3)/2 = 0.5 m; found numerically.
		name: "surface r numeric", tool: "geometry.solve_cylinder_surface", params: `{"A": 7.853981633974483, "h": 2}`,
		wantFor: "r", want: 0.5, unit: "m", wantText: []string{"solved numerically"},
	},
	{
		// h = 1/(2·π·2) − 2 = 0.0796 − 2 < 0: no cylinder has that surface.
		name: "surface h negative", tool: "geometry.solve_cylinder_surface", params: `{"A": 1, "r": 2}`,
		wantErr: "no physical solution for h with A = 1 m², r = 2 m: h must be greater than 0",
	},

	// ---- geometry.solve_pipe_cross_section: A = π·s·(Da − s).
	{
		// DN 50 pipe 60.3 × 2.9: A = π·2.9·(60.3 − 2.9) = π·2.9·57.4 = π·166.46 = 522.9495 mm²;
		// Di = 60.3 − 5.8 = 54.5 mm; flow area π·54.5²/4 = π·2970.25/4 = 2332.829 mm².
		name: "pipe A", tool: "geometry.solve_pipe_cross_section", params: `{"Da": "6.03 cm", "s": 2.9}`,
		wantFor: "A", want: 522.9495, unit: "mm²", wantText: []string{`"Di":{"value":54.5`, `"A_flow":{"value":2332.83`, "Da: 6.03 cm = 60.3 mm"},
	},
	{
		// s = (Da − √(Da² − 4·A/π))/2 = (60.3 − √(3636.09 − 665.84))/2 = (60.3 − √2970.25)/2 = (60.3 − 54.5)/2 = 2.9 mm.
		name: "pipe s", tool: "geometry.solve_pipe_cross_section", params: `{"Da": 60.3, "A": 522.949513116557}`,
		wantFor: "s", want: 2.9, unit: "mm",
	},
	{
		// Da = A/(π·s) + s = 166.46/2.9 + 2.9 = 57.4 + 2.9 = 60.3 mm.
		name: "pipe Da", tool: "geometry.solve_pipe_cross_section", params: `{"s": 2.9, "A": 522.949513116557}`,
		wantFor: "Da", want: 60.3, unit: "mm",
	},
	{name: "pipe no bore", tool: "geometry.solve_pipe_cross_section", params: `{"Da": 60.3, "s": 40}`, wantErr: "s (40 mm) must be less than half of Da (60.3 mm)"},
	{
		// A full disc of Da = 60.3 mm has π·60.3²/4 = 2855.78 mm² < 3000 mm²: no wall is that big.
		name: "pipe area larger than disc", tool: "geometry.solve_pipe_cross_section", params: `{"Da": 60.3, "A": 3000}`,
		wantErr: "no physical solution for s",
	},

	// ---- materials.allowable_stress: f = K/S.
	{
		// P265GH: K = 265 N/mm²; f = 265/1.5 = 176.6667 N/mm².
		name: "allowable f from material", tool: "materials.allowable_stress", params: `{"material": "p265gh", "S": 1.5}`,
		wantFor: "f", want: 176.6667, unit: "N/mm²", wantText: []string{"K = ReH of P265GH", "20 °C"},
	},
	{
		// K = f·S = 160·1.5 = 240 N/mm².
		name: "allowable K", tool: "materials.allowable_stress", params: `{"f": 160, "S": 1.5}`,
		wantFor: "K", want: 240, unit: "N/mm²",
	},
	{
		// S = K/f = 300/200 = 1.5; 0.3 GPa = 300 N/mm².
		name: "allowable S", tool: "materials.allowable_stress", params: `{"K": "0.3 GPa", "f": 200}`,
		wantFor: "S", want: 1.5, unit: "1",
	},
	{
		// S = K/f = 200/250 = 0.8 < 1: a design stress above the strength value is not safe.
		name: "allowable S below 1", tool: "materials.allowable_stress", params: `{"K": 200, "f": 250}`,
		wantErr: "no physical solution for S",
	},

	// ---- materials.solve_mass: m = ρ·V.
	{
		// P265GH: ρ = 7850 kg/m³; 10 l = 0.01 m³; m = 7850·0.01 = 78.5 kg.
		name: "mass m from material", tool: "materials.solve_mass", params: `{"material": "1.0425", "V": "10 l"}`,
		wantFor: "m", want: 78.5, unit: "kg", wantText: []string{"ρ of P265GH = 7850 kg/m³", "V: 10 l = 0.01 m³"},
	},
	{
		// ρ = m/V = 78.5/0.01 = 7850 kg/m³.
		name: "mass rho", tool: "materials.solve_mass", params: `{"m": 78.5, "V": 0.01}`,
		wantFor: "rho", want: 7850, unit: "kg/m³",
	},
	{
		// 8 g/cm³ = 8000 kg/m³: V = m/ρ = 100/8000 = 0.0125 m³.
		name: "mass V", tool: "materials.solve_mass", params: `{"m": "100 kg", "density": "8 g/cm³"}`,
		wantFor: "V", want: 0.0125, unit: "m³", wantText: []string{"rho: 8 g/cm³ = 8000 kg/m³"},
	},
	{name: "mass material and rho", tool: "materials.solve_mass", params: `{"material": "P265GH", "rho": 7850, "V": 1}`, wantErr: "give either material or rho"},
}

func TestCalculators(t *testing.T) {
	suite := engineering.New(&engineering.Options{Expose: engineering.ExposeFlat})
	for _, tc := range calcCases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := suite.Call(context.Background(), "c1", tc.tool, json.RawMessage(tc.params))
			if tc.wantErr != "" {
				te := requireToolError(t, err, messages.CodeInvalidArguments)
				if !strings.Contains(te.Message, tc.wantErr) {
					t.Fatalf("error %q does not contain %q", te.Message, tc.wantErr)
				}
				if !strings.HasPrefix(te.Message, tc.tool+": ") {
					t.Errorf("error %q does not name the calculator", te.Message)
				}
				return
			}
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			var res engineering.Result
			if err := json.Unmarshal(out, &res); err != nil {
				t.Fatalf("result %s: %v", out, err)
			}
			if res.Tool != tc.tool || res.SolvedFor != tc.wantFor || res.Unit != tc.unit {
				t.Errorf("got tool %q solved_for %q unit %q, want %q %q %q", res.Tool, res.SolvedFor, res.Unit, tc.tool, tc.wantFor, tc.unit)
			}
			if !closeTo(res.Value, tc.want, 1e-5) {
				t.Errorf("value = %v, want %v", res.Value, tc.want)
			}
			if res.Formula == "" || res.Method == "" || len(res.Inputs) == 0 {
				t.Errorf("result lacks formula, method or inputs: %s", out)
			}
			for _, want := range tc.wantText {
				if !strings.Contains(string(out), want) {
					t.Errorf("result does not contain %q:\n%s", want, out)
				}
			}
		})
	}
}

// TestCalculatorsCoverEveryUnknown fails when a calculator or a variable has no table
// case solving for it.
func TestCalculatorsCoverEveryUnknown(t *testing.T) {
	covered := map[string]bool{}
	for _, tc := range calcCases {
		if tc.wantErr == "" {
			covered[tc.tool+"/"+tc.wantFor] = true
		}
	}
	for _, c := range engineering.New(nil).Calculators() {
		for _, v := range c.SolvableFor() {
			if !covered[c.Name+"/"+v] {
				t.Errorf("no test case solves %s for %s", c.Name, v)
			}
		}
	}
}

func TestMaterialsLookup(t *testing.T) {
	suite := engineering.New(&engineering.Options{Expose: engineering.ExposeFlat})
	tests := []struct {
		name    string
		params  string
		want    map[string]float64 // property → value, from the standard
		source  string
		wantErr string
	}{
		// EN 10028-2, t ≤ 16 mm: ReH 265, Rm 410–530 N/mm²; ferritic, so K = ReH.
		{name: "P265GH", params: `{"material": "P265GH"}`, want: map[string]float64{"ReH": 265, "Rm_min": 410, "Rm_max": 530, "density": 7850, "K": 265}, source: "EN 10028-2"},
		{name: "P235GH by number", params: `{"material": "1.0345"}`, want: map[string]float64{"ReH": 235, "Rm_min": 360, "Rm_max": 480, "K": 235}, source: "EN 10028-2"},
		{name: "P295GH", params: `{"material": "P295GH"}`, want: map[string]float64{"ReH": 295, "Rm_min": 460, "Rm_max": 580}, source: "EN 10028-2"},
		{name: "P355GH", params: `{"material": "p355gh"}`, want: map[string]float64{"ReH": 355, "Rm_min": 510, "Rm_max": 650}, source: "EN 10028-2"},
		{name: "16Mo3", params: `{"material": "16Mo3"}`, want: map[string]float64{"ReH": 275, "Rm_min": 440, "Rm_max": 590}, source: "EN 10028-2"},
		// EN 10028-7, plate P: Rp0.2 210, Rp1.0 250, Rm 520–720; austenitic, so K = Rp1.0; ρ 7.9 kg/dm³ (EN 10088-1).
		{name: "1.4301 by name", params: `{"material": "X5CrNi18-10"}`, want: map[string]float64{"ReH": 210, "Rp1_0": 250, "Rm_min": 520, "Rm_max": 720, "density": 7900, "K": 250}, source: "EN 10028-7"},
		{name: "1.4571", params: `{"material": "1.4571"}`, want: map[string]float64{"ReH": 220, "Rp1_0": 260, "Rm_min": 520, "Rm_max": 670, "density": 8000, "K": 260}, source: "EN 10028-7"},
		{name: "unknown material", params: `{"material": "S235JR"}`, wantErr: `unknown material "S235JR"; known materials: P235GH (1.0345), P265GH (1.0425), P295GH (1.0481), P355GH (1.0473), 16Mo3 (1.5415), X5CrNi18-10 (1.4301), X6CrNiMoTi17-12-2 (1.4571)`},
		{name: "missing material", params: `{}`, wantErr: "material is missing; known materials: P235GH"},
		{name: "material not a string", params: `{"material": 265}`, wantErr: "material must be a string"},
		{name: "extra parameter", params: `{"material": "P265GH", "t": 20}`, wantErr: `unknown parameter "t"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := suite.Call(context.Background(), "c1", "materials.lookup", json.RawMessage(tc.params))
			if tc.wantErr != "" {
				te := requireToolError(t, err, messages.CodeInvalidArguments)
				if !strings.Contains(te.Message, tc.wantErr) {
					t.Fatalf("error %q does not contain %q", te.Message, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var res engineering.LookupResult
			if err := json.Unmarshal(out, &res); err != nil {
				t.Fatal(err)
			}
			for prop, want := range tc.want {
				q, ok := res.Properties[prop]
				if !ok || q.Value != want {
					t.Errorf("%s = %+v, want %v", prop, q, want)
				}
			}
			if !strings.Contains(res.Source, tc.source) || !strings.Contains(string(out), "20 °C") {
				t.Errorf("source %q lacks %q or the temperature is not stated", res.Source, tc.source)
			}
		})
	}
}

func requireToolError(t *testing.T, err error, code messages.ErrorCode) *messages.ToolError {
	t.Helper()
	var te *messages.ToolError
	if !errors.As(err, &te) {
		t.Fatalf("error %v (%T) is not a *messages.ToolError", err, err)
	}
	if te.Code != code {
		t.Fatalf("code %s (%s), want %s", te.Code, te.Message, code)
	}
	return te
}

func closeTo(got, want, rel float64) bool {
	return math.Abs(got-want) <= rel*math.Abs(want)
}
