package toolbus_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolbus"
)

// BenchmarkStreamWide: the cost per call of a response of 64 (and 16) read-only calls of an
// in-process tool, through the parser, executor and formatter on one embedded NATS,
// four responses in flight: sent whole (one message); streamed, a write per call as a
// model writing faster than the bus takes chunks would (client.Stream sends what is
// written while a chunk is on its way as the next chunk); and chunked, a chunk per call
// (each write flushed), the pipeline's cost per chunk. chunks/response counts the
// chunks the parser read. ns/call is the elapsed time over the calls answered, cpu-ns/call
// the CPU time of the process (the stages and the NATS server) over them, sent/call the
// messages the stages sent (publishes, key-value requests, acks) over them; the issue's
// bound is streamed within 1.5× of whole.
//
// A state rewritten whole on every chunk and result costs more per call the wider the
// response; one updated by delta the same at 16 and 64.
//
//	go test -run '^$' -bench StreamWide -benchtime 20x -count 3 ./pkg/toolbus/
func BenchmarkStreamWide(b *testing.B) {
	cfg, err := config.Parse([]byte(`{"engineering": {"enabled": false}, "parser": {"reasoning": "tagged"}}`),
		"bench.json", func(string) (string, bool) { return "", false })
	if err != nil {
		b.Fatal(err)
	}
	reg := localtools.New()
	type in struct {
		Text string `json:"text"`
	}
	if err := localtools.AddFunc(reg, messages.ToolInfo{Name: "wide_read", Description: "reads", ReadOnly: true},
		func(_ context.Context, a in) (map[string]string, error) {
			return map[string]string{"read": a.Text}, nil
		}); err != nil {
		b.Fatal(err)
	}
	url := bustest.Server(b)
	nc, _ := bustest.Connect(b, url, nats.Name("node"))
	ctx, cancel := context.WithCancel(context.Background())
	tb, err := toolbus.Start(ctx, toolbus.Options{Provision: true, Conn: nc, Config: cfg, Tools: reg,
		Services: []string{toolbus.Parser, toolbus.Executor, toolbus.Formatter}})
	if err != nil {
		cancel()
		b.Fatal(err)
	}
	defer func() { cancel(); _ = tb.Wait() }()
	oc, _ := bustest.Connect(b, url, nats.Name("orchestrator"))
	c, err := client.New(oc)
	if err != nil {
		b.Fatal(err)
	}
	for _, width := range []int{64, 16} {
		benchStreamWide(b, ctx, nc, c, width)
	}
}

func benchStreamWide(b *testing.B, ctx context.Context, nc *nats.Conn, c *client.Client, width int) {
	calls := make([]string, width)
	for i := range calls {
		calls[i] = fmt.Sprintf(`<tool_call>{"name": "wide_read", "arguments": {"text": "%d"}}</tool_call>`+"\n", i)
	}
	whole := strings.Join(calls, "")
	var chunks atomic.Int64 // the chunks of the responses streamed
	check := func(out *messages.Output, err error) error {
		if err != nil {
			return err
		}
		if len(out.Results) != width {
			return fmt.Errorf("%d results, want %d", len(out.Results), width)
		}
		for i, r := range out.Results {
			if !r.Success {
				return fmt.Errorf("result %d: %+v", i, r.Error)
			}
		}
		return nil
	}
	send := map[string]func(ctx context.Context, conv string) error{
		"whole": func(ctx context.Context, conv string) error {
			return check(c.Ask(ctx, conv, whole, nil))
		},
		"streamed": func(ctx context.Context, conv string) error {
			s, err := c.Stream(ctx, conv, nil)
			if err != nil {
				return err
			}
			for _, call := range calls {
				if _, err := s.WriteString(call); err != nil {
					return err
				}
			}
			defer func() { chunks.Add(int64(s.Chunks())) }()
			return check(s.Close(ctx))
		},
		"chunked": func(ctx context.Context, conv string) error {
			s, err := c.Stream(ctx, conv, nil)
			if err != nil {
				return err
			}
			for _, call := range calls {
				if _, err := s.WriteString(call); err != nil {
					return err
				}
				if err := s.Flush(ctx); err != nil {
					return err
				}
			}
			defer func() { chunks.Add(int64(s.Chunks())) }()
			return check(s.Close(ctx))
		},
	}
	for _, name := range []string{"whole", "streamed", "chunked"} {
		b.Run(fmt.Sprintf("%s/%d", name, width), func(b *testing.B) {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
			defer cancel()
			if err := send[name](ctx, fmt.Sprintf("warm-%s-%d", name, width)); err != nil {
				b.Fatalf("warm-up: %v", err)
			}
			const inFlight = 4
			var next atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, inFlight)
			b.ResetTimer()
			chunks.Store(0)
			cpu0, sent0 := cpuTime(b), nc.Stats().OutMsgs
			start := time.Now()
			for w := range inFlight {
				wg.Go(func() {
					conv := fmt.Sprintf("%s-%d-%d", name, width, w)
					for next.Add(1) <= int64(b.N) {
						if err := send[name](ctx, conv); err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			cpu, sent := cpuTime(b)-cpu0, nc.Stats().OutMsgs-sent0
			b.StopTimer()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			b.ReportMetric(float64(elapsed.Nanoseconds())/float64(b.N*width), "ns/call")
			b.ReportMetric(float64(b.N*width)/elapsed.Seconds(), "calls/s")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*width), "cpu-ns/call")
			b.ReportMetric(float64(sent)/float64(b.N*width), "sent/call")
			if name != "whole" {
				b.ReportMetric(float64(chunks.Load())/float64(b.N), "chunks/response")
			}
		})
	}
}

// cpuTime is the CPU time this process (every stage and the embedded NATS server) has
// used so far, user and system.
func cpuTime(b *testing.B) time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		b.Fatal(err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
