package console_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/toolbus/toolbus/internal/console"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/telemetry"
	"github.com/toolbus/toolbus/pkg/toolbus"
)

// A redriven dead letter is shown redriven — when, as which response, and the calls of
// its output — and is not offered for a plain redrive again; the records of its
// redrives (a forced one too) are no dead letters: the console's count and the gauge
// toolbus_dead_letters (which ToolbusDeadLetters alerts on) count the one dead letter.
func TestRedriveShownAndNotCounted(t *testing.T) {
	url := bustest.Server(t)
	nc, js := bustest.Connect(t, url)
	mp, metrics, err := telemetry.NewPrometheus(nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n, err := toolbus.Start(ctx, toolbus.Options{Provision: true, Conn: nc, Config: &config.Config{}, MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); n.Wait() })
	c, _ := client.New(nc)
	con := &console.Console{NC: nc, JS: js, Client: c}
	srv := httptest.NewServer(con.Handler(token))
	defer srv.Close()
	actx, acancel := context.WithTimeout(ctx, time.Minute)
	defer acancel()

	gauge := regexp.MustCompile(`(?m)^toolbus_dead_letters(?:\{[^}]*\})? ([0-9.e+]+)$`)
	deadLetters := func() int {
		rec := httptest.NewRecorder()
		metrics.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		body, _ := io.ReadAll(rec.Body)
		m := gauge.FindSubmatch(body)
		if m == nil {
			return -1
		}
		v, _ := strconv.ParseFloat(string(m[1]), 64)
		return int(v)
	}

	call := messages.ToolCall{ID: "rd-1/r1/0", ResponseID: "r1", Conversation: "rd-1", Count: 1, Tool: "clock", Arguments: json.RawMessage(`{}`)}
	body, _ := json.Marshal(messages.DeadCall{Call: call, Result: messages.ResultFor(call).Fail(messages.Errorf(messages.CodeServerUnavailable, "down"))})
	ack, err := js.Publish(actx, messages.DeadSubject("rd-1"), body)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the gauge counts the dead letter", func() bool { return deadLetters() == 1 })

	first, err := con.Redrive(actx, ack.Sequence)
	if err != nil || len(first.Results) != 1 || !first.Results[0].Success {
		t.Fatalf("redrive: %+v %v", first, err)
	}
	letters := get[console.DeadPage](t, srv.URL+"/api/dead").Letters
	if len(letters) != 1 {
		t.Fatalf("dead letters after a redrive: %+v, want the one letter (the record is none)", letters)
	}
	d := letters[0]
	if r := d.Redrive; d.Sequence != ack.Sequence || d.Redriven != first.ResponseID || r == nil || r.ResponseID != first.ResponseID || r.Forced ||
		r.At.IsZero() || len(r.Output) != 1 || r.Output[0].Tool != "clock" || !r.Output[0].Success || r.Output[0].ResponseID != first.ResponseID {
		t.Errorf("the redriven letter: %+v (redrive %+v)", d, d.Redrive)
	}
	forced, err := con.ForceRedrive(actx, ack.Sequence)
	if err != nil {
		t.Fatal(err)
	}
	if d := get[console.DeadPage](t, srv.URL+"/api/dead?conversation=rd-1").Letters; len(d) != 1 || d[0].Redrive == nil ||
		d[0].Redrive.ResponseID != forced.ResponseID || !d[0].Redrive.Forced || len(d[0].Redrive.Output) != 1 {
		t.Errorf("after a forced redrive: %+v", d)
	}

	s, _ := js.Stream(actx, messages.StreamDead)
	info, _ := s.Info(actx)
	if info.State.Msgs != 3 {
		t.Fatalf("the dead-letter stream holds %d messages, want the letter and two records", info.State.Msgs)
	}
	if f := get[console.Flow](t, srv.URL+"/api/flow"); f.Dead != 1 {
		t.Errorf("the flow counts %d dead letters, want 1", f.Dead)
	}
	// The gauge is read at each scrape: the records are there, and it says 1.
	for range 3 {
		if got := deadLetters(); got != 1 {
			t.Fatalf("toolbus_dead_letters %d with two records of redrives, want 1", got)
		}
	}

	// A tenant's dead letters are its conversations'.
	acme, _ := json.Marshal(messages.DeadCall{Call: messages.ToolCall{ID: "acme.c1/r1/0", ResponseID: "r1", Conversation: "acme.c1", Count: 1, Tool: "clock", Arguments: json.RawMessage(`{}`)}})
	if _, err := js.Publish(actx, messages.DeadSubject("acme.c1"), acme); err != nil {
		t.Fatal(err)
	}
	if d := get[console.DeadPage](t, srv.URL+"/api/dead?tenant=acme").Letters; len(d) != 1 || d[0].Conversation != "acme.c1" {
		t.Errorf("tenant acme's dead letters: %+v", d)
	}
	if d := get[console.DeadPage](t, srv.URL+"/api/dead").Letters; len(d) != 2 {
		t.Errorf("every dead letter: %+v, want 2", d)
	}
}
