package bus_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/parser"
)

// A response or chunk nobody can route — a conversation of a tenant the parser does not
// serve ("a.b"), one with a byte no conversation may have, a chunk naming no response —
// is dead-lettered and its sender told so, on its tenant's rejection subject
// (messages.RejectedSubject), the one it may subscribe to.
func TestUnroutableMessagesAreRejectedToTheirSender(t *testing.T) {
	nc, js := bustest.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Tenant a's streams are provisioned, but the parser's configuration no longer
	// serves it.
	if err := bus.Provision(ctx, js, bus.Topology{Memory: true, Tenants: []bus.Tenant{{Name: "a"}}}); err != nil {
		t.Fatal(err)
	}
	p := &parser.Stage{Serves: bus.Topology{}.Serves}
	for _, stream := range []string{messages.ResponseStream(""), messages.ResponseStream("a")} {
		bustest.RunStage(t, js, stream, messages.ConsumerParser, p.Parse, bus.RunOptions{})
	}
	bustest.RunStage(t, js, messages.ChunkStream(""), messages.ConsumerParser, p.Chunk, bus.RunOptions{})
	rejected, err := nc.SubscribeSync(messages.AllRejected)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		subject, responseID, wantRejected, wantReason string
	}{
		{subject: "toolbus.responses.a.b", responseID: "r1", wantRejected: "toolbus.rejected.a", wantReason: `serves no tenant "a"`},
		{subject: "toolbus.responses.x+y", responseID: "r2", wantRejected: "toolbus.rejected._", wantReason: `"x+y"`},
		{subject: "toolbus.stream.c1", wantRejected: "toolbus.rejected._", wantReason: "no " + messages.HeaderResponseID},
	}
	want := map[string]bool{}
	for _, tt := range tests {
		if got := messages.RejectedSubject(tt.subject); got != tt.wantRejected {
			t.Errorf("RejectedSubject(%s) = %q, want %q", tt.subject, got, tt.wantRejected)
		}
		bustest.Publish(t, js, tt.subject, bus.Meta{ResponseID: tt.responseID}, []byte("hello"))
		want[tt.subject] = true
	}
	for range tests {
		msg, err := rejected.NextMsgWithContext(ctx)
		if err != nil {
			t.Fatalf("rejections still missing: %v", want)
		}
		var dl messages.DeadLetter
		if err := json.Unmarshal(msg.Data, &dl); err != nil {
			t.Fatal(err)
		}
		var tt = tests[0]
		for _, c := range tests {
			if c.subject == dl.Subject {
				tt = c
			}
		}
		if !want[dl.Subject] || msg.Subject != tt.wantRejected || !strings.Contains(dl.Reason, tt.wantReason) ||
			msg.Header.Get(messages.HeaderResponseID) != tt.responseID || dl.Text != "hello" {
			t.Errorf("rejection on %s of %s (response %q): %q; want it on %s saying %q", msg.Subject, dl.Subject,
				msg.Header.Get(messages.HeaderResponseID), dl.Reason, tt.wantRejected, tt.wantReason)
		}
		delete(want, dl.Subject)
	}
	// Each is kept in the dead-letter stream too.
	dead, err := js.Stream(ctx, messages.StreamDead)
	if err != nil {
		t.Fatal(err)
	}
	for {
		info, err := dead.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs == uint64(len(tests)) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the dead-letter stream holds %d messages, want %d", info.State.Msgs, len(tests))
		case <-time.After(20 * time.Millisecond):
		}
	}
	// A subject no orchestrator publishes on has no rejection subject.
	for _, s := range []string{messages.CallSubject("c1"), messages.ResultSubject("c1"), "$JS.EVENT.ADVISORY.x"} {
		if got := messages.RejectedSubject(s); got != "" {
			t.Errorf("RejectedSubject(%s) = %q, want none", s, got)
		}
	}
}
