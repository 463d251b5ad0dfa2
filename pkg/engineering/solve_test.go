package engineering

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// TestClosedFormsMatchEquation checks every declared closed form against the formula it
// rearranges, and against the numeric solver: a typo in a rearrangement fails here even
// where no hand-computed case reaches it.
func TestClosedFormsMatchEquation(t *testing.T) {
	for _, c := range DefaultCalculators() {
		if c.Run != nil {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			res, err := c.solve(exampleParams(t, &c), DefaultMaterials())
			if err != nil {
				t.Fatal(err)
			}
			// A consistent set of values: the example's inputs and its unrounded answer.
			values := Values{}
			for name, q := range res.Inputs {
				values[name] = q.Value
			}
			values[res.SolvedFor] = c.Solutions[res.SolvedFor].Solve(values)
			if r := c.Equation(values); math.Abs(r) > 1e-9*scale(values) {
				t.Fatalf("example values do not satisfy the equation: residual %g", r)
			}
			for _, name := range c.SolvableFor() {
				want := values[name]
				others := Values{}
				for k, x := range values {
					if k != name {
						others[k] = x
					}
				}
				v := c.variable(name)
				if s, ok := c.Solutions[name]; ok {
					if got := s.Solve(others); !closeRel(got, want, 1e-9) {
						t.Errorf("closed form %s gives %v, want %v", s.Formula, got, want)
					}
				}
				trial := Values{}
				for k, x := range others {
					trial[k] = x
				}
				got, err := findRoot(func(x float64) float64 { trial[name] = x; return c.Equation(trial) }, v.Min, v.Max)
				if c.Name == "geometry.solve_pipe_cross_section" && name == "s" {
					// s and Da − s both solve the quadratic: the numeric solver must say so
					// rather than pick one; the closed form picks the wall.
					if err == nil || !strings.Contains(err.Error(), "2 positive solutions") {
						t.Errorf("numeric solve for the pipe wall: got %v, %v; want an ambiguity error", got, err)
					}
					continue
				}
				if err != nil || !closeRel(got, want, 1e-9) {
					t.Errorf("numeric solve for %s gives %v, %v; want %v", name, got, err, want)
				}
			}
		})
	}
}

func exampleParams(t *testing.T, c *Calculator) map[string]json.RawMessage {
	t.Helper()
	params, _, err := decodeParameters(mustJSON(c.Example))
	if err != nil {
		t.Fatal(err)
	}
	return params
}

func scale(v Values) float64 {
	m := 1.0
	for _, x := range v {
		m = math.Max(m, math.Abs(x))
	}
	return m
}

func closeRel(got, want, rel float64) bool {
	return math.Abs(got-want) <= rel*math.Max(math.Abs(want), 1e-300)
}

func TestFindRoot(t *testing.T) {
	tests := []struct {
		name    string
		f       func(float64) float64
		lo, hi  float64
		want    float64
		wantErr string
	}{
		// x² = 2 ⇒ x = √2 = 1.41421356...
		{name: "sqrt 2", f: func(x float64) float64 { return x*x - 2 }, want: math.Sqrt2},
		// 1e-20·x = 1e-25 ⇒ x = 1e-5: tiny coefficients still bracket.
		{name: "tiny scale", f: func(x float64) float64 { return 1e-20*x - 1e-25 }, want: 1e-5},
		// x = 1e25: far from 1.
		{name: "large root", f: func(x float64) float64 { return x - 1e25 }, want: 1e25},
		// Exactly on a grid point (the lower bound 1e-30 times 10^31 = 10).
		{name: "root on grid point", f: func(x float64) float64 { return x - 10 }, want: 10},
		{name: "no positive root", f: func(x float64) float64 { return x + 1 }, wantErr: "no positive solution"},
		// (x − 1)·(x − 4) has two positive roots.
		{name: "two roots", f: func(x float64) float64 { return (x - 1) * (x - 4) }, wantErr: "2 positive solutions (1, 4)"},
		// Bounded to [2, 10], only x = 4 is left.
		{name: "bounds pick one", f: func(x float64) float64 { return (x - 1) * (x - 4) }, lo: 2, hi: 10, want: 4},
		// The root 0.5 lies above hi = 0.4.
		{name: "root beyond max", f: func(x float64) float64 { return x - 0.5 }, hi: 0.4, wantErr: "no positive solution"},
		{name: "NaN everywhere", f: func(float64) float64 { return math.NaN() }, wantErr: "no positive solution"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := findRoot(tc.f, tc.lo, tc.hi)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, %v; want error %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || !closeRel(got, tc.want, 1e-11) {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestCalculatorValidate(t *testing.T) {
	good := func() Calculator { return kesselformel() }
	tests := []struct {
		name    string
		mutate  func(*Calculator)
		wantErr string
	}{
		{name: "valid", mutate: func(*Calculator) {}},
		{name: "no domain", mutate: func(c *Calculator) { c.Name = "kessel" }, wantErr: "name must be <domain>.<tool>"},
		{name: "unknown unit", mutate: func(c *Calculator) { c.Vars[0].Unit = "furlong" }, wantErr: `unknown unit "furlong"`},
		{name: "duplicate name", mutate: func(c *Calculator) { c.Vars[1].Aliases = []string{"d"} }, wantErr: `parameter name "d" used twice`},
		{name: "solution for unknown var", mutate: func(c *Calculator) { c.Solutions["x"] = Solution{} }, wantErr: `solution for "x"`},
		{name: "no equation", mutate: func(c *Calculator) { c.Equation = nil }, wantErr: "needs Formula, Equation"},
		{name: "run and vars", mutate: func(c *Calculator) { c.Run = materialLookup().Run }, wantErr: "Run and Vars exclude each other"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := good()
			tc.mutate(&c)
			err := c.validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestNewPanicsOnBrokenExample(t *testing.T) {
	c := kesselformel()
	c.Example = map[string]any{"p": 10}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "example of pressure.solve_kesselformel fails") {
			t.Fatalf("recover() = %v", r)
		}
	}()
	New(&Options{Calculators: []Calculator{c}})
}
