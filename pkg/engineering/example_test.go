package engineering_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/toolbus/toolbus/pkg/engineering"
)

// The handshake a model goes through: activate the domain, then run a calculator.
func ExampleSuite_Call() {
	suite := engineering.New(nil)
	ctx := context.Background()

	_, err := suite.Call(ctx, "conv-1", "execute_tool",
		json.RawMessage(`{"tool_name": "pressure.solve_kesselformel", "parameters": {"p": 10, "d": 100, "sigma": 160}}`))
	fmt.Println(err)

	if _, err := suite.Call(ctx, "conv-1", "dispatch_engineering", json.RawMessage(`{"domain": "pressure", "action": "activate"}`)); err != nil {
		panic(err)
	}
	out, err := suite.Call(ctx, "conv-1", "execute_tool",
		json.RawMessage(`{"tool_name": "pressure.solve_kesselformel", "parameters": {"p": 10, "d": 100, "sigma": 160}}`))
	if err != nil {
		panic(err)
	}
	var res engineering.Result
	if err := json.Unmarshal(out, &res); err != nil {
		panic(err)
	}
	fmt.Println(res.Answer)
	fmt.Println(res.Method)
	fmt.Println(res.Conversions[0])
	// Output:
	// domain_not_active: pressure.solve_kesselformel belongs to the domain "pressure", which is not active in this conversation. Call dispatch_engineering with {"domain": "pressure", "action": "activate"} first, then repeat this execute_tool call.
	// s = 0.3125 mm
	// s = p·d/(20·σ)
	// 1 bar = 0.1 N/mm², so with p in bar the formula reads σ = p·d/(20·s)
}

// Adding a calculator: one declaration. σ has a closed form; F and A have none
// declared, so they are solved numerically from the Equation.
func Example_addCalculator() {
	tensile := engineering.Calculator{
		Name:        "mechanics.solve_tensile_stress",
		Description: "Tensile stress in a bar: σ = F/A.",
		Formula:     "σ = F/A",
		Vars: []engineering.Var{
			{Name: "sigma", Symbol: "σ", Description: "tensile stress", Unit: "N/mm²"},
			{Name: "F", Description: "tensile force", Unit: "N"},
			{Name: "A", Description: "cross-section", Unit: "mm²"},
		},
		Equation: func(v engineering.Values) float64 { return v["sigma"] - v["F"]/v["A"] },
		Solutions: map[string]engineering.Solution{
			"sigma": {Formula: "σ = F/A", Solve: func(v engineering.Values) float64 { return v["F"] / v["A"] }},
		},
		Example: map[string]any{"F": "10 kN", "A": 100},
	}
	suite := engineering.New(&engineering.Options{
		Calculators: append(engineering.DefaultCalculators(), tensile),
		Expose:      engineering.ExposeFlat,
	})

	for _, params := range []string{`{"F": "10 kN", "A": 100}`, `{"sigma": "100 MPa", "F": 10000}`} {
		out, err := suite.Call(context.Background(), "conv-1", "mechanics.solve_tensile_stress", json.RawMessage(params))
		if err != nil {
			panic(err)
		}
		var res engineering.Result
		if err := json.Unmarshal(out, &res); err != nil {
			panic(err)
		}
		fmt.Println(res.Answer, "|", res.Method)
	}
	// Output:
	// sigma = 100 N/mm² | σ = F/A
	// A = 100 mm² | A solved numerically from σ = F/A (bracketing root finder, relative precision 1e-12)
}

func ExampleClock() {
	fmt.Println(string(engineering.Clock(time.Date(2025, 1, 13, 7, 30, 15, 0, time.UTC))))
	// Output:
	// {"utc":"2025-01-13T07:30:15Z","unix":1736753415,"date":"2025-01-13","time":"07:30:15","weekday":"Monday","iso_week":"2025-W03","day_of_year":13}
}
