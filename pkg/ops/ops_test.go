package ops_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/ops"
)

func natsConn(t *testing.T, provision bool) (*server.Server, *nats.Conn) {
	t.Helper()
	srv, stop, err := bus.StartEmbedded(bus.EmbeddedOptions{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	nc, err := nats.Connect(srv.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if provision {
		js, _ := jetstream.New(nc)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := bus.Provision(ctx, js, bus.Topology{Memory: true}); err != nil {
			t.Fatal(err)
		}
	}
	return srv, nc
}

// run starts srv until the test ends.
func run(t *testing.T, srv *ops.Server) context.CancelFunc {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

func get(t *testing.T, url string) (int, ops.Readiness) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rd ops.Readiness
	_ = json.NewDecoder(resp.Body).Decode(&rd)
	return resp.StatusCode, rd
}

func TestReadiness(t *testing.T) {
	tests := []struct {
		name      string
		provision bool
		opts      ops.Options
		check     error
		stopNATS  bool
		wantErr   string // the failed check, "" when ready
	}{
		{name: "ready", provision: true},
		{name: "streams missing", wantErr: "jetstream"},
		{name: "a stream of its own missing", provision: true, opts: ops.Options{Streams: []string{"NOPE"}}, wantErr: "jetstream"},
		{name: "nothing required", opts: ops.Options{Streams: []string{}, Buckets: []string{}}},
		{name: "config not loaded", provision: true, check: errors.New("config: no such file"), wantErr: "config"},
		{name: "NATS away", provision: true, stopNATS: true, wantErr: "nats"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns, nc := natsConn(t, tt.provision)
			o := tt.opts
			o.Addr = "127.0.0.1:0"
			srv, err := ops.New(nc, &o)
			if err != nil {
				t.Fatal(err)
			}
			srv.AddCheck("config", func(context.Context) error { return tt.check })
			run(t, srv)
			if tt.stopNATS {
				ns.Shutdown()
				ns.WaitForShutdown()
			}
			base := "http://" + srv.Addr()
			if code, _ := get(t, base+"/healthz"); code != http.StatusOK {
				t.Errorf("/healthz: %d", code)
			}
			code, rd := get(t, base+"/readyz")
			if tt.wantErr == "" {
				if code != http.StatusOK || !rd.Ready {
					t.Fatalf("/readyz: %d %+v", code, rd)
				}
				return
			}
			if code != http.StatusServiceUnavailable || rd.Ready {
				t.Fatalf("/readyz: %d %+v, want 503", code, rd)
			}
			for _, c := range rd.Checks {
				if c.Name == tt.wantErr && (c.OK || c.Error == "") {
					t.Errorf("check %s: %+v", c.Name, c)
				}
			}
		})
	}
}

func TestMicro(t *testing.T) {
	_, nc := natsConn(t, true)
	srv, err := ops.New(nc, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Two replicas of the executor stage in one process, one of the parser.
	var stages []*ops.Stage
	for _, name := range []string{"executor", "executor", "parser"} {
		st, err := srv.AddStage(name, "")
		if err != nil {
			t.Fatal(err)
		}
		stages = append(stages, st)
	}
	stop := run(t, srv)

	handler := stages[0].Wrap(func(ctx context.Context, d *bus.Delivery) ([]bus.Outgoing, error) {
		time.Sleep(time.Millisecond)
		if ctx.Value(failKey{}) != nil {
			return nil, bus.Retry(errors.New("the server is away"), time.Second)
		}
		return nil, nil
	})
	for _, fail := range []bool{false, true, false} {
		ctx := context.Background()
		if fail {
			ctx = context.WithValue(ctx, failKey{}, true)
		}
		_, _ = handler(ctx, &bus.Delivery{})
	}

	// nats micro ls: every replica answers PING with its own id.
	ids := map[string]bool{}
	for _, data := range requestMany(t, nc, "$SRV.PING.toolbus-executor", 2) {
		var p micro.Ping
		if err := json.Unmarshal(data, &p); err != nil {
			t.Fatal(err)
		}
		ids[p.ID] = true
	}
	if len(ids) != 2 || !ids[stages[0].ID()] || !ids[stages[1].ID()] {
		t.Errorf("executor replicas answering PING: %v", ids)
	}

	// nats micro stats: the stage's counts are the status endpoint's data.
	subject, _ := micro.ControlSubject(micro.StatsVerb, "toolbus-executor", stages[0].ID())
	msg, err := nc.Request(subject, nil, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var stats micro.Stats
	if err := json.Unmarshal(msg.Data, &stats); err != nil {
		t.Fatal(err)
	}
	if len(stats.Endpoints) != 1 || stats.Endpoints[0].Name != "status" || stats.Metadata["stage"] != "executor" {
		t.Fatalf("stats %+v", stats)
	}
	var data ops.StageStats
	if err := json.Unmarshal(stats.Endpoints[0].Data, &data); err != nil {
		t.Fatal(err)
	}
	if data.Handled != 3 || data.Errors != 1 || !strings.Contains(data.LastError, "away") || data.AverageProcessingTime < time.Millisecond || data.InFlight != 0 {
		t.Errorf("stage stats %+v", data)
	}

	// The status endpoint: every replica of the stage answers.
	replies := requestMany(t, nc, messages.StatusSubject("executor"), 2)
	if len(replies) != 2 {
		t.Fatalf("%d executor replicas answered the status request", len(replies))
	}
	for _, data := range replies {
		var r ops.StatusReply
		if err := json.Unmarshal(data, &r); err != nil {
			t.Fatal(err)
		}
		if !r.Ready.Ready || r.Stage != "executor" {
			t.Errorf("status %+v", r)
		}
		if r.ID == stages[0].ID() && r.Stats.Handled != 3 {
			t.Errorf("status of the busy replica: %+v", r.Stats)
		}
	}

	// Stopping deregisters the services.
	stop()
	if got := requestMany(t, nc, "$SRV.PING", 0); len(got) != 0 {
		t.Errorf("%d services still answer after Run returned", len(got))
	}
}

type failKey struct{}

// requestMany publishes a request on subject and returns every reply: want of them,
// and any more that come soon after.
func requestMany(t *testing.T, nc *nats.Conn, subject string, want int) [][]byte {
	t.Helper()
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.PublishRequest(subject, inbox, nil); err != nil {
		t.Fatal(err)
	}
	// The replies wanted may come late on a busy machine: up to 30 s (a bound on a
	// hang) for them, then 300 ms for any more.
	var out [][]byte
	deadline := time.Now().Add(30 * time.Second)
	for {
		wait := 300 * time.Millisecond
		if len(out) < want {
			wait = time.Until(deadline)
		}
		msg, err := sub.NextMsg(max(wait, time.Millisecond))
		if err != nil {
			return out
		}
		out = append(out, msg.Data)
	}
}

// The conversations' sessions of a process are counted once: only its first executor
// replica's status reply carries them.
func TestStatusCarriesSessionsOnce(t *testing.T) {
	_, nc := natsConn(t, true)
	srv, err := ops.New(nc, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := srv.AddStage("executor", ""); err != nil {
			t.Fatal(err)
		}
	}
	srv.SetSessions(func() map[string]int { return map[string]int{"git": 3} })
	run(t, srv)
	replies := requestMany(t, nc, messages.StatusSubject("executor"), 2)
	if len(replies) != 2 {
		t.Fatalf("%d executor replicas answered", len(replies))
	}
	total := 0
	for _, data := range replies {
		var r ops.StatusReply
		if err := json.Unmarshal(data, &r); err != nil {
			t.Fatal(err)
		}
		total += r.Sessions["git"]
	}
	if total != 3 {
		t.Errorf("the replies count %d sessions of git, want 3 (once)", total)
	}
}
