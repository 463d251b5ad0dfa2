// Command embed shows a Go program adding its own tool to a local tools registry beside
// the built-in ones and a tools folder, then calling them as the executor does. A
// program that embeds toolbus hands the same registry to toolbus.Start (pkg/toolbus;
// examples/embed runs it so), where the tools join the catalog.
//
//	go run ./examples/local-tools/embed
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"math"

	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/messages"
)

type temperature struct {
	Value float64 `json:"value" jsonschema:"the temperature to convert"`
	From  string  `json:"from" jsonschema:"C, F or K"`
}

type converted struct {
	Celsius    float64 `json:"celsius"`
	Fahrenheit float64 `json:"fahrenheit"`
	Kelvin     float64 `json:"kelvin"`
}

func convert(_ context.Context, in temperature) (converted, error) {
	var c float64
	switch in.From {
	case "C":
		c = in.Value
	case "F":
		c = (in.Value - 32) * 5 / 9
	case "K":
		c = in.Value - 273.15
	default:
		return converted{}, messages.Errorf(messages.CodeInvalidArguments, `from must be "C", "F" or "K", not %q`, in.From)
	}
	round := func(x float64) float64 { return math.Round(x*100) / 100 }
	return converted{Celsius: round(c), Fahrenheit: round(c*9/5 + 32), Kelvin: round(c + 273.15)}, nil
}

func main() {
	dir := flag.String("dir", "examples/local-tools", "the folder holding tools/ and knowledge/")
	flag.Parse()
	ctx := context.Background()

	reg := localtools.New()
	err := localtools.AddFunc(reg, messages.ToolInfo{
		Name:        "convert_temperature",
		Description: "Converts a temperature between Celsius, Fahrenheit and Kelvin.",
		ReadOnly:    true, Idempotent: true,
	}, convert)
	if err != nil {
		log.Fatal(err)
	}
	err = localtools.Configure(reg, localtools.Config{
		Tools:         localtools.ToolsConfig{Folder: "tools", Env: []string{"PATH"}},
		KnowledgeBase: localtools.KnowledgeBaseConfig{Folder: "knowledge"},
	}, &localtools.Options{BaseDir: *dir})
	if err != nil {
		log.Fatal(err)
	}

	for _, t := range reg.Tools() {
		fmt.Printf("%-22s %s\n", t.Name, t.Description)
	}
	for _, c := range []struct{ tool, args string }{
		{"convert_temperature", `{"value": 451, "from": "F"}`},
		{"convert_temperature", `{"value": 20, "from": "X"}`},
		{"convert_temperature", `{"value": "warm"}`},
		{"search_knowledge_base", `{"query": "express delivery", "limit": 1}`},
		{"system_info", `{}`},
	} {
		tool, ok := reg.Lookup(c.tool)
		if !ok {
			fmt.Printf("\n%s: not available\n", c.tool)
			continue
		}
		out, err := tool.Run(ctx, json.RawMessage(c.args))
		fmt.Printf("\n%s %s\n", c.tool, c.args)
		if err != nil {
			fmt.Println("  error:", err)
			continue
		}
		fmt.Println(" ", string(out))
	}
}
