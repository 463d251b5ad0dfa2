package toolbus_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/messages"
)

// A response id used again after JetStream's duplicate window forgot the first response
// (issue 52) is answered, within seconds, and runs nothing again: the same call of one
// is answered with its stored result; another call under the used id is refused, as
// is a response of several calls (its gathering was answered) and a streamed one. Before,
// a response of several calls got no output at all, and another call under a used id
// was answered with the earlier call's result.
func TestReusedResponseIDIsAnswered(t *testing.T) {
	t.Parallel()
	const window = time.Second
	var runs atomic.Int32
	reg := localtools.New()
	if err := localtools.AddFunc(reg, messages.ToolInfo{Name: "bump", Description: "Counts its runs."},
		func(_ context.Context, in struct {
			By int `json:"by"`
		}) (int32, error) {
			return runs.Add(int32(in.By)), nil
		}); err != nil {
		t.Fatal(err)
	}
	var reads atomic.Int32
	if err := localtools.AddFunc(reg, messages.ToolInfo{Name: "peek", Description: "Reads a counter.", ReadOnly: true},
		func(context.Context, struct{}) (int32, error) { return reads.Add(1), nil }); err != nil {
		t.Fatal(err)
	}
	cfg := mcpConfig(t, `{"engineering": {"enabled": false}, "nats": {"duplicate_window": "1s"}}`)
	_, c := startWithLists(t, cfg, reg)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a bound on a hang
	defer cancel()

	bump := func(by int) string {
		return `<tool_call>{"name": "bump", "arguments": {"by": ` + string(rune('0'+by)) + `}}</tool_call>`
	}
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
	peek := `<tool_call>{"name": "peek", "arguments": {}}</tool_call>`
	// "two" runs its calls one after the other (neither is read-only), "reads" both at
	// once: a reused id is caught by the parser in one, by the formatter in the other.
	first := []struct{ id, text string }{{"one", bump(1)}, {"two", bump(1) + bump(1)}, {"reads", peek + peek}, {"none", "Nothing to run."},
		{"streamed", bump(1)}}
	answers := map[string]*messages.Output{}
	for _, r := range first {
		out, err := ask(ctx, r.id, r.text)
		if err != nil {
			t.Fatalf("%s: %v", r.id, err)
		}
		for _, res := range out.Results {
			if !res.Success {
				t.Fatalf("%s: %+v", r.id, res.Error)
			}
		}
		answers[r.id] = out
	}
	if answers["none"].Kind != messages.KindNoToolCall {
		t.Fatalf("none: %s", answers["none"].Text)
	}
	ran := runs.Load()
	if ran != 4 {
		t.Fatalf("%d runs, want 4", ran)
	}

	// Past the duplicate window: JetStream stores each response again.
	time.Sleep(window + 500*time.Millisecond)
	again := []struct {
		id, text string
		want     string // "" for the first answer again, else a refusal's words
	}{
		{"one", bump(1), ""},
		{"one", bump(7), "already answered another call"},
		{"two", bump(1) + bump(1), "used by an earlier response"},
		{"reads", peek + peek, "used by an earlier response"},
		{"none", "Nothing to run.", ""},
		{"streamed", bump(1), "used by an earlier response"},
	}
	for i, r := range again {
		if i > 0 {
			// Past the window again, or this use of the id would be dropped as the
			// previous one's duplicate.
			time.Sleep(window + 200*time.Millisecond)
		}
		start := time.Now()
		actx, acancel := context.WithTimeout(ctx, 20*time.Second)
		out, err := ask(actx, r.id, r.text)
		acancel()
		if err != nil {
			t.Errorf("%s again: %v (no output within %v)", r.id, err, time.Since(start).Round(time.Millisecond))
			continue
		}
		if r.want == "" {
			before, _ := json.Marshal(answers[r.id].Results)
			now, _ := json.Marshal(out.Results)
			if out.Kind != answers[r.id].Kind || string(before) != string(now) {
				t.Errorf("%s again: %s %s, want the first answer %s", r.id, out.Kind, now, before)
			}
			continue
		}
		if out.ResponseID != r.id || len(out.Results) != 1 || out.Results[0].Success || out.Results[0].Error == nil ||
			out.Results[0].Error.Code != messages.CodeNotAllowed || !strings.Contains(out.Results[0].Error.Message, r.want) {
			t.Errorf("%s again (%s): kind %s, %s; want it refused (%q)", r.id, r.text, out.Kind, out.Text, r.want)
			continue
		}
		t.Logf("%s again, answered in %v: %s", r.id, time.Since(start).Round(time.Millisecond), out.Results[0].Error.Message)
	}
	if got := runs.Load(); got != ran {
		t.Errorf("%d runs after the ids were used again, want %d: nothing runs twice", got, ran)
	}
}
