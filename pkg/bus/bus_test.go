package bus

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/messages"
)

func testJS(t *testing.T) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	return testJSIn(t, t.TempDir())
}

// testJSIn is testJS with the server's store in dir.
func testJSIn(t *testing.T, dir string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	srv, stop, err := StartEmbedded(EmbeddedOptions{StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

func TestProvisionConcurrentAndIdempotent(t *testing.T) {
	_, js := testJS(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- Provision(ctx, js, Topology{})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent provision: %v", err)
		}
	}
	// Once more, with a changed setting: an update, not an error.
	if err := Provision(ctx, js, Topology{OutputMaxAge: time.Hour}); err != nil {
		t.Fatal(err)
	}
	for _, cfg := range (Topology{}).Streams() {
		s, err := js.Stream(ctx, cfg.Name)
		if err != nil {
			t.Fatalf("stream %s: %v", cfg.Name, err)
		}
		info, _ := s.Info(ctx)
		if cfg.Name == messages.StreamOutput && info.Config.MaxAge != time.Hour {
			t.Errorf("output max age %v after update, want 1h", info.Config.MaxAge)
		}
		if cfg.Name == messages.StreamCalls && info.Config.Retention != jetstream.WorkQueuePolicy {
			t.Errorf("calls stream is not a work queue")
		}
	}
	for stream, cc := range (Topology{}).Consumers() {
		if _, err := js.Consumer(ctx, stream, cc.Durable); err != nil {
			t.Errorf("consumer %s: %v", cc.Durable, err)
		}
	}
	for _, b := range (Topology{}).Buckets() {
		if _, err := js.KeyValue(ctx, b.Bucket); err != nil {
			t.Errorf("bucket %s: %v", b.Bucket, err)
		}
	}
}

func TestConsumeAckContract(t *testing.T) {
	_, js := testJS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := Provision(ctx, js, Topology{MaxDeliver: 3}); err != nil {
		t.Fatal(err)
	}
	publish := func(body string) {
		if _, err := js.Publish(ctx, messages.CallSubject("c"), []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	publish("ok")
	publish("retry-once")
	publish("term")
	publish("panic-once")

	var mu sync.Mutex
	seen := map[string]int{}
	var done atomic.Int32
	h := func(ctx context.Context, d *Delivery) ([]Outgoing, error) {
		body := string(d.Data)
		mu.Lock()
		seen[body]++
		n := seen[body]
		mu.Unlock()
		if d.Delivered != n {
			t.Errorf("%s: delivery %d, handled %d times", body, d.Delivered, n)
		}
		out := []Outgoing{{Subject: messages.ResultSubject(body), Meta: Meta{MsgID: body}, Body: []byte(body)}}
		switch {
		case body == "retry-once" && n == 1:
			return out, Retry(errors.New("transient"), 10*time.Millisecond)
		case body == "panic-once" && n == 1:
			panic("bad input")
		case body == "term":
			done.Add(1)
			return out, errors.New("cannot answer")
		}
		done.Add(1)
		return out, nil
	}
	c, err := js.Consumer(ctx, messages.StreamCalls, messages.ConsumerExecutor)
	if err != nil {
		t.Fatal(err)
	}
	cctx, stop := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- Run(cctx, c, js, h, RunOptions{Concurrency: 2}) }()
	deadline := time.Now().Add(20 * time.Second)
	for done.Load() < 4 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // a wrongly redelivered message would show up now
	stop()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := map[string]int{"ok": 1, "retry-once": 2, "term": 1, "panic-once": 2}
	for k, v := range want {
		if seen[k] != v {
			t.Errorf("%s handled %d times, want %d (all: %v)", k, seen[k], v, seen)
		}
	}
	// Acked and terminated messages leave the work queue.
	s, _ := js.Stream(ctx, messages.StreamCalls)
	info, _ := s.Info(ctx)
	if info.State.Msgs != 0 {
		t.Errorf("%d messages left in the work queue", info.State.Msgs)
	}
	// What a handler returns is published only when it succeeded: one message each for
	// ok, retry-once and panic-once, none for term.
	results, _ := js.Stream(ctx, messages.StreamResults)
	info, _ = results.Info(ctx)
	if info.State.Msgs != 3 {
		t.Errorf("%d messages published, want 3", info.State.Msgs)
	}
	for _, body := range []string{"ok", "retry-once", "panic-once"} {
		if _, err := results.GetLastMsgForSubject(ctx, messages.ResultSubject(body)); err != nil {
			t.Errorf("%s: %v", body, err)
		}
	}
}

func TestUpdateJSONConcurrent(t *testing.T) {
	_, js := testJS(t)
	ctx := context.Background()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "t"})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := UpdateJSON(ctx, kv, "n", func(n *int) (bool, error) { *n++; return true, nil }); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	n, _, err := GetJSON[int](ctx, kv, "n")
	if err != nil || n != 20 {
		t.Fatalf("counter = %d (%v), want 20: an update was lost", n, err)
	}
}

func TestKey(t *testing.T) {
	tests := []struct {
		name, id string
		same     bool
	}{
		{"plain", "conv-1_a=b", true},
		{"call id", "resp/3", true},
		{"dots", "a.b", false},
		{"space", "a b", false},
		{"unicode", "gespräch", false},
		{"empty", "", false},
		{"leading slash", "/x", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := Key(tt.id)
			if (k == tt.id) != tt.same {
				t.Errorf("Key(%q) = %q", tt.id, k)
			}
			if Key(tt.id) != k {
				t.Error("not deterministic")
			}
		})
	}
	if Key("a.b") == Key("a b") {
		t.Error("different ids share a key")
	}
}

// A handler that outlasts AckWait keeps its message with heartbeats: it is handled once.
func TestConsumeHeartbeatKeepsSlowMessage(t *testing.T) {
	_, js := testJS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "SLOW", Subjects: []string{"slow"}, Retention: jetstream.WorkQueuePolicy})
	if err != nil {
		t.Fatal(err)
	}
	// Ten beats per AckWait: a loaded machine may delay a beat several times over
	// without the message being redelivered.
	c, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: "w", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "slow", []byte("x")); err != nil {
		t.Fatal(err)
	}
	var calls, done atomic.Int32
	h := func(ctx context.Context, d *Delivery) ([]Outgoing, error) {
		calls.Add(1)
		time.Sleep(3 * time.Second) // three times AckWait
		done.Add(1)
		return nil, nil
	}
	cctx, stop := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		errc <- Run(cctx, c, js, h, RunOptions{Concurrency: 2, Heartbeat: 100 * time.Millisecond, FetchWait: 200 * time.Millisecond})
	}()
	for done.Load() < 1 && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond) // a redelivery (after AckWait) would be handled now
	stop()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("handled %d times, want once: the heartbeats did not hold the message", n)
	}
	if info, _ := s.Info(ctx); info.State.Msgs != 0 {
		t.Errorf("%d messages left", info.State.Msgs)
	}
}

// With Prefetch, messages buffered while the handlers turn slow are kept in progress and
// handled by this replica, once each, although they wait longer than AckWait.
func TestRunPrefetchSlowHandlers(t *testing.T) {
	_, js := testJS(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "SLOWQ", Subjects: []string{"slowq"}, Retention: jetstream.WorkQueuePolicy})
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: "w", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	for i := range n {
		if _, err := js.Publish(ctx, "slowq", []byte{byte('a' + i)}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var done atomic.Int32
	h := func(ctx context.Context, d *Delivery) ([]Outgoing, error) {
		mu.Lock()
		seen[string(d.Data)]++
		mu.Unlock()
		time.Sleep(200 * time.Millisecond) // 20 messages, 2 at a time: twice AckWait in all
		done.Add(1)
		return nil, nil
	}
	cctx, stop := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		errc <- Run(cctx, c, js, h, RunOptions{Concurrency: 2, Prefetch: 32, Heartbeat: 100 * time.Millisecond})
	}()
	for done.Load() < n && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond) // a redelivery (after AckWait) would be handled now
	stop()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != n {
		t.Errorf("%d of %d messages handled", len(seen), n)
	}
	for k, v := range seen {
		if v != 1 {
			t.Errorf("message %q handled %d times", k, v)
		}
	}
	if info, _ := s.Info(ctx); info.State.Msgs != 0 {
		t.Errorf("%d messages left", info.State.Msgs)
	}
}

// OnPublished runs after the handler's messages are stored and before the ack; its
// error hands the delivery back, and the next delivery's publish is de-duplicated.
func TestRunOnPublished(t *testing.T) {
	_, js := testJS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := Provision(ctx, js, Topology{}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, messages.CallSubject("c"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	results, _ := js.Stream(ctx, messages.StreamResults)
	var hooks atomic.Int32
	stored := make(chan uint64, 4)
	h := func(ctx context.Context, d *Delivery) ([]Outgoing, error) {
		d.OnPublished(func(ctx context.Context) error {
			info, err := results.Info(ctx)
			if err != nil {
				return err
			}
			stored <- info.State.Msgs
			if hooks.Add(1) == 1 {
				return errors.New("clean-up failed")
			}
			return nil
		})
		return []Outgoing{{Subject: messages.ResultSubject("c"), Meta: Meta{MsgID: "once"}, Body: []byte("r")}}, nil
	}
	c, err := js.Consumer(ctx, messages.StreamCalls, messages.ConsumerExecutor)
	if err != nil {
		t.Fatal(err)
	}
	cctx, stop := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- Run(cctx, c, js, h, RunOptions{PublishRetryDelay: 10 * time.Millisecond}) }()
	for range 2 {
		select {
		case n := <-stored:
			if n != 1 {
				t.Errorf("the hook ran with %d messages stored, want 1 (after the publish, de-duplicated)", n)
			}
		case <-ctx.Done():
			t.Fatal("the hook did not run twice: a failing hook must hand the delivery back")
		}
	}
	time.Sleep(200 * time.Millisecond) // a third run would show now
	stop()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if n := hooks.Load(); n != 2 {
		t.Errorf("hook ran %d times, want 2", n)
	}
	if info, _ := js.Stream(ctx, messages.StreamCalls); info != nil {
		if st, _ := info.Info(ctx); st.State.Msgs != 0 {
			t.Errorf("%d calls left: the second delivery was not acked", st.State.Msgs)
		}
	}
}

// A work queue whose messages come one after another does not drain between them: the
// runner holds the newest acknowledgement until the next message is handled. Drained,
// nats-server's file store deletes the stream's last block and creates a new one for
// the next message (an unlink, an open and a tombstone per message: 15% of toolbus's
// CPU on a busy pipeline). The block files are counted by their index, which grows by
// one per block. Once the messages stop, the held acknowledgement goes too: nothing is
// left in the queue.
func TestRunKeepsABusyQueue(t *testing.T) {
	for _, tc := range []struct {
		name      string
		hold      time.Duration
		pending   int // acknowledgements held between messages
		maxBlocks int // the highest block index allowed
	}{
		// A hold far longer than the test's steps, so that a slow machine cannot
		// make it expire between two messages.
		{"held", 2 * time.Second, 1, 3},
		{"at once", -1, 0, 1 << 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			nc, js := testJSIn(t, dir)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := Provision(ctx, js, Topology{}); err != nil {
				t.Fatal(err)
			}
			results, err := nc.SubscribeSync(messages.AllResults)
			if err != nil {
				t.Fatal(err)
			}
			c, err := js.Consumer(ctx, messages.StreamCalls, messages.ConsumerExecutor)
			if err != nil {
				t.Fatal(err)
			}
			h := func(ctx context.Context, d *Delivery) ([]Outgoing, error) {
				return []Outgoing{{Subject: messages.ResultSubject("c"), Meta: Meta{MsgID: string(d.Data)}, Body: d.Data}}, nil
			}
			rctx, stopRun := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { defer close(done); Run(rctx, c, js, h, RunOptions{Concurrency: 4, AckHold: tc.hold}) }()
			defer func() { stopRun(); <-done }()

			const n = 40
			for i := range n {
				body := fmt.Sprint("m", i)
				if _, err := js.Publish(ctx, messages.CallSubject("c"), []byte(body)); err != nil {
					t.Fatal(err)
				}
				m, err := results.NextMsg(10 * time.Second)
				if err != nil || string(m.Data) != body {
					t.Fatalf("result of %s: %v", body, err)
				}
				// The next message comes once this one's acknowledgement is in, or
				// held: acknowledged at once, the queue drains between messages.
				for {
					info, err := c.Info(ctx)
					if err != nil {
						t.Fatal(err)
					}
					if info.NumAckPending <= tc.pending {
						break
					}
					time.Sleep(time.Millisecond)
				}
			}
			blocks, err := filepath.Glob(filepath.Join(dir, "jetstream", "$G", "streams", messages.StreamCalls, "msgs", "*.blk"))
			if err != nil || len(blocks) == 0 {
				t.Fatalf("no block files of %s in the store: %v", messages.StreamCalls, err)
			}
			highest := 0
			for _, b := range blocks {
				i, err := strconv.Atoi(strings.TrimSuffix(filepath.Base(b), ".blk"))
				if err != nil {
					t.Fatal(err)
				}
				highest = max(highest, i)
			}
			t.Logf("%d messages one after another: last block %d", n, highest)
			if highest > tc.maxBlocks {
				t.Errorf("%d messages one after another went through %d blocks of the work queue", n, highest)
			}
			if tc.maxBlocks > n {
				if highest < n/2 {
					t.Errorf("acknowledged at once, %d messages went through only %d blocks: the test no longer sees the file store drain", n, highest)
				}
			}
			s, err := js.Stream(ctx, messages.StreamCalls)
			if err != nil {
				t.Fatal(err)
			}
			for {
				info, err := s.Info(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if info.State.Msgs == 0 {
					break
				}
				select {
				case <-ctx.Done():
					t.Fatalf("%d messages left in the work queue", info.State.Msgs)
				case <-time.After(10 * time.Millisecond):
				}
			}
		})
	}
}

// How long the acker may hold an ack, by the runner's options and the consumer's limits.
func TestAckHold(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    RunOptions
		cfg  jetstream.ConsumerConfig
		want time.Duration
	}{
		{"default", RunOptions{Concurrency: 16}, jetstream.ConsumerConfig{AckWait: 30 * time.Second, MaxAckPending: 1024}, 20 * time.Millisecond},
		{"set", RunOptions{Concurrency: 16, AckHold: time.Second}, jetstream.ConsumerConfig{AckWait: 30 * time.Second, MaxAckPending: 1024}, time.Second},
		{"a tenth of AckWait at most", RunOptions{Concurrency: 16}, jetstream.ConsumerConfig{AckWait: 100 * time.Millisecond, MaxAckPending: 1024}, 10 * time.Millisecond},
		{"off", RunOptions{Concurrency: 16, AckHold: -1}, jetstream.ConsumerConfig{AckWait: 30 * time.Second, MaxAckPending: 1024}, 0},
		// A held message would take the slot the next delivery needs.
		{"MaxAckPending 1", RunOptions{}, jetstream.ConsumerConfig{AckWait: 30 * time.Second, MaxAckPending: 1}, 0},
		{"MaxAckPending = Concurrency", RunOptions{Concurrency: 16}, jetstream.ConsumerConfig{AckWait: 30 * time.Second, MaxAckPending: 16}, 0},
		{"MaxAckPending above Concurrency", RunOptions{Concurrency: 16}, jetstream.ConsumerConfig{AckWait: 30 * time.Second, MaxAckPending: 17}, 20 * time.Millisecond},
		{"MaxAckPending unlimited", RunOptions{Concurrency: 16}, jetstream.ConsumerConfig{AckWait: 30 * time.Second, MaxAckPending: -1}, 20 * time.Millisecond},
	} {
		if got := ackHold(tc.o, tc.cfg); got != tc.want {
			t.Errorf("%s: hold %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A connection's inbox prefix is its URL's user's: the first URL that names one, NATS's
// default without a user, or with one no subject can carry.
func TestUserInbox(t *testing.T) {
	srv, stop, err := StartEmbedded(EmbeddedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	for urls, want := range map[string]string{
		"nats://executor:pw@h1:4222,nats://executor:pw@h2:4222": "_INBOX.executor.",
		"nats://h1:4222,nats://acme:pw@h2:4222":                 "_INBOX.acme.",
		"nats://h1:4222":                                        "_INBOX.",
		"nats://a%20b:pw@h1:4222":                               "_INBOX.",
		"nats://a.*:pw@h1:4222":                                 "_INBOX.",
	} {
		nc, err := nats.Connect(srv.ClientURL(), UserInbox(urls))
		if err != nil {
			t.Fatalf("%s: %v", urls, err)
		}
		inbox := nc.NewInbox()
		nc.Close()
		if !strings.HasPrefix(inbox, want) || strings.Count(inbox, ".") != strings.Count(want, ".") {
			t.Errorf("%s: inbox %s, want under %s", urls, inbox, want)
		}
	}
}
