package bench

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolbus"
)

// StreamOptions configures a run of [RunStream]. Zero values take the defaults.
type StreamOptions struct {
	Responses   int           // of each kind, default 20
	Concurrency int           // responses written at once, default 4
	Rate        float64       // tokens per second the model writes, default 50
	Calls       int           // calls per response, default 3
	ToolLatency time.Duration // what each call takes, default 300ms
	InProcess   bool
	Config      *config.Config
	Logger      *slog.Logger
}

// StreamReport is the outcome of a RunStream: the time from the end of a response (its
// last chunk, or the whole response published) to its output, streamed and whole,
// measured alternately in the same run.
type StreamReport struct {
	Responses     int     `json:"responses"`
	Calls         int     `json:"calls_per_response"`
	Concurrency   int     `json:"concurrency"`
	Rate          float64 `json:"tokens_per_sec"`
	Tokens        int     `json:"tokens_per_response"`
	ToolLatencyMS float64 `json:"tool_latency_ms"`
	// WriteSeconds is how long the model takes to write one response at Rate.
	WriteSeconds  float64 `json:"write_seconds"`
	StreamedP50ms float64 `json:"streamed_p50_ms"`
	StreamedP90ms float64 `json:"streamed_p90_ms"`
	StreamedMaxMs float64 `json:"streamed_max_ms"`
	WholeP50ms    float64 `json:"whole_p50_ms"`
	WholeP90ms    float64 `json:"whole_p90_ms"`
	WholeMaxMs    float64 `json:"whole_max_ms"`
	// BusP50ms is the output latency of a response whose calls take no time, sent whole:
	// what the bus and toolbus's stages cost, which a streamed response approaches when
	// its calls finished before the model did.
	BusP50ms float64 `json:"bus_p50_ms"`
	NumCPU   int     `json:"nproc"`
}

func (o *StreamOptions) defaults() {
	if o.Responses <= 0 {
		o.Responses = 20
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	if o.Rate <= 0 {
		o.Rate = 50
	}
	if o.Calls <= 0 {
		o.Calls = 3
	}
	if o.ToolLatency <= 0 {
		o.ToolLatency = 300 * time.Millisecond
	}
	if o.Config == nil {
		o.Config = &config.Config{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// streamText is a response of k calls of the work tool, with a sentence before the
// calls and one after, as models write them.
func streamText(k int) string {
	var b strings.Builder
	b.WriteString("I will look these up at once, one after the other, and then compare them.\n")
	for i := range k {
		fmt.Fprintf(&b, `<tool_call>{"name": %q, "arguments": {"step": %d}}</tool_call>`+"\n", benchWork, i+1)
	}
	b.WriteString("Once the three results are in, I will compare them and summarize the differences for you.")
	return b.String()
}

// RunStream measures what streaming a response buys: responses of o.Calls calls of a
// read-only tool taking o.ToolLatency, written at o.Rate tokens a second, alternately
// streamed (each call runs as soon as its block is complete) and sent whole once
// written. Both count from the end of the response to its output.
func RunStream(ctx context.Context, o StreamOptions) (*StreamReport, error) {
	o.defaults()
	text := streamText(o.Calls)
	tokens := client.SplitTokens(text)
	r := &StreamReport{Responses: o.Responses, Calls: o.Calls, Concurrency: o.Concurrency, Rate: o.Rate, Tokens: len(tokens),
		ToolLatencyMS: float64(o.ToolLatency) / float64(time.Millisecond), WriteSeconds: float64(len(tokens)) / o.Rate, NumCPU: runtime.NumCPU()}

	tb, err := toolbus.Start(ctx, toolbus.Options{Config: o.Config, Logger: o.Logger, Tools: workTool(o.ToolLatency), EmbeddedOverTCP: !o.InProcess, Harden: true,
		Services: []string{toolbus.Parser, toolbus.Executor, toolbus.Formatter}})
	if err != nil {
		return nil, err
	}
	defer tb.Close()
	c := tb.Client()
	// The parser reads a streamed call early only once no </think> can make it
	// reasoning: the model's reasoning is tagged (or it has none).
	sub := client.SubmitOptions{Reasoning: "tagged"}
	check := func(out *messages.Output, err error) error {
		if err != nil {
			return err
		}
		if len(out.Results) != o.Calls {
			return fmt.Errorf("%d results, want %d: %s", len(out.Results), o.Calls, out.Text)
		}
		for _, res := range out.Results {
			if !res.Success {
				return fmt.Errorf("call failed: %+v", res.Error)
			}
		}
		return nil
	}
	streamOne := func(ctx context.Context, conv string) (time.Duration, error) {
		s, err := c.Stream(ctx, conv, &client.StreamOptions{SubmitOptions: sub})
		if err != nil {
			return 0, err
		}
		start := time.Now()
		for i, tok := range tokens {
			if wait := time.Until(start.Add(time.Duration(float64(i) / o.Rate * float64(time.Second)))); wait > 0 {
				time.Sleep(wait)
			}
			if _, err := s.WriteString(tok); err != nil {
				return 0, err
			}
		}
		ended := time.Now()
		out, err := s.Close(ctx)
		return time.Since(ended), check(out, err)
	}
	wholeOne := func(ctx context.Context, conv, text string) (time.Duration, error) {
		started := time.Now()
		out, err := c.Ask(ctx, conv, text, &sub)
		return time.Since(started), check(out, err)
	}
	// The bus alone: the same response, calls that take no time.
	quick := strings.ReplaceAll(text, benchWork, "clock")
	var bus []time.Duration
	for range 20 {
		d, err := wholeOne(ctx, "bench-bus", quick)
		if err != nil {
			return nil, fmt.Errorf("bus: %w", err)
		}
		bus = append(bus, d)
	}
	r.BusP50ms = pct(bus, 50)

	var mu sync.Mutex
	var streamed, whole []time.Duration
	var firstErr error
	var wg sync.WaitGroup
	next := make(chan int)
	for w := range o.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				// A B A B: each worker alternates, so both kinds see the same load.
				conv := fmt.Sprintf("bench-stream-%d-%d", w, i)
				ds, err := streamOne(ctx, conv)
				var dw time.Duration
				if err == nil {
					dw, err = wholeOne(ctx, conv+"-whole", text)
				}
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				streamed, whole = append(streamed, ds), append(whole, dw)
				mu.Unlock()
			}
		}()
	}
	for i := range o.Responses {
		next <- i
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	r.StreamedP50ms, r.StreamedP90ms, r.StreamedMaxMs = pct(streamed, 50), pct(streamed, 90), pct(streamed, 100)
	r.WholeP50ms, r.WholeP90ms, r.WholeMaxMs = pct(whole, 50), pct(whole, 90), pct(whole, 100)
	return r, nil
}
