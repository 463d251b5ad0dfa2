package deadletter

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/claims"
	"github.com/toolbus/toolbus/pkg/claims/claimstest"
	"github.com/toolbus/toolbus/pkg/messages"
)

// memStore holds stream messages in memory and records deletions.
type memStore struct {
	msgs    map[uint64]*jetstream.RawStreamMsg
	deleted []uint64
}

func (s *memStore) Get(_ context.Context, _ string, seq uint64) (*jetstream.RawStreamMsg, error) {
	if m, ok := s.msgs[seq]; ok {
		return m, nil
	}
	return nil, jetstream.ErrMsgNotFound
}

func (s *memStore) Delete(_ context.Context, _ string, seq uint64) error {
	s.deleted = append(s.deleted, seq)
	return nil
}

func TestHandle(t *testing.T) {
	call := messages.ToolCall{ID: "r1/0", ResponseID: "r1", Conversation: "c", Count: 1, Tool: "create_ticket"}
	callBody, _ := json.Marshal(call)
	callMsg := &jetstream.RawStreamMsg{Subject: messages.CallSubject("c"), Sequence: 7, Data: callBody,
		Header: bus.Meta{ResponseID: "r1", Conversation: "c", MsgID: "r1/0", Count: 1}.Header()}
	respMsg := &jetstream.RawStreamMsg{Subject: messages.ResponseSubject("c"), Sequence: 9, Data: []byte(`<tool_call>{"name": "x"}`),
		Header: nats.Header{messages.HeaderResponseID: {"r2"}}}
	chunkMsg := &jetstream.RawStreamMsg{Subject: messages.StreamSubject("c"), Sequence: 11, Data: []byte(`<tool_call>{"na`),
		Header: nats.Header{messages.HeaderResponseID: {"r3"}, messages.HeaderChunk: {"4"}}}
	stored := messages.ResultFor(call)
	stored.Success, stored.Result = true, json.RawMessage(`{"ticket":"T-1"}`)
	tests := []struct {
		name    string
		adv     Advisory
		prior   *claims.Record
		wantSub string // subject of the answer, "" for none
		want    string // its error code, or "ok"
		wantOut int    // messages returned
	}{
		{name: "a started call is answered outcome_unknown", adv: Advisory{Stream: messages.StreamCalls, Consumer: "executor", StreamSeq: 7, Deliveries: 5},
			prior: &claims.Record{State: "running", Owner: "dead"}, wantSub: messages.ResultSubject("c"), want: string(messages.CodeOutcomeUnknown), wantOut: 2},
		{name: "a call never started is answered internal", adv: Advisory{Stream: messages.StreamCalls, Consumer: "executor", StreamSeq: 7, Deliveries: 5},
			wantSub: messages.ResultSubject("c"), want: string(messages.CodeInternal), wantOut: 2},
		{name: "a call that finished is answered with its result", adv: Advisory{Stream: messages.StreamCalls, Consumer: "executor", StreamSeq: 7, Deliveries: 5},
			prior: &claims.Record{State: "done", Result: &stored}, wantSub: messages.ResultSubject("c"), want: "ok", wantOut: 2},
		{name: "a lost response gets an output", adv: Advisory{Stream: messages.StreamResponses, Consumer: "parser", StreamSeq: 9, Deliveries: 5},
			wantSub: messages.OutputSubject("c"), want: string(messages.CodeInternal), wantOut: 2},
		{name: "a lost chunk gets its response an output", adv: Advisory{Stream: messages.StreamChunks, Consumer: "parser", StreamSeq: 11, Deliveries: 5},
			wantSub: messages.OutputSubject("c"), want: string(messages.CodeInternal), wantOut: 2},
		{name: "a terminated message is only copied", adv: Advisory{Stream: messages.StreamCalls, Consumer: "executor", StreamSeq: 7, Reason: "cannot answer"},
			wantOut: 1},
		{name: "a message already gone needs nothing", adv: Advisory{Stream: messages.StreamCalls, Consumer: "executor", StreamSeq: 99}, wantOut: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl := &claimstest.Memory{}
			if tt.prior != nil {
				cl.Set(call.ID, *tt.prior)
			}
			store := &memStore{msgs: map[uint64]*jetstream.RawStreamMsg{7: callMsg, 9: respMsg, 11: chunkMsg}}
			s := &Stage{Messages: store, Claims: cl}
			out, err := s.Handle(context.Background(), tt.adv, &bus.Delivery{Delivered: 1})
			if err != nil {
				t.Fatal(err)
			}
			if len(out) != tt.wantOut {
				t.Fatalf("%d messages, want %d", len(out), tt.wantOut)
			}
			if len(store.deleted) != 0 {
				t.Error("the message was deleted before its answer and copy were stored")
			}
			if tt.wantOut == 0 {
				return
			}
			last := out[len(out)-1]
			if last.Subject != messages.DeadSubject("c") {
				t.Errorf("copy to %s", last.Subject)
			}
			var dl messages.DeadLetter
			if err := json.Unmarshal(last.Body, &dl); err != nil || dl.Sequence != tt.adv.StreamSeq || dl.Reason == "" {
				t.Errorf("dead letter %+v, %v", dl, err)
			}
			if tt.wantSub == "" {
				return
			}
			if out[0].Subject != tt.wantSub {
				t.Fatalf("answer to %s, want %s", out[0].Subject, tt.wantSub)
			}
			var code string
			if tt.wantSub == messages.OutputSubject("c") {
				var o messages.Output
				json.Unmarshal(out[0].Body, &o)
				if o.ResponseID != map[uint64]string{9: "r2", 11: "r3"}[tt.adv.StreamSeq] || len(o.Results) != 1 || o.Results[0].Error == nil {
					t.Fatalf("output %+v", o)
				}
				code = string(o.Results[0].Error.Code)
			} else {
				var r messages.ToolResult
				json.Unmarshal(out[0].Body, &r)
				code = "ok"
				if r.Error != nil {
					code = string(r.Error.Code)
				}
				if out[0].Meta.MsgID != call.ID {
					t.Errorf("result id %q", out[0].Meta.MsgID)
				}
			}
			if code != tt.want {
				t.Errorf("answered %s, want %s", code, tt.want)
			}
		})
	}
}
