package parser

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/toolbus/toolbus/internal/bus"
	"github.com/toolbus/toolbus/pkg/messages"
)

func TestParse(t *testing.T) {
	cat := NewCatalog()
	cat.Set("local", []catalogTool{{Name: "add", InputSchema: json.RawMessage(
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
			wantSubj: messages.OutputSubject("c1"), wantIDs: []string{"r1"}, wantArgs: []string{""}, wantCode: []messages.ErrorCode{""}},
		{name: "two calls, defaults applied", text: `<tool_call>{"name": "add", "arguments": {"a": 1}}</tool_call><tool_call>{"name": "clock", "arguments": {}}</tool_call>`,
			meta: bus.Meta{Conversation: "c1", ResponseID: "r2"}, wantSubj: messages.CallSubject("c1"),
			wantIDs: []string{"r2/0", "r2/1"}, wantArgs: []string{`{"a":1,"b":2}`, `{}`}, wantCode: []messages.ErrorCode{"", ""}},
		{name: "arguments that do not fit travel with their error", text: `<tool_call>{"name": "add", "arguments": {"a": "one"}}</tool_call>`,
			meta: bus.Meta{Conversation: "c1", ResponseID: "r3"}, wantSubj: messages.CallSubject("c1"),
			wantIDs: []string{"r3/0"}, wantArgs: []string{`{"a": "one"}`}, wantCode: []messages.ErrorCode{messages.CodeInvalidArguments}},
		{name: "a routed tool is checked by its server", text: `<tool_call>{"name": "add", "arguments": {"a": "one"}}</tool_call>`,
			meta: bus.Meta{Conversation: "c1", ResponseID: "r4"}, routed: []string{"add"}, wantSubj: messages.CallSubject("c1"),
			wantIDs: []string{"r4/0"}, wantArgs: []string{`{"a": "one"}`}, wantCode: []messages.ErrorCode{""}},
		{name: "no response id: the message id", text: "no call", meta: bus.Meta{Conversation: "c2", MsgID: "m7"},
			wantSubj: messages.OutputSubject("c2"), wantIDs: []string{"m7"}, wantArgs: []string{""}, wantCode: []messages.ErrorCode{""}},
		{name: "no id at all: the stream sequence", text: "no call", meta: bus.Meta{Conversation: "c2"}, seq: 42,
			wantSubj: messages.OutputSubject("c2"), wantIDs: []string{"c2-42"}, wantArgs: []string{""}, wantCode: []messages.ErrorCode{""}},
		{name: "format pinned by header", text: `[TOOL_CALLS][{"name": "clock", "arguments": {}}]`, header: map[string]string{messages.HeaderFormat: "mistral"},
			meta: bus.Meta{Conversation: "c1", ResponseID: "r5"}, wantSubj: messages.CallSubject("c1"),
			wantIDs: []string{"r5/0"}, wantArgs: []string{`{}`}, wantCode: []messages.ErrorCode{""}},
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
					if err := json.Unmarshal(o.Body, &got); err != nil || got.Kind != messages.KindNoToolCall || got.ResponseID != tt.wantIDs[i] {
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
