package toolbus_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/toolbus/toolbus/internal/cli"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/policy"
	"github.com/toolbus/toolbus/pkg/toolbus"
)

// ledger is a Go tool "transfer" with a side effect: each run is recorded, in order.
type ledger struct {
	mu   sync.Mutex
	runs []int
}

func (l *ledger) registry(t *testing.T) *localtools.Registry {
	t.Helper()
	reg := localtools.New()
	type args struct {
		Amount int `json:"amount"`
	}
	if err := localtools.AddFunc(reg, messages.ToolInfo{Name: "transfer"}, func(_ context.Context, a args) (string, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.runs = append(l.runs, a.Amount)
		return fmt.Sprintf("sent %d", a.Amount), nil
	}); err != nil {
		t.Fatal(err)
	}
	return reg
}

func (l *ledger) ran() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]int(nil), l.runs...)
}

// toolbusCmd runs the toolbus command line against the NATS server at url.
func toolbusCmd(t *testing.T, url string, args ...string) (string, error) {
	t.Helper()
	var out, errs bytes.Buffer
	env := cli.Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errs, Getenv: func(k string) string {
		if k == "TOOLBUS_NATS_URL" {
			return url
		}
		return ""
	}}
	if code := cli.Main(context.Background(), args, env); code != 0 {
		return out.String(), fmt.Errorf("toolbus %s: exit %d: %s", strings.Join(args, " "), code, errs.String())
	}
	return out.String(), nil
}

// An "approve" rule: the call waits, announced on the conversation's approvals subject,
// while the calls before it run and the ones after it wait their turn; it survives the
// executor stopping and another starting; `toolbus approve` runs it once. `toolbus
// deny` refuses another with its reason, and a third nobody decides is refused at the
// rule's timeout. None of the refused ones runs.
func TestApprovalFlow(t *testing.T) {
	t.Parallel()
	url := bustest.Server(t)
	connect := func(name string) *nats.Conn { nc, _ := bustest.Connect(t, url, nats.Name(name)); return nc }
	var l ledger
	cfg := mcpConfig(t, `{"policy": {"rules": [
		{"name": "huge-transfers", "tools": ["transfer"], "when": "args.amount >= 1000", "effect": "approve", "timeout": "2s"},
		{"name": "big-transfers", "tools": ["transfer"], "when": "args.amount > 100", "effect": "approve", "timeout": "10m"}
	]}}`)
	o := toolbus.Options{Config: cfg, Tools: l.registry(t)}
	startEach(t, connect, o, toolbus.Parser, toolbus.Formatter)
	startExecutor := func() (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		o := o
		o.Services, o.Conn, o.Provision = []string{toolbus.Executor}, connect("executor"), true
		n, err := toolbus.Start(ctx, o)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		var once sync.Once
		stop = func() { once.Do(func() { cancel(); n.Wait() }) }
		t.Cleanup(stop)
		return stop
	}
	stopFirst := startExecutor()

	watch := connect("watcher")
	requests, err := watch.SubscribeSync(messages.AllApprovals)
	if err != nil {
		t.Fatal(err)
	}
	nextRequest := func() messages.ApprovalRequest {
		t.Helper()
		m, err := requests.NextMsg(30 * time.Second)
		if err != nil {
			t.Fatalf("no approval request announced: %v", err)
		}
		var req messages.ApprovalRequest
		if err := json.Unmarshal(m.Data, &req); err != nil {
			t.Fatal(err)
		}
		if m.Subject != messages.ApprovalSubject(req.Conversation) {
			t.Errorf("request for %s announced on %s", req.Conversation, m.Subject)
		}
		return req
	}
	c, err := client.New(connect("orchestrator"))
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		out *messages.Output
		err error
	}
	ask := func(conv string, amounts ...int) <-chan answer {
		var text strings.Builder
		for _, a := range amounts {
			fmt.Fprintf(&text, `<tool_call>{"name": "transfer", "arguments": {"amount": %d}}</tool_call>`+"\n", a)
		}
		done := make(chan answer, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a bound on a hang
			defer cancel()
			out, err := c.Ask(ctx, conv, text.String(), nil)
			done <- answer{out, err}
		}()
		return done
	}
	results := func(a <-chan answer, n int) []messages.OutputResult {
		t.Helper()
		got := <-a
		if got.err != nil {
			t.Fatal(got.err)
		}
		if len(got.out.Results) != n {
			t.Fatalf("%d results, want %d: %s", len(got.out.Results), n, got.out.Text)
		}
		return got.out.Results
	}

	// The orchestrator is told, too.
	told := make(chan messages.ApprovalRequest, 4)
	if _, err := c.OnApproval("payments", func(r messages.ApprovalRequest) { told <- r }); err != nil {
		t.Fatal(err)
	}

	// Approved after a restart: the calls before it ran, the one after it waited.
	first := ask("payments", 10, 500, 20)
	req := nextRequest()
	select {
	case r := <-told:
		if r.ID != req.ID {
			t.Errorf("the orchestrator was told of %s, not %s", r.ID, req.ID)
		}
	case <-time.After(30 * time.Second):
		t.Error("the orchestrator was not told (client.OnApproval)")
	}
	if req.Tool != "transfer" || req.Rule != "big-transfers" || req.Conversation != "payments" ||
		req.ArgumentsSHA256 != policy.ArgumentsHash(json.RawMessage(`{"amount":500}`)) || string(req.Arguments) != `{"amount":500}` ||
		req.ID != policy.ApprovalID(req.CallID) || req.Deadline.Sub(req.RequestedAt) != 10*time.Minute {
		t.Errorf("request: %+v", req)
	}
	listed, err := toolbusCmd(t, url, "approvals", "ls")
	if err != nil || !strings.Contains(listed, req.ID) || !strings.Contains(listed, "pending") || !strings.Contains(listed, `{"amount":500}`) {
		t.Errorf("approvals ls: %v\n%s", err, listed)
	}
	time.Sleep(300 * time.Millisecond) // what ran before the approval has run by now, and nothing after it
	if got := l.ran(); len(got) != 1 || got[0] != 10 {
		t.Fatalf("before the approval, ran %v; want [10]", got)
	}
	stopFirst()
	startExecutor()
	if _, err := toolbusCmd(t, url, "approve", req.ID); err != nil {
		t.Fatal(err)
	}
	res := results(first, 3)
	for i, r := range res {
		ran(t, fmt.Sprint("call ", i), r)
	}
	if got := l.ran(); fmt.Sprint(got) != "[10 500 20]" {
		t.Errorf("ran %v, want [10 500 20]: the approved call once, in its place", got)
	}
	if _, err := toolbusCmd(t, url, "approve", req.ID); err == nil || !strings.Contains(err.Error(), "decided already: approved by anonymous") {
		t.Errorf("approving twice: %v", err)
	}

	// Denied, with the reason the model reads.
	second := ask("payments", 700)
	req = nextRequest()
	if _, err := toolbusCmd(t, url, "deny", "--reason", "over the weekly budget", req.ID); err != nil {
		t.Fatal(err)
	}
	refused(t, "denied", results(second, 1)[0], `the call to "transfer" was denied by anonymous (the rule "big-transfers" asks a person to approve it): over the weekly budget`)

	// Nobody decides: refused at the rule's timeout.
	third := ask("payments", 5000)
	req = nextRequest()
	if req.Rule != "huge-transfers" {
		t.Errorf("request by rule %q", req.Rule)
	}
	refused(t, "expired", results(third, 1)[0], `the rule "huge-transfers" asks a person to approve it, and nobody decided within 2s`)
	if got := l.ran(); fmt.Sprint(got) != "[10 500 20]" {
		t.Errorf("ran %v: a refused call ran", got)
	}
	all, err := toolbusCmd(t, url, "approvals", "--all", "--json")
	var recs []messages.Approval
	if err != nil || json.Unmarshal([]byte(all), &recs) != nil || len(recs) != 3 {
		t.Fatalf("approvals --all: %v\n%s", err, all)
	}
	for i, want := range []string{messages.ApprovalApproved, messages.ApprovalDenied, messages.ApprovalExpired} {
		if recs[i].State != want || !recs[i].Requeued || recs[i].Call.ID != "" {
			t.Errorf("record %d: state %s requeued %v call %q; want %s, requeued, no call printed", i, recs[i].State, recs[i].Requeued, recs[i].Call.ID, want)
		}
	}
}

// An approval holds for the policy it was asked under: once the rules change (a
// reload), a call approved under the old ones is asked about again, under the new
// revision, and runs only when that is approved.
func TestApprovalAskedAgainWhenThePolicyChanges(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "toolbus.json")
	write := func(body string) {
		if err := os.WriteFile(path+".tmp", []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	rule := `{"name": "big-transfers", "tools": ["transfer"], "when": "args.amount > 100", "effect": "approve", "timeout": "10m"}`
	write(`{"policy": {"rules": [` + rule + `]}}`)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	url := bustest.Server(t)
	nc, _ := bustest.Connect(t, url)
	var l ledger
	ctx, cancel := context.WithCancel(context.Background())
	tb, err := toolbus.Start(ctx, toolbus.Options{Provision: true, Conn: nc, Config: cfg, Tools: l.registry(t),
		Services: []string{toolbus.Parser, toolbus.Executor, toolbus.Formatter}})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); tb.Wait() })
	watch, _ := bustest.Connect(t, url)
	requests, err := watch.SubscribeSync(messages.AllApprovals)
	if err != nil {
		t.Fatal(err)
	}
	next := func() messages.ApprovalRequest {
		t.Helper()
		m, err := requests.NextMsg(30 * time.Second)
		if err != nil {
			t.Fatalf("no approval request: %v", err)
		}
		var req messages.ApprovalRequest
		if err := json.Unmarshal(m.Data, &req); err != nil {
			t.Fatal(err)
		}
		return req
	}
	onc, _ := bustest.Connect(t, url)
	c, err := client.New(onc)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan []messages.OutputResult, 1)
	go func() {
		done <- askResponse(t, c, "payments", mcpCall{Name: "transfer", Arguments: map[string]any{"amount": 500}})
	}()
	first := next()

	// The same rule with another timeout, and clock denied: a new revision, applied
	// once clock is refused.
	write(`{"policy": {"rules": [` + strings.Replace(rule, `"10m"`, `"20m"`, 1) + `, {"name": "no-clock", "tools": ["clock"], "effect": "deny"}]}}`)
	tb.Reload()
	for deadline := time.Now().Add(45 * time.Second); askResponse(t, c, "probe", mcpCall{Name: "clock"})[0].Success; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the new rules were not applied")
		}
	}
	if _, err := toolbusCmd(t, url, "approve", first.ID); err != nil {
		t.Fatal(err)
	}
	again := next()
	if again.ID != first.ID || again.Revision == first.Revision || again.Deadline.Sub(again.RequestedAt) != 20*time.Minute {
		t.Errorf("asked again: %+v; first %+v", again, first)
	}
	if got := l.ran(); len(got) != 0 {
		t.Fatalf("ran %v on an approval of the old rules", got)
	}
	if _, err := toolbusCmd(t, url, "approve", again.ID); err != nil {
		t.Fatal(err)
	}
	ran(t, "approved under the new rules", (<-done)[0])
	if got := l.ran(); fmt.Sprint(got) != "[500]" {
		t.Errorf("ran %v, want [500]", got)
	}
}

// Approvals through executor processes killed with SIGKILL every 400 ms: the first call
// of each of 16 responses (200 with TOOLBUS_LONG) waits for a person (the test,
// approving through the bucket as `toolbus approve` does, while the kills go on); every
// call is answered, none refused, none run twice, and the second call of each response
// runs only after the approved first.
func TestApprovalThroughExecutorKills(t *testing.T) {
	t.Parallel()
	r := newFaultRig(t)
	body, err := os.ReadFile(r.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	body = []byte(strings.Replace(string(body), `"executor":`, `"policy": {"rules": [{"name": "first-asks", "tools": ["count_effect"], "when": "args.id.endsWith('-0')", "effect": "approve"}]},
		"executor":`, 1))
	if err := os.WriteFile(r.cfgPath, body, 0o644); err != nil {
		t.Fatal(err)
	}
	if r.cfg, err = config.Load(r.cfgPath); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := r.pipeline(ctx)
	k := startKilling(t, 2, 400*time.Millisecond, func(i int) *exec.Cmd { return r.startExecutor(fmt.Sprintf("executor-%d", i)) })

	responses := 16
	if long() {
		responses = 200
	}
	_, js := bustest.Connect(t, r.url)
	kv, err := js.KeyValue(ctx, messages.BucketApprovals)
	if err != nil {
		t.Fatal(err)
	}
	approvals := &policy.Approvals{KV: kv}
	approved := map[string]bool{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for len(approved) < responses && ctx.Err() == nil {
			list, err := approvals.List(ctx)
			if err != nil {
				continue
			}
			for _, rec := range list {
				if rec.State == messages.ApprovalPending && !approved[rec.ID] {
					if _, err := approvals.Decide(ctx, rec.ID, true, "tester", ""); err == nil {
						approved[rec.ID] = true
					}
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	results := askAll(ctx, t, c, "ask", responses)
	kills := k.stop()
	<-done
	time.Sleep(200 * time.Millisecond) // orphaned tool processes of killed executors may still be writing
	unknown := checkEffects(t, 2*responses, results, r.effects())
	t.Logf("%d calls, %d approved, %d executor kills, %d answered outcome_unknown", 2*responses, len(approved), kills, unknown)
	if len(approved) != responses {
		t.Errorf("%d calls approved, want %d", len(approved), responses)
	}
	if kills == 0 {
		t.Error("no executor was killed; the test proved nothing")
	}
}

// An approver sees everything that runs: a call whose arguments hold a 17 KB memo and,
// after it, the payee, is announced and shown whole — the payee included, nothing marked
// cut — by the request, `toolbus approvals show` and `toolbus approvals ls` (which marks
// where it shortens); a decision names the digest of exactly those arguments.
func TestApprovalShowsWholeArguments(t *testing.T) {
	t.Parallel()
	url := bustest.Server(t)
	nc, _ := bustest.Connect(t, url)
	reg := localtools.New()
	type args struct {
		Memo string `json:"memo"`
		To   string `json:"to"`
	}
	var paid sync.Map
	if err := localtools.AddFunc(reg, messages.ToolInfo{Name: "pay"}, func(_ context.Context, a args) (string, error) {
		paid.Store(a.To, true)
		return "paid " + a.To, nil
	}); err != nil {
		t.Fatal(err)
	}
	cfg := mcpConfig(t, `{"policy": {"rules": [{"name": "payments", "tools": ["pay"], "effect": "approve", "timeout": "10m"}]}}`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n, err := toolbus.Start(ctx, toolbus.Options{Config: cfg, Tools: reg, Conn: nc, Provision: true})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	c, err := client.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	told := make(chan messages.ApprovalRequest, 1)
	if _, err := c.OnApproval("memo", func(r messages.ApprovalRequest) { told <- r }); err != nil {
		t.Fatal(err)
	}
	memo := strings.Repeat("quarterly invoice line; ", 17<<10/24)
	body, _ := json.Marshal(map[string]any{"name": "pay", "arguments": args{Memo: memo, To: "mallory-hidden"}})
	done := make(chan *messages.Output, 1)
	go func() {
		out, _ := c.Ask(ctx, "memo", "<tool_call>"+string(body)+"</tool_call>", nil)
		done <- out
	}()
	var req messages.ApprovalRequest
	select {
	case req = <-told:
	case <-time.After(30 * time.Second):
		t.Fatal("no approval request")
	}
	var shown args
	if req.Truncated || json.Unmarshal(req.Arguments, &shown) != nil || shown.To != "mallory-hidden" || shown.Memo != memo {
		t.Fatalf("the request shows %d bytes, truncated=%v; the payee is not among them", len(req.Arguments), req.Truncated)
	}
	out, err := toolbusCmd(t, url, "approvals", "show", req.ID)
	if err != nil || !strings.Contains(out, "mallory-hidden") || !strings.Contains(out, req.ArgumentsSHA256) {
		t.Fatalf("approvals show: %v\n%.300s", err, out)
	}
	listed, err := toolbusCmd(t, url, "approvals", "ls")
	if err != nil || !strings.Contains(listed, "toolbus approvals show "+req.ID) {
		t.Errorf("approvals ls does not mark the shortened arguments: %v\n%s", err, listed)
	}
	if _, err := toolbusCmd(t, url, "approve", req.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-done:
		if o == nil || len(o.Results) != 1 || !o.Results[0].Success {
			t.Fatalf("the approved call: %+v", o)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the approved call was not answered")
	}
	if _, ok := paid.Load("mallory-hidden"); !ok {
		t.Error("the approved call did not run")
	}
}
