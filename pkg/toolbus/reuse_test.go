package toolbus_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/messages"
)

// A response id used again after JetStream's duplicate window forgot the first response
// (issue 52) is answered: with an output refusing it, within seconds, and nothing of it
// runs. Before, a response of several calls got no output at all (its gathering was
// marked answered), and one of a single call was answered with the earlier call's
// stored result; a streamed one, never. Whole responses of one call, of two, of none,
// and a streamed one.
func TestReusedResponseIDIsRefused(t *testing.T) {
	const window = time.Second
	var runs atomic.Int32
	reg := localtools.New()
	if err := localtools.AddFunc(reg, messages.ToolInfo{Name: "bump", Description: "Counts its runs."},
		func(context.Context, struct{}) (int32, error) { return runs.Add(1), nil }); err != nil {
		t.Fatal(err)
	}
	cfg := mcpConfig(t, `{"engineering": {"enabled": false}, "parser": {"reasoning": "tagged"}, "nats": {"duplicate_window": "1s"}}`)
	_, c := startWithLists(t, cfg, reg)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a bound on a hang
	defer cancel()

	bump := `<tool_call>{"name": "bump", "arguments": {}}</tool_call>`
	responses := []struct{ id, text string }{{"one", bump}, {"two", bump + bump}, {"none", "Nothing to run."}}
	ask := func(ctx context.Context, id, text string) (*messages.Output, error) {
		if id == "streamed" {
			s, err := c.Stream(ctx, "reuse", &client.StreamOptions{SubmitOptions: client.SubmitOptions{ResponseID: id}})
			if err != nil {
				return nil, err
			}
			if _, err := s.WriteString(text); err != nil {
				return nil, err
			}
			return s.Close(ctx)
		}
		return c.Ask(ctx, "reuse", text, &client.SubmitOptions{ResponseID: id})
	}
	responses = append(responses, struct{ id, text string }{"streamed", bump})
	for _, r := range responses {
		out, err := ask(ctx, r.id, r.text)
		if err != nil {
			t.Fatalf("%s: %v", r.id, err)
		}
		if r.id == "none" {
			if out.Kind != messages.KindNoToolCall {
				t.Fatalf("%s: %s", r.id, out.Text)
			}
			continue
		}
		for _, res := range out.Results {
			if !res.Success {
				t.Fatalf("%s: %+v", r.id, res.Error)
			}
		}
	}
	ran := runs.Load()
	if ran != 4 {
		t.Fatalf("%d runs, want 4", ran)
	}

	// Past the duplicate window: JetStream stores each again, and the parser refuses it.
	time.Sleep(window + 500*time.Millisecond)
	for _, r := range responses {
		start := time.Now()
		actx, acancel := context.WithTimeout(ctx, 20*time.Second)
		out, err := ask(actx, r.id, r.text)
		acancel()
		if err != nil {
			t.Errorf("%s again: %v (no output within %v)", r.id, err, time.Since(start).Round(time.Millisecond))
			continue
		}
		if out.ResponseID != r.id || len(out.Results) != 1 || out.Results[0].Success || out.Results[0].Error == nil ||
			out.Results[0].Error.Code != messages.CodeNotAllowed || !strings.Contains(out.Results[0].Error.Message, "answered already") {
			t.Errorf("%s again: kind %s, %s; want it refused as answered already", r.id, out.Kind, out.Text)
			continue
		}
		t.Logf("%s again, answered in %v: %s", r.id, time.Since(start).Round(time.Millisecond), out.Results[0].Error.Message)
	}
	if got := runs.Load(); got != ran {
		t.Errorf("%d runs after the ids were used again, want %d: nothing of a refused response runs", got, ran)
	}
}
