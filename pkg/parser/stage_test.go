package parser

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/catalog"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/order"
)

func TestParse(t *testing.T) {
	cat := NewCatalog()
	cat.Set("local", []catalog.Tool{{Name: "add", InputSchema: json.RawMessage(
		`{"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number", "default": 2}}, "required": ["a"]}`)}})
	tests := []struct {
		name     string
		text     string
		header   map[string]string
		meta     bus.Meta
		seq      uint64
		routed   []string
		wantSubj string
		wantIDs  []string // message ids, in order
		wantArgs []string // arguments of each call ("" for an output)
		wantCode []messages.ErrorCode
	}{
		{name: "no call answers the response", text: "Paris.", meta: bus.Meta{Conversation: "c1", ResponseID: "r1"},
			wantSubj: messages.OutputSubject("c1"), wantIDs: []string{"c1/r1"}, wantArgs: []string{""}, wantCode: []messages.ErrorCode{""}},
		{name: "two calls, defaults applied", text: `<tool_call>{"name": "add", "arguments": {"a": 1}}</tool_call><tool_call>{"name": "clock", "arguments": {}}</tool_call>`,
			meta: bus.Meta{Conversation: "c1", ResponseID: "r2"}, wantSubj: messages.CallSubject("c1"),
			wantIDs: []string{"c1/r2/0", "c1/r2/1"}, wantArgs: []string{`{"a":1,"b":2}`, `{}`}, wantCode: []messages.ErrorCode{"", ""}},
		{name: "arguments that do not fit travel with their error", text: `<tool_call>{"name": "add", "arguments": {"a": "one"}}</tool_call>`,
			meta: bus.Meta{Conversation: "c1", ResponseID: "r3"}, wantSubj: messages.CallSubject("c1"),
			wantIDs: []string{"c1/r3/0"}, wantArgs: []string{`{"a": "one"}`}, wantCode: []messages.ErrorCode{messages.CodeInvalidArguments}},
		{name: "a routed tool is checked by its server", text: `<tool_call>{"name": "add", "arguments": {"a": "one"}}</tool_call>`,
			meta: bus.Meta{Conversation: "c1", ResponseID: "r4"}, routed: []string{"add"}, wantSubj: messages.CallSubject("c1"),
			wantIDs: []string{"c1/r4/0"}, wantArgs: []string{`{"a": "one"}`}, wantCode: []messages.ErrorCode{""}},
		{name: "no response id: the message id", text: "no call", meta: bus.Meta{Conversation: "c2", MsgID: "m7"},
			wantSubj: messages.OutputSubject("c2"), wantIDs: []string{"c2/m7"}, wantArgs: []string{""}, wantCode: []messages.ErrorCode{""}},
		{name: "no id at all: the stream sequence", text: "no call", meta: bus.Meta{Conversation: "c2"}, seq: 42,
			wantSubj: messages.OutputSubject("c2"), wantIDs: []string{"c2/c2-42"}, wantArgs: []string{""}, wantCode: []messages.ErrorCode{""}},
		{name: "format pinned by header", text: `[TOOL_CALLS][{"name": "clock", "arguments": {}}]`, header: map[string]string{messages.HeaderFormat: "mistral"},
			meta: bus.Meta{Conversation: "c1", ResponseID: "r5"}, wantSubj: messages.CallSubject("c1"),
			wantIDs: []string{"c1/r5/0"}, wantArgs: []string{`{}`}, wantCode: []messages.ErrorCode{""}},
		{name: "format pinned by a model's name", text: `<tool_calls>[{"name": "clock", "arguments": {}}]</tool_calls>`, header: map[string]string{messages.HeaderFormat: "hunyuan"},
			meta: bus.Meta{Conversation: "c1", ResponseID: "r6"}, wantSubj: messages.CallSubject("c1"),
			wantIDs: []string{"c1/r6/0"}, wantArgs: []string{`{}`}, wantCode: []messages.ErrorCode{""}},
		{name: "pinned to another format, a marker is text", text: `<tool_calls>[{"name": "clock", "arguments": {}}]</tool_calls>`, header: map[string]string{messages.HeaderFormat: "harmony"},
			meta: bus.Meta{Conversation: "c1", ResponseID: "r7"}, wantSubj: messages.OutputSubject("c1"),
			wantIDs: []string{"c1/r7"}, wantArgs: []string{""}, wantCode: []messages.ErrorCode{""}},
		{name: "a Harmony call, typed by the catalog's schema (a leading zero)", text: `<|channel|>analysis<|message|>Add them.<|end|><|start|>assistant<|channel|>commentary to=functions.add <|constrain|>json<|message|>{"a": "07"}<|call|>`,
			meta: bus.Meta{Conversation: "c1", ResponseID: "r8"}, wantSubj: messages.CallSubject("c1"),
			wantIDs: []string{"c1/r8/0"}, wantArgs: []string{`{"a":7,"b":2}`}, wantCode: []messages.ErrorCode{""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := nats.Header{}
			for k, v := range tt.header {
				h.Set(k, v)
			}
			s := &Stage{Catalog: cat, Routed: tt.routed}
			out, err := s.Parse(context.Background(), &bus.Delivery{Data: []byte(tt.text), Header: h, Meta: tt.meta, Sequence: tt.seq, Delivered: 1})
			if err != nil {
				t.Fatal(err)
			}
			if len(out) != len(tt.wantIDs) {
				t.Fatalf("%d messages, want %d", len(out), len(tt.wantIDs))
			}
			for i, o := range out {
				if o.Subject != tt.wantSubj || o.Meta.MsgID != tt.wantIDs[i] {
					t.Errorf("message %d: %s id %q, want %s id %q", i, o.Subject, o.Meta.MsgID, tt.wantSubj, tt.wantIDs[i])
				}
				if tt.wantArgs[i] == "" {
					var got messages.Output
					if err := json.Unmarshal(o.Body, &got); err != nil || got.Kind != messages.KindNoToolCall || messages.ScopedID(got.Conversation, got.ResponseID) != tt.wantIDs[i] {
						t.Errorf("output %s: %v", o.Body, err)
					}
					continue
				}
				var c messages.ToolCall
				if err := json.Unmarshal(o.Body, &c); err != nil {
					t.Fatal(err)
				}
				if string(c.Arguments) != tt.wantArgs[i] || c.ID != tt.wantIDs[i] || o.Meta.Index != i || o.Meta.Count != len(out) {
					t.Errorf("call %d: id %q args %s index %d/%d", i, c.ID, c.Arguments, o.Meta.Index, o.Meta.Count)
				}
				var code messages.ErrorCode
				if c.Error != nil {
					code = c.Error.Code
				}
				if code != tt.wantCode[i] {
					t.Errorf("call %d: error %v, want %q", i, c.Error, tt.wantCode[i])
				}
			}
		})
	}
}

// savedPlans records what the parser saves.
type savedPlans struct{ segs []order.Segment }

func (p *savedPlans) Save(_ context.Context, _ string, segs []order.Segment) (order.Segment, error) {
	p.segs = segs
	return segs[0], nil
}

// The parser cuts a response into segments by what its tools may do and by the policy,
// publishes the first and saves the plan.
func TestParseSegments(t *testing.T) {
	cat := NewCatalog()
	cat.Set("fs", []catalog.Tool{{Name: "read_file", Server: "fs", Remote: "read_file", ReadOnly: true},
		{Name: "write_file", Server: "fs", Remote: "write_file"}})
	cat.Set("engineering", []catalog.Tool{{Name: "dispatch_engineering", Server: "engineering",
		ReadOnlyWhen: &messages.ArgIn{Arg: "action", Values: []string{"info", "list"}}},
		{Name: "execute_tool", Server: "engineering", ReadOnly: true}})
	// The same name elsewhere, without the annotation: a name decides nothing.
	cat.Set("lookalike", []catalog.Tool{{Name: "lookalike__dispatch_engineering", Server: "lookalike", Remote: "dispatch_engineering"}})
	call := func(name, args string) string {
		return `<tool_call>{"name": "` + name + `", "arguments": ` + args + `}</tool_call>`
	}
	read, write := call("read_file", `{}`), call("write_file", `{}`)
	activate, info := call("dispatch_engineering", `{"action": "activate", "domain": "geometry"}`), call("dispatch_engineering", `{"action": "INFO"}`)
	exec := call("execute_tool", `{"tool_name": "geometry.solve_circle_area", "parameters": {"r": 1}}`)
	tests := []struct {
		name   string
		text   string
		policy order.Policy
		want   []int // sizes of the segments
	}{
		{"reads run together", read + read + read, order.Policy{}, []int{3}},
		{"writes run alone, in order", write + read + read + write + read, order.Policy{}, []int{1, 2, 1, 1}},
		{"activate is a barrier; info and execute_tool are not", info + activate + exec + exec + info, order.Policy{}, []int{1, 1, 3}},
		{"read-only by annotation, not by name", info + call("lookalike__dispatch_engineering", `{"action": "info"}`) + info, order.Policy{}, []int{1, 1, 1}},
		{"qualified spellings are the same tool", call("fs__read_file", `{}`) + call("fs::read_file", `{}`) + call("mcp__fs__write_file", `{}`), order.Policy{}, []int{2, 1}},
		{"an unknown tool runs alone", read + call("mystery", `{}`) + read, order.Policy{}, []int{1, 1, 1}},
		{"a call the parser answers runs nothing", read + `<tool_call>{"name": "read_file", "arguments": {"a": </tool_call>` + read, order.Policy{}, []int{3}},
		{"ordered: one at a time", read + read, order.Policy{Parallel: order.Ordered}, []int{1, 1}},
		{"all: everything at once", write + write + call("mystery", `{}`), order.Policy{Parallel: order.All}, []int{3}},
		{"a server's own mode wins", write + write + exec + exec, order.Policy{Parallel: order.Ordered, Servers: map[string]order.Mode{"fs": order.All}}, []int{2, 1, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plans := &savedPlans{}
			s := &Stage{Catalog: cat, Order: tt.policy, Plans: plans}
			out, err := s.Parse(context.Background(), &bus.Delivery{Data: []byte(tt.text), Meta: bus.Meta{Conversation: "c", ResponseID: "r"}, Delivered: 1})
			if err != nil {
				t.Fatal(err)
			}
			if len(out) != tt.want[0] {
				t.Fatalf("%d calls published, want the first segment's %d", len(out), tt.want[0])
			}
			var sizes []int
			if plans.segs == nil {
				sizes = []int{len(out)}
			}
			for _, seg := range plans.segs {
				sizes = append(sizes, len(seg.Calls))
			}
			if !slices.Equal(sizes, tt.want) {
				t.Errorf("segments of %v calls, want %v", sizes, tt.want)
			}
		})
	}
}

// A tenant's response is parsed like any other and answered on its subjects; a
// response of a tenant the deployment does not serve, whole or streamed, is an error
// (dead-lettered by the runner), with nothing published.
func TestParseTenants(t *testing.T) {
	s := &Stage{Serves: bus.Topology{Tenants: []bus.Tenant{{Name: "acme"}}}.Serves}
	text := `<tool_call>{"name": "clock", "arguments": {}}</tool_call>`
	out, err := s.Parse(context.Background(), &bus.Delivery{Data: []byte(text), Meta: bus.Meta{Conversation: "acme.c1", ResponseID: "r1"}})
	if err != nil || len(out) != 1 || out[0].Subject != messages.CallSubject("acme.c1") || out[0].Meta.MsgID != "acme.c1/r1/0" {
		t.Fatalf("acme's response: %+v, %v", out, err)
	}
	for _, conv := range []string{"globex.c1", "parser.c1"} {
		d := &bus.Delivery{Data: []byte(text), Meta: bus.Meta{Conversation: conv, ResponseID: "r1"}}
		if out, err := s.Parse(context.Background(), d); err == nil || len(out) != 0 {
			t.Errorf("%s: %+v, %v; want an error and nothing published", conv, out, err)
		}
		if out, err := s.Chunk(context.Background(), d); err == nil || len(out) != 0 {
			t.Errorf("%s, streamed: %+v, %v; want an error and nothing published", conv, out, err)
		}
	}
}
