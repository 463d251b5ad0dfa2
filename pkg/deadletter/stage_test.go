package deadletter

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/claims"
	"github.com/toolbus/toolbus/pkg/messages"
)

// A call and a response that no replica ever finishes (here: every delivery is handed
// back, as by a service that crashes on them) are answered by the dead-letter handler
// after MaxDeliver, copied to the dead-letter stream and removed from their work queues.
func TestDeadLetters(t *testing.T) {
	nc, js := bustest.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := bus.Provision(ctx, js, bus.Topology{MaxDeliver: 2}); err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, messages.BucketCalls)
	if err != nil {
		t.Fatal(err)
	}
	calls := claims.KV{KV: kv, Owner: "test"}
	stage := &Stage{Messages: Streams{JS: js}, Claims: calls, RetryDelay: 10 * time.Millisecond}
	bustest.RunStage(t, js, messages.StreamAdvisories, messages.ConsumerDeadLetter, bus.Decoded(Decode, stage.Handle), bus.RunOptions{})

	results, _ := nc.SubscribeSync(messages.AllResults)
	outputs, _ := nc.SubscribeSync(messages.AllOutputs)

	// A call that was started (claimed) and a response, each delivered until MaxDeliver
	// and handed back every time.
	call := messages.ToolCall{ID: "r1/0", ResponseID: "r1", Conversation: "c", Count: 1, Tool: "create_ticket", Arguments: json.RawMessage(`{}`)}
	body, _ := json.Marshal(call)
	bustest.Publish(t, js, messages.CallSubject("c"), bus.Meta{ResponseID: "r1", Conversation: "c", Count: 1, MsgID: call.ID}, body)
	if _, err := calls.Begin(ctx, call.ID, ""); err != nil {
		t.Fatal(err)
	}
	bustest.Publish(t, js, messages.ResponseSubject("c"), bus.Meta{ResponseID: "r2", Conversation: "c", MsgID: "r2"}, []byte(`<tool_call>{"name": "x"}</tool_call>`))
	for _, sc := range [][2]string{{messages.StreamCalls, messages.ConsumerExecutor}, {messages.StreamResponses, messages.ConsumerParser}} {
		cons, err := js.Consumer(ctx, sc[0], sc[1])
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for m := range batch.Messages() {
				m.Nak()
				n++
			}
			if n != 1 {
				t.Fatalf("%s: fetched %d messages, want 1", sc[0], n)
			}
		}
		// The server notices the exhausted message when it next looks for one to deliver.
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(500*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			t.Fatalf("%s: delivered beyond MaxDeliver: %s", sc[0], m.Data())
		}
	}

	m, err := results.NextMsg(20 * time.Second)
	if err != nil {
		t.Fatal("no final result for the lost call:", err)
	}
	var res messages.ToolResult
	json.Unmarshal(m.Data, &res)
	if res.CallID != "r1/0" || res.Success || res.Error.Code != messages.CodeOutcomeUnknown || m.Header.Get(messages.HeaderMsgID) != "r1/0" {
		t.Errorf("result %+v %+v", res, res.Error)
	}
	m, err = outputs.NextMsg(20 * time.Second)
	if err != nil {
		t.Fatal("no output for the lost response:", err)
	}
	var out messages.Output
	json.Unmarshal(m.Data, &out)
	if out.ResponseID != "r2" || len(out.Results) != 1 || out.Results[0].Error.Code != messages.CodeInternal {
		t.Errorf("output %+v", out)
	}

	// Both moved aside: gone from their work queues, kept in the dead-letter stream.
	deadline := time.Now().Add(10 * time.Second)
	for {
		dead := msgs(ctx, t, js, messages.StreamDead)
		if dead == 2 && msgs(ctx, t, js, messages.StreamCalls) == 0 && msgs(ctx, t, js, messages.StreamResponses) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dead %d, calls %d, responses %d", dead, msgs(ctx, t, js, messages.StreamCalls), msgs(ctx, t, js, messages.StreamResponses))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func msgs(ctx context.Context, t *testing.T, js jetstream.JetStream, stream string) uint64 {
	t.Helper()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}
