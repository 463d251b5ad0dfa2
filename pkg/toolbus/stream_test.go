package toolbus_test

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/toolbus/toolbus/internal/testbin"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolbus"
)

// journal is the tools of the stream tests: note_read (read-only) answers its argument;
// note_write appends its argument to its conversation's journal and answers the journal
// so far, so that an output shows the order the writes ran in; slow_read takes 300 ms.
type journal struct {
	mu      sync.Mutex
	entries map[string][]string // conversation → writes in the order they ran
	runs    map[string]int      // "conversation/text" → runs
	started map[string]time.Time
}

func journalTools(t *testing.T, j *journal) *localtools.Registry {
	j.entries, j.runs, j.started = map[string][]string{}, map[string]int{}, map[string]time.Time{}
	reg := localtools.New()
	type in struct {
		Conv string `json:"conv"`
		Text string `json:"text"`
	}
	for _, err := range []error{
		localtools.AddFunc(reg, messages.ToolInfo{Name: "note_read", Description: "reads", ReadOnly: true}, func(_ context.Context, a in) (map[string]string, error) {
			return map[string]string{"read": a.Text}, nil
		}),
		localtools.AddFunc(reg, messages.ToolInfo{Name: "slow_read", Description: "reads slowly", ReadOnly: true}, func(_ context.Context, a in) (map[string]string, error) {
			j.mu.Lock()
			j.started[a.Conv+"/"+a.Text] = time.Now()
			j.mu.Unlock()
			time.Sleep(300 * time.Millisecond)
			return map[string]string{"read": a.Text}, nil
		}),
		localtools.AddFunc(reg, messages.ToolInfo{Name: "note_write", Description: "writes"}, func(_ context.Context, a in) (map[string]any, error) {
			j.mu.Lock()
			defer j.mu.Unlock()
			j.entries[a.Conv] = append(j.entries[a.Conv], a.Text)
			j.runs[a.Conv+"/"+a.Text]++
			return map[string]any{"journal": append([]string(nil), j.entries[a.Conv]...)}, nil
		}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return reg
}

// stream sends text to the pipeline in the chunks cuts make (each flushed: a chunk of
// its own), and returns the output.
func stream(ctx context.Context, t *testing.T, c *client.Client, conversation, text string, cuts []int, o *client.StreamOptions) *messages.Output {
	t.Helper()
	s, err := c.Stream(ctx, conversation, o)
	if err != nil {
		t.Fatal(err)
	}
	prev := 0
	for _, cut := range cuts {
		if _, err := s.WriteString(text[prev:cut]); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		prev = cut
	}
	if _, err := s.WriteString(text[prev:]); err != nil {
		t.Fatal(err)
	}
	out, err := s.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// streamResponses are representative responses: reads, writes that depend on each
// other, both mixed, a call cut off at the end, text without calls.
func streamResponses(conv string) []string {
	call := func(tool, text string) string {
		return fmt.Sprintf(`<tool_call>{"name": %q, "arguments": {"conv": %q, "text": %q}}</tool_call>`, tool, conv, text)
	}
	return []string{
		"Reading.\n" + call("note_read", "a") + "\n" + call("note_read", "b") + "\nDone.",
		call("note_write", "1") + call("note_read", "x") + call("note_write", "2") + call("note_write", "3"),
		"Thinking aloud. " + call("note_write", "w") + " and then " + call("note_read", "r") + `<tool_call>{"name": "note_write", "arguments": {"conv": "` + conv + `", "text": "cut`,
		"No tools needed: the answer is 42.",
	}
}

// A response streamed in chunks split at every position gives the output the whole
// response gives, each write running once and in the order written.
func TestStreamSplitsGiveTheWholeOutput(t *testing.T) {
	t.Parallel() // waits mostly (processes starting, acks timing out): beside another test
	var j journal
	p := startMCPPipeline(t, mcpConfig(t, `{"engineering": {"enabled": false}, "parser": {"reasoning": "tagged"}}`), journalTools(t, &j))
	// A bound on a hang, not a speed: about 600 streamed responses, which took over 4
	// minutes beside a second suite.
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	for ri := range streamResponses("") {
		wholeConv := fmt.Sprintf("whole-%02d", ri)
		whole, err := p.client.Ask(ctx, wholeConv, streamResponses(wholeConv)[ri], nil)
		if err != nil {
			t.Fatal(err)
		}
		// Conversation names of one width, so that every response's text has one length.
		name := func(ci int) string { return fmt.Sprintf("s%d-%04d", ri, ci) }
		n := len(streamResponses(name(0))[ri])
		var wg sync.WaitGroup
		sem := make(chan struct{}, 16)
		splits := 0
		// Two chunks cut at every position, and the response in chunks of 1 to 9 bytes.
		var chunkings [][]int
		for cut := 0; cut <= n; cut++ {
			chunkings = append(chunkings, []int{cut})
		}
		for size := 1; size <= 9; size++ {
			chunkings = append(chunkings, every(n, size))
		}
		for ci, cuts := range chunkings {
			splits++
			conv := name(ci)
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				text := streamResponses(conv)[ri]
				out := stream(ctx, t, p.client, conv, text, cuts, nil)
				if got, want := strings.ReplaceAll(out.Text, conv, "C"), strings.ReplaceAll(whole.Text, wholeConv, "C"); got != want {
					t.Errorf("response %d split %v: output\n%s\nwant (the whole response's)\n%s", ri, cuts, got, want)
				}
				if out.Kind != whole.Kind {
					t.Errorf("response %d split %v: kind %s, want %s", ri, cuts, out.Kind, whole.Kind)
				}
			}()
		}
		wg.Wait()
		t.Logf("response %d: %d splits", ri, splits)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	for k, n := range j.runs {
		if n != 1 {
			t.Errorf("%s ran %d times", k, n)
		}
		if strings.HasSuffix(k, "/cut") {
			t.Errorf("the call cut off at the end ran: %s", k)
		}
	}
}

// every returns cuts every size bytes of a text of n bytes, offset by start.
func every(n, size int) []int {
	var cuts []int
	for i := size; i < n; i += size {
		cuts = append(cuts, i)
	}
	return cuts
}

// A call runs as soon as its block is complete, while the model is still writing: a
// slow read written first has finished, and its progress arrived, before the response
// ends; a write waits for the calls before it; a cut-off call is not run.
func TestStreamRunsCallsEarly(t *testing.T) {
	t.Parallel()
	var j journal
	p := startMCPPipeline(t, mcpConfig(t, `{"engineering": {"enabled": false}}`), journalTools(t, &j))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var mu sync.Mutex
	var progress []messages.ToolResult
	s, err := p.client.Stream(ctx, "early", &client.StreamOptions{
		SubmitOptions: client.SubmitOptions{Reasoning: "tagged"},
		Progress: func(r messages.ToolResult) {
			mu.Lock()
			defer mu.Unlock()
			progress = append(progress, r)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	write := func(s2 string) {
		if _, err := s.WriteString(s2); err != nil {
			t.Fatal(err)
		}
	}
	write(`<tool_call>{"name": "slow_read", "arguments": {"conv": "early", "text": "first"}}</tool_call>`)
	write(`<tool_call>{"name": "note_write", "arguments": {"conv": "early", "text": "after the read"}}`)
	// The model keeps writing for a while; the read runs meanwhile.
	mcpEventually(t, "the progress of the first call", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(progress) >= 1
	})
	j.mu.Lock()
	wroteEarly := len(j.entries["early"])
	j.mu.Unlock()
	if wroteEarly != 0 {
		t.Error("the write ran before its block was closed")
	}
	write(`</tool_call>`)
	mcpEventually(t, "the write, released by the read's result", func() bool {
		j.mu.Lock()
		defer j.mu.Unlock()
		return len(j.entries["early"]) == 1
	})
	write(`<tool_call>{"name": "note_write", "arguments": {"conv": "early", "text": "cut off`)
	out, err := s.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Results) != 3 {
		t.Fatalf("%d results: %s", len(out.Results), out.Text)
	}
	mcpOK(t, out.Results[0], "first")
	mcpOK(t, out.Results[1], "after the read")
	mcpFailed(t, out.Results[2], messages.CodeParseError)
	mcpEventually(t, "the progress of every call", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(progress) == 3
	})
	mu.Lock()
	defer mu.Unlock()
	if progress[0].Tool != "slow_read" || !progress[0].Success || progress[2].Success {
		t.Errorf("progress: %+v", progress)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if got := j.entries["early"]; len(got) != 1 {
		t.Errorf("writes that ran: %q (the cut-off one must not)", got)
	}
}

// Under reasoning "auto" a call before any think tag waits for the end of the response:
// a </think> written later makes it reasoning, which never runs.
func TestStreamAutoReasoningWaits(t *testing.T) {
	t.Parallel()
	var j journal
	p := startMCPPipeline(t, mcpConfig(t, `{"engineering": {"enabled": false}}`), journalTools(t, &j))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	text := `Maybe <tool_call>{"name": "note_write", "arguments": {"conv": "auto", "text": "considered"}}</tool_call> no.</think>` +
		`<tool_call>{"name": "note_write", "arguments": {"conv": "auto", "text": "meant"}}</tool_call>`
	cut := strings.Index(text, "</tool_call>") + len("</tool_call>") + 4
	s, err := p.client.Stream(ctx, "auto", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.WriteString(text[:cut]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // time enough for a call released in error to run
	if _, err := s.WriteString(text[cut:]); err != nil {
		t.Fatal(err)
	}
	out, err := s.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Results) != 1 {
		t.Fatalf("%d results: %s", len(out.Results), out.Text)
	}
	mcpOK(t, out.Results[0], "meant")
	j.mu.Lock()
	defer j.mu.Unlock()
	if got := j.entries["auto"]; len(got) != 1 || got[0] != "meant" {
		t.Errorf("writes that ran: %q; the call in the reasoning must not run", got)
	}
}

// Two parser processes, one killed with SIGKILL over and over while 40 responses (240
// with TOOLBUS_LONG) are streamed chunk by chunk (a kill every 500 ms: dozens in the
// short run): every call is answered, none runs
// twice, and the two calls of each response (the counter tool is not read-only) run in
// the order written.
func TestCrashParsersMidStream(t *testing.T) {
	t.Parallel() // waits mostly (processes starting, acks timing out): beside another test
	r := newFaultRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	parserBin := testbin.Path(t, "./cmd/parser")
	connect := func(name string) *nats.Conn {
		nc, err := nats.Connect(r.url, nats.Name(name), nats.MaxReconnects(-1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	sctx, stop := context.WithCancel(ctx)
	n, err := toolbus.Start(sctx, toolbus.Options{Provision: true, Conn: connect("executor-formatter"), Config: r.cfg, Services: []string{toolbus.Executor, toolbus.Formatter}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { stop(); n.Wait() }()
	c, err := client.New(connect("orchestrator"))
	if err != nil {
		t.Fatal(err)
	}
	startParser := func(name string) *exec.Cmd {
		cmd := exec.Command(parserBin, "--nats", r.url, "--config", r.cfgPath, "--ops-addr", "127.0.0.1:0")
		cmd.Stderr = &prefixWriter{t: t, prefix: name, ready: make(chan struct{})}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	k := startKilling(t, 2, 500*time.Millisecond, func(i int) *exec.Cmd { return startParser(fmt.Sprintf("parser-%d", i)) })

	responses := 40
	if long() {
		responses = 240
	}
	results := map[string]messages.OutputResult{}
	var rmu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range responses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			ids := []string{fmt.Sprintf("stream-%d-0", i), fmt.Sprintf("stream-%d-1", i)}
			text := fmt.Sprintf("Counting twice.\n<tool_call>{\"name\": \"count_effect\", \"arguments\": {\"id\": %q}}</tool_call>\n"+
				"<tool_call>{\"name\": \"count_effect\", \"arguments\": {\"id\": %q}}</tool_call>\nDone counting.", ids[0], ids[1])
			s, err := c.Stream(ctx, "crash-stream", &client.StreamOptions{SubmitOptions: client.SubmitOptions{
				ResponseID: fmt.Sprintf("stream-%d", i), Reasoning: "tagged"}})
			if err != nil {
				t.Errorf("response %d: %v", i, err)
				return
			}
			for at := 0; at < len(text); at += 6 {
				if _, err := s.WriteString(text[at:min(at+6, len(text))]); err != nil {
					t.Errorf("response %d: %v", i, err)
					return
				}
				time.Sleep(8 * time.Millisecond)
			}
			out, err := s.Close(ctx)
			if err != nil {
				t.Errorf("response %d: %v", i, err)
				return
			}
			if len(out.Results) != 2 {
				t.Errorf("response %d: %d results: %s", i, len(out.Results), out.Text)
				return
			}
			rmu.Lock()
			for k, res := range out.Results {
				results[ids[k]] = res
			}
			rmu.Unlock()
		}()
	}
	wg.Wait()
	kills := k.stop()
	time.Sleep(200 * time.Millisecond) // a tool started before the end may still be writing
	unknown := checkEffects(t, 2*responses, results, r.effects())
	t.Logf("%d streamed responses, %d parser kills, %d answered outcome_unknown", responses, kills, unknown)
	if kills == 0 {
		t.Error("no parser was killed; the test proved nothing")
	}
}

// Activating a domain and calling its calculators in one streamed response works as
// written, on every chunking: each execute_tool waits for the activation.
func TestStreamActivateThenExecute(t *testing.T) {
	t.Parallel()
	p := startMCPPipeline(t, mcpConfig(t, `{"parser": {"reasoning": "tagged"}}`), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	text := `<tool_call>{"name": "dispatch_engineering", "arguments": {"domain": "geometry", "action": "activate"}}</tool_call>` + "\n" +
		`<tool_call>{"name": "execute_tool", "arguments": {"tool_name": "geometry.solve_circle_area", "parameters": {"r": 2}}}</tool_call>` + "\n" +
		`<tool_call>{"name": "execute_tool", "arguments": {"tool_name": "geometry.solve_circle_area", "parameters": {"r": 3}}}</tool_call>` + "\nDone."
	var wg sync.WaitGroup
	for size := 1; size <= 12; size++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := stream(ctx, t, p.client, fmt.Sprintf("activate-%d", size), text, every(len(text), size), nil)
			if len(out.Results) != 3 {
				t.Errorf("chunks of %d bytes: %d results: %s", size, len(out.Results), out.Text)
				return
			}
			for i, r := range out.Results {
				if !r.Success {
					t.Errorf("chunks of %d bytes: call %d failed: %+v", size, i, r.Error)
				}
			}
		}()
	}
	wg.Wait()
}

// Under on_error "skip", the calls after a failure are skipped also when the failure is
// answered while the model is still writing: the formatter releases them skipped.
func TestStreamSkipAfterFailure(t *testing.T) {
	t.Parallel()
	var st stamps
	p := startMCPPipeline(t, mcpConfig(t, `{"executor": {"on_error": "skip"}, "parser": {"reasoning": "tagged"}}`), stampTools(t, &st))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := p.client.Stream(ctx, "skip", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, chunk := range []string{
		`<tool_call>{"name": "fail_write", "arguments": {"n": "x"}}</tool_call>`,
		`<tool_call>{"name": "stamp_write", "arguments": {"n": "after"}}</tool_call>`,
		` and more text while the failure is answered`,
	} {
		if _, err := s.WriteString(chunk); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(500 * time.Millisecond) // the failure is answered before the response ends
	out, err := s.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Results) != 2 {
		t.Fatalf("%d results: %s", len(out.Results), out.Text)
	}
	mcpFailed(t, out.Results[0], messages.CodeToolError)
	mcpFailed(t, out.Results[1], messages.CodeSkipped)
	if st.get("after")[0] != (time.Time{}) {
		t.Error("the call after the failure ran")
	}
}
