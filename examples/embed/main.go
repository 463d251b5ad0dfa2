// Command embed is a Go program that embeds toolbus: it adds a Go function of its own as
// a tool and runs the whole pipeline in process, on an embedded NATS server, then asks
// it a model response that calls that tool. It imports only toolbus's public packages
// (pkg/...), as a program outside this repository would.
//
//	go run ./examples/embed
//	go run ./examples/embed -nats nats://127.0.0.1:4222   # an executor offering the tool to a cluster
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math"
	"os"
	"os/signal"
	"time"

	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/reaper"
	"github.com/toolbus/toolbus/pkg/toolbus"
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
	// Tools and stdio servers run under a reaper, which is this binary started again in
	// reaper mode: Main runs it then, and otherwise returns at once.
	reaper.Main(&reaper.Options{Notify: signal.Notify})
	natsURL := flag.String("nats", "", "run as an executor against this NATS cluster instead of the whole pipeline in process")
	configFile := flag.String("config", "", "toolbus configuration file")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	tools := localtools.New()
	err := localtools.AddFunc(tools, messages.ToolInfo{
		Name:        "convert_temperature",
		Description: "Converts a temperature between Celsius, Fahrenheit and Kelvin.",
		ReadOnly:    true, Idempotent: true,
	}, convert)
	if err != nil {
		log.Fatal(err)
	}

	cfg, err := config.Load(*configFile) // "" gives the defaults
	if err != nil {
		log.Fatal(err)
	}
	o := toolbus.Options{Config: cfg, Tools: tools}
	if *natsURL != "" {
		// The cluster's streams and buckets are provisioned already (toolbus provision):
		// an executor on a URL only checks them.
		o.NATSURL, o.Services = *natsURL, []string{toolbus.Executor}
	}
	tb, err := toolbus.Start(ctx, o)
	if err != nil {
		log.Fatal(err)
	}
	defer tb.Close()
	if *natsURL != "" {
		fmt.Println("executor running with convert_temperature; Ctrl-C stops it")
		<-ctx.Done()
		return
	}

	actx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, err := tb.Client().Ask(actx, "embed-demo",
		`Let me convert that. <tool_call>{"name": "convert_temperature", "arguments": {"value": 451, "from": "F"}}</tool_call>`, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(out.Text)
}
