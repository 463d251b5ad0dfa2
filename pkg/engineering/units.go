package engineering

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// dimension is the physical quantity a unit measures. Units of one dimension convert
// into each other by a factor.
type dimension string

const (
	dimLength        dimension = "length"
	dimArea          dimension = "area"
	dimVolume        dimension = "volume"
	dimPressure      dimension = "pressure or stress"
	dimForce         dimension = "force"
	dimMass          dimension = "mass"
	dimDensity       dimension = "density"
	dimDimensionless dimension = "dimensionless number"
)

// unit is one accepted unit: its dimension, its size in the SI unit of the dimension
// (m, m², m³, Pa, N, kg, kg/m³, 1) and the symbol results show.
type unit struct {
	dim    dimension
	si     float64
	symbol string
}

// Exact definitions: 1 in = 25.4 mm, 1 lb = 0.45359237 kg, 1 lbf = 4.4482216152605 N,
// so 1 psi = 4.4482216152605 N / (25.4 mm)² = 6894.757293168361 Pa.
const (
	inch = 0.0254
	foot = 0.3048
	psi  = 4.4482216152605 / (inch * inch)
)

// units maps every accepted spelling (after normalizeUnit) to its unit. Spellings are
// compared case-insensitively: "MPa" and "mpa" both mean megapascal, since no unit here
// (milli-pascal, megametre) is one an engineer means by the other case.
var units = func() map[string]unit {
	m := map[string]unit{}
	add := func(dim dimension, si float64, symbol string, spellings ...string) {
		u := unit{dim: dim, si: si, symbol: symbol}
		for _, s := range append([]string{symbol}, spellings...) {
			if old, ok := m[normalizeUnit(s)]; ok && old != u {
				panic(fmt.Sprintf("engineering: unit spelling %q means both %s and %s", s, old.symbol, symbol))
			}
			m[normalizeUnit(s)] = u
		}
	}
	add(dimLength, 1, "m", "meter", "metre", "meters", "metres")
	add(dimLength, 1e-1, "dm")
	add(dimLength, 1e-2, "cm")
	add(dimLength, 1e-3, "mm", "millimeter", "millimetre", "millimeters", "millimetres")
	add(dimLength, 1e-6, "µm", "um", "micron")
	add(dimLength, 1e3, "km")
	add(dimLength, inch, "in", "inch", "inches", `"`)
	add(dimLength, foot, "ft", "foot", "feet")

	add(dimArea, 1, "m²", "sqm")
	add(dimArea, 1e-2, "dm²")
	add(dimArea, 1e-4, "cm²")
	add(dimArea, 1e-6, "mm²")
	add(dimArea, inch*inch, "in²", "sqin")
	add(dimArea, foot*foot, "ft²", "sqft")

	add(dimVolume, 1, "m³")
	add(dimVolume, 1e-3, "l", "L", "liter", "litre", "liters", "litres")
	add(dimVolume, 1e-3, "dm³")
	add(dimVolume, 1e-6, "ml", "mL")
	add(dimVolume, 1e-6, "cm³", "ccm")
	add(dimVolume, 1e-9, "mm³")
	add(dimVolume, inch*inch*inch, "in³")
	add(dimVolume, foot*foot*foot, "ft³")

	add(dimPressure, 1, "Pa")
	add(dimPressure, 1, "N/m²")
	add(dimPressure, 1e3, "kPa")
	add(dimPressure, 1e6, "MPa")
	add(dimPressure, 1e6, "N/mm²")
	add(dimPressure, 1e9, "GPa")
	add(dimPressure, 1e9, "kN/mm²")
	add(dimPressure, 1e5, "bar")
	add(dimPressure, 1e2, "mbar")
	add(dimPressure, 1e2, "hPa")
	add(dimPressure, 1e4, "N/cm²")
	add(dimPressure, psi, "psi", "lbf/in²")
	add(dimPressure, 1e3*psi, "ksi")
	add(dimPressure, 101325, "atm")

	add(dimForce, 1, "N", "newton")
	add(dimForce, 1e3, "kN")
	add(dimForce, 1e6, "MN")
	add(dimForce, 4.4482216152605, "lbf")

	add(dimMass, 1, "kg")
	add(dimMass, 1e-3, "g")
	add(dimMass, 1e3, "t", "tonne")
	add(dimMass, 0.45359237, "lb", "lbs")

	add(dimDensity, 1, "kg/m³")
	add(dimDensity, 1e3, "g/cm³", "g/ml")
	add(dimDensity, 1e3, "kg/dm³", "kg/l")
	add(dimDensity, 1e3, "t/m³")

	add(dimDimensionless, 1, "1", "-")
	add(dimDimensionless, 1e-2, "%")
	return m
}()

var unitSpellings = strings.NewReplacer("²", "2", "³", "3", "^", "", "μ", "u", "µ", "u", " ", "", "\t", "")

// normalizeUnit folds the spellings of one unit together: superscripts and ^ to digits,
// micro signs to u, no spaces, lower case.
func normalizeUnit(s string) string {
	s = unitSpellings.Replace(s)
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	return strings.ToLower(s)
}

// lookupUnit returns the unit a symbol names.
func lookupUnit(symbol string) (unit, bool) {
	u, ok := units[normalizeUnit(symbol)]
	return u, ok
}

// unitsOf lists the symbols accepted for dim, for error messages.
func unitsOf(dim dimension) []string {
	seen := map[string]bool{}
	var out []string
	for _, u := range units {
		if u.dim == dim && !seen[u.symbol] {
			seen[u.symbol] = true
			out = append(out, u.symbol)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := units[normalizeUnit(out[i])], units[normalizeUnit(out[j])]
		if a.si != b.si {
			return a.si < b.si
		}
		return out[i] < out[j]
	})
	return out
}

// quantityPattern is a decimal number (no hex, no Inf, no NaN) optionally followed by a
// unit.
var quantityPattern = regexp.MustCompile(`^\s*([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)\s*(.*?)\s*$`)

// numberWithSeparators is the number at the start of a quantity written with decimal
// commas or thousands separators, as German (and English) engineers write them.
var numberWithSeparators = regexp.MustCompile(`^(\s*[+-]?)([0-9][0-9.,]*[0-9]|[0-9])(.*)$`)

// localNumber rewrites the number of a quantity written with a decimal comma or with
// thousands separators into Go's syntax: "10,5 bar" → "10.5 bar", "1.234,5 mm" →
// "1234.5 mm", "1,234.5 mm" → "1234.5 mm", "1.234.567 Pa" → "1234567 Pa". "1,234" alone
// could be either and is an error that says so.
func localNumber(text string) (string, error) {
	m := numberWithSeparators.FindStringSubmatch(text)
	if m == nil || !strings.ContainsAny(m[2], ",") && strings.Count(m[2], ".") < 2 {
		return text, nil // no comma and at most one point: Go's syntax already
	}
	sign, num, rest := m[1], m[2], m[3]
	grouped := func(s, sep string) bool { // "1.234.567": groups of three after the first
		parts := strings.Split(s, sep)
		if len(parts[0]) == 0 || len(parts[0]) > 3 {
			return false
		}
		for _, p := range parts[1:] {
			if len(p) != 3 {
				return false
			}
		}
		return true
	}
	lastComma, lastPoint := strings.LastIndex(num, ","), strings.LastIndex(num, ".")
	ambiguous := fmt.Errorf("%q: is the comma a decimal comma or a thousands separator? Write the number with a point for decimals and no separators (1.234 or 1234)", strings.TrimSpace(text))
	switch {
	case lastComma >= 0 && lastPoint >= 0 && lastComma > lastPoint && grouped(num[:lastComma], "."): // 1.234,5
		num = strings.ReplaceAll(num[:lastComma], ".", "") + "." + num[lastComma+1:]
	case lastComma >= 0 && lastPoint >= 0 && lastPoint > lastComma && grouped(num[:lastPoint], ","): // 1,234.5
		num = strings.ReplaceAll(num[:lastPoint], ",", "") + num[lastPoint:]
	case lastPoint < 0 && strings.Count(num, ",") == 1: // 10,5 / 0,125 / 1,234?
		intPart, frac := num[:lastComma], num[lastComma+1:]
		if len(frac) == 3 && intPart != "0" && grouped(num, ",") {
			return "", ambiguous
		}
		num = intPart + "." + frac
	case lastPoint < 0 && grouped(num, ","): // 1,234,567
		num = strings.ReplaceAll(num, ",", "")
	case lastComma < 0 && grouped(num, "."): // 1.234.567
		num = strings.ReplaceAll(num, ".", "")
	default:
		return "", fmt.Errorf("%q is not a number with an optional unit (like \"10 bar\" or \"10,5 bar\")", strings.TrimSpace(text))
	}
	return sign + num + rest, nil
}

// parseQuantity splits "10 bar" into 10 and "bar" (decimal commas and thousands
// separators read as [localNumber] does). The unit is "" when the text is a bare number.
func parseQuantity(text string) (float64, string, error) {
	text, err := localNumber(text)
	if err != nil {
		return 0, "", err
	}
	m := quantityPattern.FindStringSubmatch(text)
	if m == nil {
		return 0, "", fmt.Errorf("%q is not a number with an optional unit (like \"10 bar\")", text)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil || math.IsInf(v, 0) {
		return 0, "", fmt.Errorf("%q is out of range", m[1])
	}
	return v, m[2], nil
}

// convert converts v from unit from to unit to, which must have the same dimension.
func convert(v float64, from, to unit) float64 {
	if from.si == to.si {
		return v
	}
	return v * (from.si / to.si)
}

// conversionNote says how a value given in one unit was converted, for the result.
func conversionNote(name string, v float64, from, to unit) string {
	return fmt.Sprintf("%s: %s %s = %s %s (1 %s = %s %s)", name,
		formatNumber(v), from.symbol, formatNumber(convert(v, from, to)), to.symbol,
		from.symbol, formatNumber(from.si/to.si), to.symbol)
}

// round rounds v to 6 significant digits, the precision results report.
func round(v float64) float64 {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 6, 64), 64)
	return r
}

// formatNumber writes v rounded to 6 significant digits, in plain notation where that
// stays short.
func formatNumber(v float64) string {
	r := round(v)
	if a := math.Abs(r); a == 0 || (a >= 1e-4 && a < 1e12) {
		return strconv.FormatFloat(r, 'f', -1, 64)
	}
	return strconv.FormatFloat(r, 'g', -1, 64)
}
