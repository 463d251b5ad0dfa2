package formatter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/order"
	"github.com/toolbus/toolbus/pkg/order/ordertest"
)

// memGatherer gathers in memory, as the bucket does across replicas.
type memGatherer struct {
	mu   sync.Mutex
	m    map[string]*memGathered
	fail error
}

type memGathered struct {
	p       progress
	results map[int]messages.ToolResult
}

func (s *memGatherer) Add(_ context.Context, rs ...messages.ToolResult) (Gathered, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return Gathered{}, s.fail
	}
	if s.m == nil {
		s.m = map[string]*memGathered{}
	}
	g := s.m[rs[0].ResponseID]
	if g == nil {
		g = &memGathered{results: map[int]messages.ToolResult{}}
		s.m[rs[0].ResponseID] = g
	}
	for _, r := range rs {
		if g.p.add(r.Index, r.Success) {
			g.results[r.Index] = r
		}
	}
	return g.p.gathered(), nil
}

func (s *memGatherer) Store(_ context.Context, r messages.ToolResult) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	if s.m == nil {
		s.m = map[string]*memGathered{}
	}
	g := s.m[r.ResponseID]
	if g == nil {
		g = &memGathered{results: map[int]messages.ToolResult{}}
		s.m[r.ResponseID] = g
	}
	if _, ok := g.results[r.Index]; !ok {
		g.results[r.Index] = r
	}
	return nil
}

func (s *memGatherer) Results(_ context.Context, _, responseID string, n int) ([]messages.ToolResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]messages.ToolResult, n)
	g := s.m[responseID]
	for i := range out {
		if g == nil {
			return nil, fmt.Errorf("no result of %s", responseID)
		}
		r, ok := g.results[i]
		if !ok {
			return nil, fmt.Errorf("no result %d of %s", i, responseID)
		}
		out[i] = r
	}
	return out, nil
}

func result(id string, index, count int, tool string) messages.ToolResult {
	return messages.ToolResult{CallID: messages.CallID("c1", id, index), ResponseID: id, Conversation: "c1", Index: index, Count: count,
		Tool: tool, Success: true, Result: json.RawMessage(`{"i":` + string(rune('0'+index)) + `}`)}
}

func TestFormat(t *testing.T) {
	tests := []struct {
		name string
		in   []messages.ToolResult
		// wantOutputs[i]: the tools of the output the i-th result produces, "" for none.
		wantOutputs []string
		fail        error
		wantErr     string
	}{
		{name: "one call is answered at once", in: []messages.ToolResult{result("r1", 0, 1, "a")}, wantOutputs: []string{"a"}},
		{name: "three calls out of order", in: []messages.ToolResult{result("r2", 2, 3, "c"), result("r2", 0, 3, "a"), result("r2", 1, 3, "b")},
			wantOutputs: []string{"", "", "a,b,c"}},
		{name: "a redelivered result counts once", in: []messages.ToolResult{result("r3", 0, 2, "a"), result("r3", 0, 2, "a"), result("r3", 1, 2, "b")},
			wantOutputs: []string{"", "", "a,b"}},
		{name: "a result redelivered after the output gives it again", in: []messages.ToolResult{result("r4", 0, 2, "a"), result("r4", 1, 2, "b"), result("r4", 1, 2, "b")},
			wantOutputs: []string{"", "a,b", "a,b"}},
		{name: "gatherer failure is retried", in: []messages.ToolResult{result("r5", 0, 2, "a")}, fail: errors.New("bucket away"), wantErr: "retry"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Stage{Gather: &memGatherer{fail: tt.fail}}
			for i, r := range tt.in {
				out, err := s.Format(context.Background(), r, &bus.Delivery{Delivered: 1})
				if tt.wantErr != "" {
					var retry *bus.RetryError
					if !errors.As(err, &retry) {
						t.Fatalf("err = %v, want a retry", err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if tt.wantOutputs[i] == "" {
					if len(out) != 0 {
						t.Fatalf("result %d: %d outputs before the response is complete", i, len(out))
					}
					continue
				}
				if len(out) != 1 {
					t.Fatalf("result %d: %d outputs, want 1", i, len(out))
				}
				o := out[0]
				if o.Subject != messages.OutputSubject("c1") || o.Meta.MsgID != messages.ScopedID(r.Conversation, r.ResponseID) {
					t.Errorf("output to %s with id %q", o.Subject, o.Meta.MsgID)
				}
				var got messages.Output
				if err := json.Unmarshal(o.Body, &got); err != nil {
					t.Fatal(err)
				}
				var tools []string
				for _, res := range got.Results {
					tools = append(tools, res.Tool)
				}
				if strings.Join(tools, ",") != tt.wantOutputs[i] || strings.Count(got.Text, "<tool_result>") != len(tools) {
					t.Errorf("output tools %v, want %s; text:\n%s", tools, tt.wantOutputs[i], got.Text)
				}
			}
		})
	}
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		wantErr bool
	}{
		{"result", `{"call_id":"r/0","response_id":"r","conversation":"c","index":0,"count":1,"tool":"a","success":true,"result":1}`, false},
		{"no response id", `{"count":1,"tool":"a"}`, true},
		{"no count", `{"response_id":"r","tool":"a"}`, true},
		{"not json", `<tool_result>`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(&bus.Delivery{Data: []byte(tt.body)})
			if (err != nil) != tt.wantErr {
				t.Errorf("err = %v, wantErr %v", err, tt.wantErr)
			}
		})
	}
}

// However large a response's results, its output fits: the results are cut to
// previews saying so.
func TestFormatFitsTheLimit(t *testing.T) {
	big := strings.Repeat("é", 300_000) // 600 KB of JSON string
	var out []bus.Outgoing
	s := &Stage{Gather: &memGatherer{}, MaxOutputBytes: 256 << 10}
	for i := range 3 {
		r := result("big", i, 3, "report")
		r.Result = json.RawMessage(`"` + big + `"`)
		var err error
		if out, err = s.Format(context.Background(), r, &bus.Delivery{Delivered: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if len(out) != 1 || len(out[0].Body) > 256<<10 {
		t.Fatalf("%d outputs, the last %d bytes; want one within %d", len(out), len(out[len(out)-1].Body), 256<<10)
	}
	var o messages.Output
	if err := json.Unmarshal(out[0].Body, &o); err != nil {
		t.Fatal(err)
	}
	if err := o.FillResults(); err != nil {
		t.Fatal(err)
	}
	for i, r := range o.Results {
		var capped struct {
			Truncated bool   `json:"truncated"`
			Size      int    `json:"size"`
			Preview   string `json:"preview"`
		}
		if err := json.Unmarshal(r.Result, &capped); err != nil || !capped.Truncated || capped.Size != len(big)+2 || !utf8.ValidString(capped.Preview) {
			t.Errorf("result %d: %+v, %v", i, capped.Truncated, err)
		}
	}
}

// memPlans keeps segments in memory, as the gather bucket does.
type memPlans map[string]order.Segment

func (p memPlans) Load(_ context.Context, responseID string, start int) (order.Segment, error) {
	seg, ok := p[order.Key(responseID, start)] // responseID is the scoped id
	if !ok {
		return seg, fmt.Errorf("no segment %d", start)
	}
	return seg, nil
}

// plan cuts tools (a "w" prefix writes, anything else reads) into segments as the
// parser does and keeps every segment but the first, which it returns.
func plan(plans memPlans, id string, onError order.OnError, tools ...string) []messages.ToolCall {
	calls := make([]messages.ToolCall, len(tools))
	for i, tool := range tools {
		calls[i] = messages.ToolCall{ID: messages.CallID("c1", id, i), ResponseID: id, Conversation: "c1", Index: i, Count: len(tools), Tool: tool}
	}
	starts := order.Split(calls, func(c *messages.ToolCall) bool { return !strings.HasPrefix(c.Tool, "w") })
	segs := order.Segments(calls, starts, onError)
	for _, s := range segs[1:] {
		plans[order.Key(messages.ScopedID("c1", id), s.Calls[0].Index)] = s
	}
	return segs[0].Calls
}

// The formatter releases a response's segments one after the other, each once every call
// before it is answered; a redelivered result releases its successor again.
func TestFormatReleasesSegmentsInOrder(t *testing.T) {
	plans := memPlans{}
	s := &Stage{Gather: &memGatherer{}, Plans: plans}
	pending := plan(plans, "seg", order.Continue, "w0", "r1", "r2", "w3")
	answer := func(c messages.ToolCall, ok bool) []bus.Outgoing {
		t.Helper()
		r := messages.ResultFor(c)
		r.Success, r.Result = ok, json.RawMessage(`1`)
		if !ok {
			r = r.Fail(messages.Errorf(messages.CodeToolError, "no"))
		}
		out, err := s.Format(context.Background(), r, &bus.Delivery{Delivered: 1})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	calls := func(out []bus.Outgoing) []messages.ToolCall {
		t.Helper()
		var cs []messages.ToolCall
		for _, o := range out {
			var c messages.ToolCall
			if err := messages.DecodeCall(o.Body, &c); err != nil || o.Subject != messages.CallSubject("c1") || o.Meta.MsgID != c.ID {
				t.Fatalf("released %s %q (%v), want a call to %s with its id", o.Subject, o.Body, err, messages.CallSubject("c1"))
			}
			cs = append(cs, c)
		}
		return cs
	}
	if len(pending) != 1 || pending[0].Tool != "w0" {
		t.Fatalf("first segment %+v", pending)
	}
	next := calls(answer(pending[0], false)) // a failure: the next calls run all the same
	if len(next) != 2 || next[0].Tool != "r1" || next[1].Tool != "r2" {
		t.Fatalf("after w0: %+v, want r1 and r2", next)
	}
	if again := calls(answer(pending[0], false)); len(again) != 2 { // redelivered
		t.Fatalf("a redelivered w0 released %d calls, want the same 2", len(again))
	}
	if out := answer(next[1], true); len(out) != 0 {
		t.Fatalf("r2 alone released %d messages; r1 is not answered", len(out))
	}
	last := calls(answer(next[0], true))
	if len(last) != 1 || last[0].Tool != "w3" {
		t.Fatalf("after r1 and r2: %+v, want w3", last)
	}
	out := answer(last[0], true)
	if len(out) != 1 || out[0].Subject != messages.OutputSubject("c1") {
		t.Fatalf("after w3: %+v, want the output", out)
	}
}

// Under on_error "skip", the calls after a failure are answered skipped, naming the call
// that failed, and never released.
func TestFormatSkipsAfterFailure(t *testing.T) {
	plans := memPlans{}
	s := &Stage{Gather: &memGatherer{}, Plans: plans}
	first := plan(plans, "skip", order.Skip, "w0", "w1", "r2", "r3")
	r := messages.ResultFor(first[0]).Fail(messages.Errorf(messages.CodeToolError, "disk full"))
	out, err := s.Format(context.Background(), r, &bus.Delivery{Delivered: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || out[0].Subject != messages.OutputSubject("c1") {
		t.Fatalf("%d messages; want the output at once", len(out))
	}
	var o messages.Output
	if err := json.Unmarshal(out[0].Body, &o); err != nil {
		t.Fatal(err)
	}
	if len(o.Results) != 4 {
		t.Fatalf("%d results, want 4", len(o.Results))
	}
	for i, res := range o.Results[1:] {
		if res.Success || res.Error == nil || res.Error.Code != messages.CodeSkipped || !strings.Contains(res.Error.Message, "call 0 (w0)") || res.Attempts != 0 {
			t.Errorf("result %d: %+v, want skipped naming call 0 (w0), never attempted", i+1, res)
		}
	}
}

// A streamed response: each result goes out as progress and releases what waited for
// it; the output comes with whichever of the last result and the end is second.
func TestFormatStreamed(t *testing.T) {
	for _, endFirst := range []bool{false, true} {
		t.Run(fmt.Sprint("end first ", endFirst), func(t *testing.T) {
			streams := &ordertest.Streams{}
			s := &Stage{Gather: &memGatherer{}, Streams: streams}
			ctx := context.Background()
			call := func(i int, tool string) messages.ToolCall {
				return messages.ToolCall{ID: messages.CallID("c1", "s1", i), ResponseID: "s1", Conversation: "c1", Index: i, Tool: tool, Arguments: json.RawMessage(`{}`)}
			}
			// The parser settled a read and a write; the read runs.
			streams.Update(ctx, "c1/s1", func(st *order.Streamed) (bool, error) {
				st.Add([]messages.ToolCall{call(0, "read"), call(1, "write")}, []bool{true, false})
				st.Final = endFirst
				st.Release(order.ByChunk(1))
				return true, nil
			})
			res := func(i int, tool string) messages.ToolResult {
				r := messages.ResultFor(call(i, tool))
				r.Stream, r.Success, r.Result = true, true, json.RawMessage(`{"i":`+fmt.Sprint(i)+`}`)
				return r
			}
			subjects := func(out []bus.Outgoing) []string {
				var s []string
				for _, o := range out {
					s = append(s, strings.SplitN(o.Subject, ".", 3)[1])
				}
				return s
			}
			out, err := s.Format(ctx, res(0, "read"), &bus.Delivery{})
			if err != nil {
				t.Fatal(err)
			}
			if got := subjects(out); !slices.Equal(got, []string{"progress", "calls"}) {
				t.Fatalf("the read's result: %v, want its progress and the write released", got)
			}
			out, _ = s.Format(ctx, res(1, "write"), &bus.Delivery{})
			want := []string{"progress"}
			if endFirst {
				want = append(want, "output")
			}
			if got := subjects(out); !slices.Equal(got, want) {
				t.Fatalf("the write's result: %v, want %v", got, want)
			}
			if !endFirst {
				streams.Update(ctx, "c1/s1", func(st *order.Streamed) (bool, error) { st.Final = true; return true, nil })
				end := messages.ToolResult{CallID: "c1/s1/end", ResponseID: "s1", Conversation: "c1", Index: 2, Stream: true, End: true}
				out, _ = s.Format(ctx, end, &bus.Delivery{})
				if got := subjects(out); !slices.Equal(got, []string{"output"}) {
					t.Fatalf("the end: %v, want the output", got)
				}
			}
			var o messages.Output
			if err := messages.DecodeOutput(out[len(out)-1].Body, &o); err != nil || len(o.Results) != 2 || o.Results[1].Tool != "write" {
				t.Errorf("output %+v, %v", o, err)
			}
			// One message answers the response, the first to find it complete; the
			// others that find it complete leave the output to it, and its
			// redelivery answers again (its first publish may have failed).
			end := messages.ToolResult{CallID: "c1/s1/end", ResponseID: "s1", Conversation: "c1", Index: 2, Stream: true, End: true}
			first, other := res(1, "write"), end
			if !endFirst {
				first, other = end, res(1, "write")
			}
			if out, err := s.Format(ctx, other, &bus.Delivery{Delivered: 1}); err != nil || slices.Contains(subjects(out), "output") {
				t.Errorf("a second message finding the response complete: %v %v, want no output", subjects(out), err)
			}
			if out, err := s.Format(ctx, first, &bus.Delivery{Delivered: 2}); err != nil || !slices.Contains(subjects(out), "output") {
				t.Errorf("the redelivery of the message that answered: %v %v, want the output again", subjects(out), err)
			}
		})
	}
}

// A streamed response that ended without its last chunk is answered with its calls'
// results and then its end's error; an end read before the state says the response
// ended (a replica behind) is handed back, not taken for "not yet".
func TestFormatStreamedEndError(t *testing.T) {
	streams := &ordertest.Streams{}
	s := &Stage{Gather: &memGatherer{}, Streams: streams}
	ctx := context.Background()
	call := messages.ToolCall{ID: messages.CallID("c1", "s2", 0), ResponseID: "s2", Conversation: "c1", Index: 0, Tool: "read", Arguments: json.RawMessage(`{}`)}
	streams.Update(ctx, "c1/s2", func(st *order.Streamed) (bool, error) {
		st.Add([]messages.ToolCall{call}, []bool{true})
		st.Release(order.ByChunk(1))
		return true, nil
	})
	end := messages.ToolResult{CallID: "c1/s2/end", ResponseID: "s2", Conversation: "c1", Index: 1, Stream: true, End: true}
	var retry *bus.RetryError
	if _, err := s.Format(ctx, end, &bus.Delivery{}); !errors.As(err, &retry) {
		t.Fatalf("an end before the state is final: %v, want a retry", err)
	}
	streams.Update(ctx, "c1/s2", func(st *order.Streamed) (bool, error) {
		st.Final, st.End = true, &messages.ResultError{Code: messages.CodeTimeout, Message: "the streamed response never finished"}
		return true, nil
	})
	if out, err := s.Format(ctx, end, &bus.Delivery{}); err != nil || len(out) != 0 {
		t.Fatalf("the end before the result: %v %v", out, err)
	}
	r := messages.ResultFor(call)
	r.Stream, r.Success, r.Result = true, true, json.RawMessage(`{"ok":1}`)
	out, err := s.Format(ctx, r, &bus.Delivery{})
	if err != nil || len(out) != 2 {
		t.Fatalf("the last result: %v %v", out, err)
	}
	var o messages.Output
	if err := messages.DecodeOutput(out[1].Body, &o); err != nil || len(o.Results) != 2 || !o.Results[0].Success ||
		o.Results[1].Error == nil || o.Results[1].Error.Code != messages.CodeTimeout || !strings.Contains(o.Text, "never finished") {
		t.Errorf("output %+v, %v", o, err)
	}
}
