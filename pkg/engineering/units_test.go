package engineering

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestReadQuantity(t *testing.T) {
	tests := []struct {
		name     string
		raw      string
		unit     string
		want     float64
		absent   bool
		wantConv string
		wantErr  string
	}{
		{name: "number in the unit", raw: `10`, unit: "bar", want: 10},
		{name: "bare number string", raw: `"10"`, unit: "bar", want: 10},
		// 1 MPa = 1e6 Pa = 10·1e5 Pa = 10 bar.
		{name: "MPa to bar", raw: `"1 MPa"`, unit: "bar", want: 10, wantConv: "p: 1 MPa = 10 bar (1 MPa = 10 bar)"},
		{name: "mpa lower case", raw: `"1 mpa"`, unit: "bar", want: 10},
		// 1 psi = 4.4482216152605 N / 0.0254² m² = 6894.757293168 Pa = 0.06894757293168 bar.
		{name: "psi to bar", raw: `"1 psi"`, unit: "bar", want: 0.06894757293168361},
		// 1 bar = 1e5 Pa = 0.1·1e6 Pa = 0.1 N/mm².
		{name: "bar to N/mm²", raw: `"10 bar"`, unit: "N/mm²", want: 1},
		{name: "kPa to bar", raw: `"250 kPa"`, unit: "bar", want: 2.5},
		{name: "atm to bar", raw: `"1 atm"`, unit: "bar", want: 1.01325},
		// 1 ksi = 1000 psi = 6.894757 N/mm².
		{name: "ksi to N/mm²", raw: `"1 ksi"`, unit: "N/mm²", want: 6.894757293168361},
		{name: "m to mm", raw: `"0.1 m"`, unit: "mm", want: 100},
		{name: "cm to mm", raw: `"2.5cm"`, unit: "mm", want: 25},
		{name: "µm to mm", raw: `"500 µm"`, unit: "mm", want: 0.5},
		// 1 in = 25.4 mm exactly; 1 ft = 12 in = 304.8 mm.
		{name: "inch to mm", raw: `"2 in"`, unit: "mm", want: 50.8},
		{name: "feet to m", raw: `"10 ft"`, unit: "m", want: 3.048},
		{name: "mm² to m²", raw: `"1e6 mm^2"`, unit: "m²", want: 1},
		{name: "in² to mm²", raw: `"1 in²"`, unit: "mm²", want: 645.16},
		{name: "litres to m³", raw: `"250 L"`, unit: "m³", want: 0.25},
		{name: "g/cm³ to kg/m³", raw: `"7.85 g/cm3"`, unit: "kg/m³", want: 7850},
		// 1 lb = 0.45359237 kg exactly.
		{name: "lb to kg", raw: `"100 lb"`, unit: "kg", want: 45.359237},
		{name: "kN to N", raw: `"2.5 kN"`, unit: "N", want: 2500},
		{name: "percent", raw: `"85 %"`, unit: "1", want: 0.85},
		{name: "bracketed unit", raw: `"10 [bar]"`, unit: "bar", want: 10},
		{name: "exponent", raw: `"1.5e5 Pa"`, unit: "bar", want: 1.5},
		{name: "value object", raw: `{"value": 100, "unit": "kPa"}`, unit: "bar", want: 1},
		{name: "value object string value", raw: `{"value": "100", "unit": "kPa"}`, unit: "bar", want: 1},
		{name: "value object without unit", raw: `{"value": "1 MPa"}`, unit: "bar", want: 10},
		{name: "null", raw: `null`, unit: "bar", absent: true},
		{name: "question mark", raw: `"?"`, unit: "bar", absent: true},
		{name: "empty string", raw: `""`, unit: "bar", absent: true},
		{name: "value object null", raw: `{"value": null, "unit": "bar"}`, unit: "bar", absent: true},
		{name: "wrong dimension", raw: `"10 mm"`, unit: "bar", wantErr: `"mm" is a unit of length, but p is a pressure or stress`},
		{name: "unknown unit lists units", raw: `"10 barg"`, unit: "bar", wantErr: `unknown unit "barg"; p takes a pressure or stress in N/m², Pa, hPa, mbar, kPa, psi`},
		{name: "hex rejected", raw: `"0x10"`, unit: "bar", wantErr: `unknown unit "x10"`},
		{name: "Inf rejected", raw: `"Inf"`, unit: "bar", wantErr: "is not a number"},
		{name: "NaN rejected", raw: `"NaN bar"`, unit: "bar", wantErr: "is not a number"},
		{name: "huge", raw: `"1e400 bar"`, unit: "bar", wantErr: "out of range"},
		{name: "array", raw: `[10]`, unit: "bar", wantErr: "p must be a number in bar"},
		{name: "object with unit and unit in value", raw: `{"value": "1 MPa", "unit": "bar"}`, unit: "bar", wantErr: "p must be a number in bar"},
		{name: "dimensionless usage", raw: `true`, unit: "1", wantErr: "p must be a plain number"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, conv, present, err := readQuantity("p", json.RawMessage(tc.raw), tc.unit)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, %v; want error %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if present == tc.absent {
				t.Fatalf("present = %v, want %v", present, !tc.absent)
			}
			if !tc.absent && !closeRel(got, tc.want, 1e-12) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			if tc.wantConv != "" && conv != tc.wantConv {
				t.Errorf("conversion %q, want %q", conv, tc.wantConv)
			}
		})
	}
}

func TestDecodeParameters(t *testing.T) {
	tests := []struct {
		name        string
		raw         string
		wantKeys    []string
		wantRepairs int
		wantErr     string
	}{
		{name: "object", raw: `{"p": 10, "d": 100}`, wantKeys: []string{"d", "p"}},
		{name: "string holding an object", raw: `"{\"p\": 10, \"d\": 100}"`, wantKeys: []string{"d", "p"}, wantRepairs: 1},
		{name: "string with spaces", raw: `"  {\"p\": 10} "`, wantKeys: []string{"p"}, wantRepairs: 1},
		{name: "null", raw: `null`},
		{name: "empty", raw: ``},
		{name: "array", raw: `[1, 2]`, wantErr: "parameters must be a JSON object"},
		{name: "number", raw: `10`, wantErr: "parameters must be a JSON object"},
		{name: "string not an object", raw: `"p=10"`, wantErr: "parameters were a string that is not a JSON object"},
		{name: "broken object", raw: `{"p": 10,`, wantErr: "parameters are not a valid JSON object"},
		{name: "broken string", raw: `"{\"p\": 10`, wantErr: "parameters"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, repairs, err := decodeParameters(json.RawMessage(tc.raw))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, %v; want error %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if keys := sortedKeys(got); strings.Join(keys, ",") != strings.Join(tc.wantKeys, ",") {
				t.Errorf("keys %v, want %v", keys, tc.wantKeys)
			}
			if len(repairs) != tc.wantRepairs {
				t.Errorf("repairs %v, want %d", repairs, tc.wantRepairs)
			}
		})
	}
}

func TestFormatNumber(t *testing.T) {
	tests := []struct {
		name string
		in   float64
		want string
	}{
		{name: "exact", in: 0.3125, want: "0.3125"},
		{name: "six digits", in: 0.31241868984669136, want: "0.312419"},
		{name: "integer", in: 31415.926535897932, want: "31415.9"},
		{name: "large", in: 1.5e15, want: "1.5e+15"},
		{name: "small", in: 1.23456789e-7, want: "1.23457e-07"},
		{name: "negative", in: -1.920423, want: "-1.92042"},
		{name: "zero", in: 0, want: "0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := formatNumber(tc.in); got != tc.want {
				t.Errorf("formatNumber(%v) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestUnitsOfListsEachSymbolOnce(t *testing.T) {
	got := strings.Join(unitsOf(dimPressure), ", ")
	want := "N/m², Pa, hPa, mbar, kPa, psi, N/cm², bar, atm, MPa, N/mm², ksi, GPa, kN/mm²"
	if got != want {
		t.Errorf("unitsOf(pressure) = %s\nwant %s", got, want)
	}
}

// Decimal commas and thousands separators are read as the engineer who wrote them meant
// them; a comma that could be either is an error that says why.
func TestParseQuantityLocalNumbers(t *testing.T) {
	tests := []struct {
		text    string
		want    float64
		unit    string
		wantErr string
	}{
		{"10,5 bar", 10.5, "bar", ""},
		{"1.234,5 mm", 1234.5, "mm", ""},
		{"1,234.5 mm", 1234.5, "mm", ""},
		{"0,125 m", 0.125, "m", ""},
		{"-2,75", -2.75, "", ""},
		{"1.234.567 Pa", 1234567, "Pa", ""},
		{"1,234,567 Pa", 1234567, "Pa", ""},
		{"10.5 bar", 10.5, "bar", ""},
		{"1,234 mm", 0, "", "decimal comma or a thousands separator"},
		{"12,345", 0, "", "decimal comma or a thousands separator"},
		{"1,2,3 mm", 0, "", "not a number"},
		{"1.23,4 mm", 0, "", "not a number"},
	}
	for _, tt := range tests {
		v, unit, err := parseQuantity(tt.text)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%q: %v, %q, %v; want an error with %q", tt.text, v, unit, err, tt.wantErr)
			}
			continue
		}
		if err != nil || v != tt.want || unit != tt.unit {
			t.Errorf("%q = %v %q, %v; want %v %q", tt.text, v, unit, err, tt.want, tt.unit)
		}
	}
}

// FuzzParseQuantity: any text gives a finite number or an error, never a panic; a
// number without separators reads as strconv does.
func FuzzParseQuantity(f *testing.F) {
	for _, s := range []string{"10,5 bar", "1.234,5 mm", "1,234", "1,234,567 Pa", "0x10", "-,5", "1.2.3,4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		v, _, err := parseQuantity(text)
		if err == nil && (math.IsNaN(v) || math.IsInf(v, 0)) {
			t.Errorf("%q = %v", text, v)
		}
	})
}

// The plain word for a variable is a parameter name: the seed's {"radius": 0.5} and
// {"area": 1} on the circle calculator.
func TestPlainWordParameters(t *testing.T) {
	s := New(&Options{Sessions: NewMemorySessions()})
	ctx := context.Background()
	if _, err := s.Call(ctx, "w", ToolDispatch, json.RawMessage(`{"domain": "geometry", "action": "activate"}`)); err != nil {
		t.Fatal(err)
	}
	// The answer names each input as the caller gave it, with its symbol.
	for _, tt := range []struct{ params, want string }{
		{`{"radius": 0.5}`, `"value":0.785398`},
		{`{"radius": 0.5}`, `"inputs":{"radius":{"value":0.5,"unit":"m","description":"radius (r)"}}`},
		{`{"area": 1}`, `"value":0.56419`},
		{`{"area": 1}`, `"inputs":{"area":{`},
		{`{"r": 0.5}`, `"inputs":{"r":{"value":0.5,"unit":"m","description":"radius"}}`},
		{`{"diameter": "1 m"}`, `"value":0.785398`},
	} {
		out, err := s.Call(ctx, "w", ToolExecute, json.RawMessage(`{"tool_name": "geometry.solve_circle_area", "parameters": `+tt.params+`}`))
		if err != nil || !strings.Contains(string(out), tt.want) {
			t.Errorf("%s: %.300s, %v; want %s", tt.params, out, err, tt.want)
		}
	}
	// The listing names them.
	list, err := s.Call(ctx, "w", ToolDispatch, json.RawMessage(`{"domain": "geometry", "action": "list"}`))
	if err != nil || !strings.Contains(string(list), `also as radius`) || !strings.Contains(string(list), `also as area`) {
		t.Errorf("the listing does not name the plain words: %.500s, %v", list, err)
	}
	for desc, want := range map[string]string{"area of the circle": "area", "wall thickness": "wall_thickness", "height (length)": "height",
		"allowable stress, K/S": "allowable_stress", "σ": "", "2nd moment": ""} {
		if got := wordAlias(desc); got != want {
			t.Errorf("wordAlias(%q) = %q, want %q", desc, got, want)
		}
	}
}
