package localtools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/messages"
)

func ExampleAddFunc() {
	type rectangle struct {
		Width  float64 `json:"width" jsonschema:"in metres"`
		Height float64 `json:"height" jsonschema:"in metres"`
	}
	type area struct {
		SquareMetres float64 `json:"square_metres"`
	}
	reg := localtools.New()
	err := localtools.AddFunc(reg,
		messages.ToolInfo{Name: "rectangle_area", Description: "The area of a rectangle.", ReadOnly: true, Idempotent: true},
		func(ctx context.Context, r rectangle) (area, error) {
			if r.Width < 0 || r.Height < 0 {
				return area{}, messages.Errorf(messages.CodeInvalidArguments, "sides cannot be negative")
			}
			return area{SquareMetres: r.Width * r.Height}, nil
		})
	if err != nil {
		panic(err)
	}

	tool, _ := reg.Lookup("rectangle_area")
	fmt.Println(string(tool.Info.InputSchema))
	fmt.Println(string(tool.Info.OutputSchema))

	out, err := tool.Run(context.Background(), json.RawMessage(`{"width": 3, "height": 2.5}`))
	fmt.Println(string(out), err)
	_, err = tool.Run(context.Background(), json.RawMessage(`{"width": "3"}`))
	fmt.Println(err)
	_, err = tool.Run(context.Background(), json.RawMessage(`{"width": -1, "height": 2}`))
	fmt.Println(err)
	// Output:
	// {"type":"object","properties":{"width":{"type":"number","description":"in metres"},"height":{"type":"number","description":"in metres"}},"required":["width","height"],"additionalProperties":false}
	// {"type":"object","properties":{"square_metres":{"type":"number"}},"required":["square_metres"],"additionalProperties":false}
	// {"square_metres":7.5} <nil>
	// invalid_arguments: invalid arguments for tool "rectangle_area": argument "width": type: 3 has type "string", want "number"
	// invalid_arguments: sides cannot be negative
}

func ExampleConfigure() {
	reg := localtools.New()
	off := false
	err := localtools.Configure(reg, localtools.Config{
		Clock:         &off,
		KnowledgeBase: localtools.KnowledgeBaseConfig{Folder: "testdata/kb"},
		FileWriter:    localtools.FileWriterConfig{Root: "testdata/kb", Enabled: &off},
	}, nil)
	if err != nil {
		panic(err)
	}
	for _, t := range reg.Tools() {
		fmt.Println(t.Name)
	}
	search, _ := reg.Lookup("search_knowledge_base")
	out, _ := search.Run(context.Background(), json.RawMessage(`{"query": "Kesselformel Wandstärke", "limit": 1}`))
	var res struct{ Results []localtools.Hit }
	_ = json.Unmarshal(out, &res)
	fmt.Println(res.Results[0].Path, "-", res.Results[0].Title, "-", strings.Contains(res.Results[0].Snippet, "Kesselformel"))
	// Output:
	// search_knowledge_base
	// kesselformel.md - Die Kesselformel - true
}
