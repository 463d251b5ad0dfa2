package deploy_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"github.com/toolbus/toolbus/internal/mcptest"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/frontdoor"
	"github.com/toolbus/toolbus/pkg/messages"
)

// sniffer keeps every message a connection receives on the subscriptions its user is
// allowed.
type sniffer struct {
	mu   sync.Mutex
	seen []*nats.Msg
}

func (s *sniffer) add(m *nats.Msg) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen = append(s.seen, m)
}

// leaked returns the messages that hold secret, or any conversation of tenant.
func (s *sniffer) leaked(secret, tenant string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, m := range s.seen {
		data := append(append([]byte(m.Subject+" "), m.Data...), []byte(strings.Join(m.Header.Values(messages.HeaderConversation), " "))...)
		// The JetStream API's answers to an attacker's own requests echo the subjects it
		// asked for (acme's among them); anything else naming acme's conversations, or
		// holding acme's secret, is a leak.
		echo := bytes.HasPrefix(m.Data, []byte(`{"type":"io.nats.jetstream.api.v1.`))
		// So does a message of the attacker's own conversations (its own response
		// that names acme's message id).
		if conv := m.Header.Get(messages.HeaderConversation); conv != "" && !strings.HasPrefix(conv, tenant+".") {
			echo = true
		}
		if bytes.Contains(data, []byte(secret)) || !echo && bytes.Contains(data, []byte(tenant+".")) {
			out = append(out, fmt.Sprintf("%s: %.300s", m.Subject, m.Data))
		}
	}
	return out
}

// TestTenantsOnServer serves nats-tenants.conf for real with two tenants, acme and
// globex, beside the default one: each tenant's orchestrator gets its answers, and the
// others (globex, and the default tenant's orchestrator) see none of acme's calls,
// results, outputs, progress, stored results, dead letters or replies, by any
// subscription or JetStream request their users are allowed; what they are not allowed is
// refused.
func TestTenantsOnServer(t *testing.T) {
	pw := setPasswords(t)
	conf := loadConf(t, tenantsConf)
	perms := permissionsOf(t, conf)
	srv := startServer(t, conf)
	urls := []string{srv.ClientURL()}
	topo := bus.Topology{}
	for _, name := range twoTenants {
		topo.Tenants = append(topo.Tenants, bus.Tenant{Name: name})
	}
	services := startServices(t, urls, pw, topo)
	const victim = "acme"
	secret := "acme-secret-" + nuid.Next()

	// The others listen, from the start, on everything their users may subscribe to.
	attackers := []string{"globex", orchestr}
	sniffers := map[string]*sniffer{}
	conns := map[string]*nats.Conn{}
	errs := map[string]asyncErrors{}
	for _, user := range attackers {
		nc, e := connectAs(t, urls, user, pw[user])
		s := &sniffer{}
		// Everything its user may subscribe to, and what it may not: another's inbox,
		// acme's subjects, the services'. Those the server takes are checked by what they
		// receive (nothing of acme's); a subscription to toolbus.output.> is one of them for
		// the default tenant's orchestrator, whose allow list's "*" takes the ">".
		for _, subject := range slices.Concat(perms[user].Permissions.Subscribe.Allow, []string{">", "_INBOX.>",
			messages.InboxPrefix(victim) + ".>", messages.InboxPrefix("executor") + ".>", messages.OutputSubject("acme.*"),
			messages.ProgressSubject("acme.*"), messages.ElicitSubject("acme.*"), messages.SampleSubject("acme.*"), messages.ApprovalSubject("acme.*"), messages.AllOutputs, messages.AllProgress, messages.AllElicit, messages.AllSample, messages.AllApprovals,
			messages.AllCalls, messages.AllResults, messages.AllDead}) {
			if _, err := nc.Subscribe(subject, s.add); err != nil {
				t.Fatal(err)
			}
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		sniffers[user], conns[user], errs[user] = s, nc, e
		// Subscribing to the replies of everyone, or of acme, is refused outright.
		for _, subject := range []string{">", "_INBOX.>", messages.InboxPrefix(victim) + ".>"} {
			e.expect(t, user, "subscription", subject)
		}
	}

	step := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		t.Cleanup(cancel)
		return ctx
	}
	// acme works: calls, a result stored whole, a streamed response with progress.
	anc, aerrs := connectAs(t, urls, victim, pw[victim])
	ac, err := client.New(anc)
	if err != nil {
		t.Fatal(err)
	}
	out, err := ac.Ask(step(), "acme.c1", `<tool_call>{"name": "clock", "arguments": {}}</tool_call>
<tool_call>{"name": "big_report", "arguments": {"fill": "`+secret+`"}}</tool_call>`, nil)
	if err != nil {
		t.Fatalf("acme: %v", err)
	}
	if len(out.Results) != 2 || !out.Results[0].Success || out.Results[1].Stored == nil {
		t.Fatalf("acme: %+v", out)
	}
	stored := out.Results[1].Stored
	if stored.Bucket != messages.ResultsBucket(victim) {
		t.Errorf("acme's result stored in %s, want its own bucket %s", stored.Bucket, messages.ResultsBucket(victim))
	}
	if whole, err := ac.FetchResult(step(), stored); err != nil || !bytes.Contains(whole, []byte(secret)) {
		t.Fatalf("acme fetches its stored result: %d bytes, %v", len(whole), err)
	}
	// A chunk of acme's that names no response cannot be routed: acme is told, on its
	// rejection subject, and nobody else hears of it (the sniffers, below).
	rejected, err := anc.SubscribeSync(messages.TenantRejectedSubject(victim))
	if err != nil {
		t.Fatal(err)
	}
	if err := anc.Flush(); err != nil {
		t.Fatal(err)
	}
	ajs, err := jetstream.New(anc)
	if err != nil {
		t.Fatal(err)
	}
	chunk := nats.NewMsg(messages.StreamSubject(victim + ".c9"))
	chunk.Data = []byte(secret)
	if _, err := ajs.PublishMsg(step(), chunk); err != nil {
		t.Fatalf("acme publishes a chunk: %v", err)
	}
	if m, err := rejected.NextMsgWithContext(step()); err != nil || !bytes.Contains(m.Data, []byte("no "+messages.HeaderResponseID)) {
		t.Fatalf("acme's rejection: %v", err)
	}
	var progress int
	s, err := ac.Stream(step(), "acme.c2", &client.StreamOptions{Progress: func(messages.ToolResult) { progress++ }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.WriteString(`Now: <tool_call>{"name": "big_report", "arguments": {"fill": "` + secret + `"}}</tool_call>`); err != nil {
		t.Fatal(err)
	}
	if out, err := s.Close(step()); err != nil || len(out.Results) != 1 || progress != 1 {
		t.Fatalf("acme's streamed response: %+v, %v, %d progress", out, err, progress)
	}
	adminNC, _ := connectAs(t, urls, "admin", pw["admin"])
	adminJS, _ := jetstream.New(adminNC)
	// A tenant's stream bounds its consumers.
	if st, err := adminJS.Stream(step(), messages.OutputStream(victim)); err != nil || st.CachedInfo().Config.MaxConsumers != bus.DefaultTenantConsumers {
		t.Errorf("%s: max consumers %v (%v), want %d", messages.OutputStream(victim), st, err, bus.DefaultTenantConsumers)
	}
	// No tenant can take another's response id first: JetStream de-duplicates by message
	// id per stream, and each tenant's responses have a stream of their own.
	{
		gnc := conns["globex"]
		gjs, _ := jetstream.New(gnc)
		squat := nats.NewMsg(messages.ResponseSubject("globex.x"))
		squat.Data = []byte("hello")
		squat.Header.Set(messages.HeaderMsgID, messages.ScopedID("acme.c5", "r1"))
		if _, err := gjs.PublishMsg(step(), squat); err != nil {
			t.Fatal(err)
		}
		out, err := ac.Ask(step(), "acme.c5", `<tool_call>{"name": "clock", "arguments": {}}</tool_call>`, &client.SubmitOptions{ResponseID: "r1"})
		if err != nil || len(out.Results) != 1 || !out.Results[0].Success {
			t.Fatalf("acme's response r1 after globex used its message id: %+v, %v", out, err)
		}
	}
	// A dead letter of acme's (as the services file one), for the console only.
	if _, err := adminJS.Publish(step(), messages.DeadSubject("acme.c1"), []byte(`{"reason": "`+secret+`"}`)); err != nil {
		t.Fatal(err)
	}

	// The others work too, each in its own conversations.
	for _, user := range attackers {
		c, err := client.New(conns[user])
		if err != nil {
			t.Fatal(err)
		}
		conv := "c1"
		if user != orchestr {
			conv = user + ".c1"
		}
		out, err := c.Ask(step(), conv, `<tool_call>{"name": "big_report", "arguments": {"fill": "z"}}</tool_call>`, nil)
		if err != nil || len(out.Results) != 1 || out.Results[0].Stored == nil {
			t.Fatalf("%s: %+v, %v", user, out, err)
		}
		if whole, err := c.FetchResult(step(), out.Results[0].Stored); err != nil || len(whole) != bigReportBytes+2 {
			t.Errorf("%s fetches its stored result: %d bytes, %v", user, len(whole), err)
		}
	}

	// What the others may not do: each refused, or answered without acme's data.
	meta := "$O." + stored.Bucket + ".M." + base64.URLEncoding.EncodeToString([]byte(stored.Name))
	for _, user := range attackers {
		nc, e := conns[user], errs[user]
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		// Each attempt at once, each given 5 s: a refused request is never answered.
		var attempts sync.WaitGroup
		try := func(what string, f func(ctx context.Context) ([]byte, error)) {
			attempts.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				data, err := f(ctx)
				if err == nil || bytes.Contains(data, []byte(secret)) {
					t.Errorf("%s could %s: %.200s", user, what, data)
				}
			})
		}
		request := func(subject, body string) func(ctx context.Context) ([]byte, error) {
			return func(ctx context.Context) ([]byte, error) {
				m, err := nc.RequestWithContext(ctx, subject, []byte(body))
				if err != nil {
					return nil, err
				}
				var apiErr struct {
					Error *struct{ Description string } `json:"error"`
				}
				if json.Unmarshal(m.Data, &apiErr); apiErr.Error != nil {
					return m.Data, &jetstream.APIError{Description: apiErr.Error.Description}
				}
				if m.Header.Get("Status") != "" { // a direct get's "404 Message Not Found"
					return m.Data, jetstream.ErrMsgNotFound
				}
				return m.Data, nil
			}
		}
		consume := func(stream, filter string) func(ctx context.Context) ([]byte, error) {
			return func(ctx context.Context) ([]byte, error) {
				cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
				if err != nil {
					return nil, err
				}
				msg, err := cons.Next(jetstream.FetchMaxWait(time.Second))
				if err != nil {
					return nil, err
				}
				return msg.Data(), nil
			}
		}
		acmeOutput := messages.OutputStream(victim)
		acmeResults := "OBJ_" + messages.ResultsBucket(victim)
		try("read acme's output stream's info", request("$JS.API.STREAM.INFO."+acmeOutput, `{"subjects_filter": ">"}`))
		try("consume acme's outputs", consume(acmeOutput, messages.OutputSubject("acme.c1")))
		try("get acme's output by sequence", request("$JS.API.STREAM.MSG.GET."+acmeOutput, `{"seq": 1}`))
		try("get acme's output by subject", request("$JS.API.DIRECT.GET."+acmeOutput+"."+messages.OutputSubject("acme.c1"), ""))
		try("consume acme's progress", consume(acmeOutput, messages.ProgressSubject("acme.c2")))
		if user != orchestr {
			try("consume the default tenant's outputs", consume(messages.StreamOutput, messages.AllOutputs))
		}
		try("open acme's results bucket", func(ctx context.Context) ([]byte, error) {
			os, err := js.ObjectStore(ctx, stored.Bucket)
			if err != nil {
				return nil, err
			}
			return os.GetBytes(ctx, stored.Name)
		})
		try("fetch acme's stored result", func(ctx context.Context) ([]byte, error) {
			c, err := client.New(nc)
			if err != nil {
				return nil, err
			}
			return c.FetchResult(ctx, stored)
		})
		try("read the metadata of acme's stored result", request("$JS.API.DIRECT.GET."+acmeResults+"."+meta, ""))
		try("list acme's stored results", request("$JS.API.STREAM.INFO."+acmeResults, `{"subjects_filter": ">"}`))
		try("consume acme's stored chunks", consume(acmeResults, "$O."+stored.Bucket+".C.>"))
		try("read the dead letters", consume(messages.StreamDead, messages.AllDead))
		try("get a dead letter by sequence", request("$JS.API.STREAM.MSG.GET."+messages.StreamDead, `{"seq": 1}`))
		try("read the calls in flight", consume(messages.StreamCalls, messages.AllCalls))
		try("read the gathered results", request("$JS.API.STREAM.MSG.GET.KV_"+messages.BucketGather, `{"last_by_subj": "$KV.`+messages.BucketGather+`.>"}`))
		try("read the call claims", request("$JS.API.STREAM.MSG.GET.KV_"+messages.BucketCalls, `{"seq": 1}`))
		own := messages.OutputStream(user)
		if user == orchestr {
			own = messages.StreamOutput
		}
		try("filter its own output stream on acme's subjects", consume(own, messages.OutputSubject("acme.c1")))

		attempts.Wait()
		// Publishing into acme's conversations, or as the services, is refused.
		for _, subject := range []string{messages.ResponseSubject("acme.c1"), messages.StreamSubject("acme.c1"), messages.OutputSubject("acme.c1"),
			messages.ResultSubject("acme.c1"), messages.CallSubject("acme.c1"), "$KV." + messages.BucketOwners + ".k"} {
			_ = nc.Publish(subject, []byte(`<tool_call>{"name": "clock", "arguments": {}}</tool_call>`))
			_ = nc.Flush()
			e.expect(t, user, "publish", subject)
		}
	}
	// A push consumer on an attacker's own output stream may deliver anywhere: into
	// acme's responses it stores nothing (a stream does not take a consumer's deliveries).
	{
		responses, err := adminJS.Stream(step(), messages.StreamResponses)
		if err != nil {
			t.Fatal(err)
		}
		before := responses.CachedInfo().State.LastSeq
		ctx := step()
		req := map[string]any{"stream_name": messages.OutputStream("globex"), "config": map[string]any{
			"deliver_subject": messages.ResponseSubject("acme.c9"), "ack_policy": "none", "deliver_policy": "all"}}
		body, _ := json.Marshal(req)
		if m, err := conns["globex"].RequestWithContext(ctx, "$JS.API.CONSUMER.CREATE."+messages.OutputStream("globex"), body); err != nil {
			t.Fatal(err)
		} else if bytes.Contains(m.Data, []byte(`"error"`)) {
			t.Logf("a push consumer into acme's responses: refused: %s", m.Data)
		}
		time.Sleep(2 * time.Second)
		info, err := responses.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.LastSeq != before {
			t.Errorf("globex's push consumer put %d messages into %s", info.State.LastSeq-before, messages.StreamResponses)
		}
	}

	for _, user := range attackers {
		if leaked := sniffers[user].leaked(secret, victim); len(leaked) > 0 {
			t.Errorf("%s received acme's messages on %v", user, leaked)
		}
	}
	for name, svc := range services {
		svc.errs.none(t, name)
	}
	aerrs.none(t, victim)
}

// A tenant answers its servers' questions under its own user (no right to reply to
// anyone's inbox: it answers on its conversation's answer subject), and what another
// tenant delivers onto its subjects with a push consumer (which NATS lets deliver
// anywhere) is neither a question nor progress nor an output to pkg/client: a copy of
// the other's messages names the other's conversation.
func TestTenantQuestionsAndInjectedCopies(t *testing.T) {
	pw := setPasswords(t)
	booking := mcptest.BookingServer(t)
	cfg, err := config.Parse([]byte(`{"mcpServers": {"booking": {"type": "http", "url": "`+booking+`", "elicitation": "ask"}},
		"tenants": {"acme": {}, "globex": {}}}`), "", func(string) (string, bool) { return "", false }) // no file: nothing to follow
	if err != nil {
		t.Fatal(err)
	}
	conf := loadConf(t, tenantsConf)
	nsrv := startServer(t, conf)
	urls := []string{nsrv.ClientURL()}
	services := startServicesWith(t, urls, pw, cfg.Topology(), cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	anc, aerrs := connectAs(t, urls, "acme", pw["acme"])
	ac, _ := client.New(anc)
	gnc, gerrs := connectAs(t, urls, "globex", pw["globex"])
	gc, _ := client.New(gnc)
	// globex has outputs and progress of its own, which its push consumers then deliver
	// onto acme's subjects.
	if out, err := gc.Ask(ctx, "globex.c1", `<tool_call>{"name": "clock", "arguments": {}}</tool_call>`, nil); err != nil || len(out.Results) != 1 {
		t.Fatalf("globex: %+v, %v", out, err)
	}
	for i, target := range []string{messages.ElicitSubject("acme.c1"), messages.ProgressSubject("acme.c2"), messages.OutputSubject("acme.c1")} {
		body, _ := json.Marshal(map[string]any{"stream_name": messages.OutputStream("globex"), "config": map[string]any{
			"name": fmt.Sprintf("inject%d", i), "deliver_subject": target, "ack_policy": "none", "deliver_policy": "all", "idle_heartbeat": int64(time.Second)}})
		m, err := gnc.RequestWithContext(ctx, "$JS.API.CONSUMER.CREATE."+messages.OutputStream("globex")+fmt.Sprintf(".inject%d", i), body)
		if err != nil || bytes.Contains(m.Data, []byte(`"error"`)) {
			t.Fatalf("globex's push consumer onto %s: %v %s", target, err, m.Data)
		}
	}

	// What reaches acme's connection on its question subject, raw: globex's copies among
	// it, which is what the checks below must have turned away.
	raw, err := anc.SubscribeSync(messages.ElicitSubject("acme.c1"))
	if err != nil {
		t.Fatal(err)
	}
	var asked []messages.ElicitRequest
	var mu sync.Mutex
	sub, err := ac.OnElicit("acme.c1", func(_ context.Context, req messages.ElicitRequest) messages.ElicitResponse {
		mu.Lock()
		asked = append(asked, req)
		mu.Unlock()
		return messages.ElicitResponse{Action: "accept", Content: map[string]any{"seat": "12A"}}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	// The executor lists the server's tools as it starts: until then the tool is unknown.
	var out *messages.Output
	for {
		out, err = ac.Ask(ctx, "acme.c1", `<tool_call>{"name": "booking__book", "arguments": {}}</tool_call>`, nil)
		if err != nil || len(out.Results) != 1 || out.Results[0].Error == nil || out.Results[0].Error.Code != messages.CodeUnknownTool {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil || len(out.Results) != 1 || !out.Results[0].Success || !bytes.Contains(out.Results[0].Result, []byte(`"12A"`)) {
		t.Fatalf("acme's booking: %+v, %v", out, err)
	}
	var progress []messages.ToolResult
	s, err := ac.Stream(ctx, "acme.c2", &client.StreamOptions{Progress: func(r messages.ToolResult) { progress = append(progress, r) }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.WriteString(`<tool_call>{"name": "clock", "arguments": {}}</tool_call>`); err != nil {
		t.Fatal(err)
	}
	if out, err := s.Close(ctx); err != nil || len(out.Results) != 1 || out.Conversation != "acme.c2" {
		t.Fatalf("acme's stream: %+v, %v", out, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 1 || asked[0].Conversation != "acme.c1" || asked[0].Message != "Which seat?" {
		t.Errorf("acme was asked %+v, want the one question of its server", asked)
	}
	for _, r := range progress {
		if r.Conversation != "acme.c2" {
			t.Errorf("acme's progress holds %+v", r)
		}
	}
	if len(progress) != 1 {
		t.Errorf("acme's progress: %d results, want 1", len(progress))
	}

	copies := 0
	for {
		m, err := raw.NextMsg(100 * time.Millisecond)
		if err != nil {
			break
		}
		if m.Header.Get(messages.HeaderConversation) == "globex.c1" {
			copies++
		}
	}
	if copies == 0 {
		t.Error("no copy of globex's messages reached acme's question subject: the test proves nothing")
	}
	// Replying to an inbox is no right of a tenant's: the services' acks are safe.
	_ = anc.Publish("_INBOX.formatter.abc", []byte(`{"error": {"code": 503}}`))
	_ = anc.Flush()
	aerrs.expect(t, "acme", "publish", "_INBOX.formatter.abc")
	// Nor may globex answer acme's questions.
	_ = gnc.Publish(messages.AnswerSubject("acme.c1", "abc"), []byte(`{"action": "accept"}`))
	_ = gnc.Flush()
	gerrs.expect(t, "globex", "publish", messages.AnswerSubject("acme.c1", "abc"))
	for name, svc := range services {
		svc.errs.none(t, name)
	}
}

// TestFrontDoorAsATenantsOrchestrator runs the MCP front door (`toolbus mcp --tenant
// acme`) on nats-tenants.conf as acme's orchestrator, the user nats-conf gives a tenant:
// an MCP client lists the catalog's tools through it and calls one, and the server
// refuses the door nothing.
func TestFrontDoorAsATenantsOrchestrator(t *testing.T) {
	pw, urls, topo := tenantsServer(t)
	startServices(t, urls, pw, topo)
	const tenant = "acme"
	nc, errs := connectAs(t, urls, tenant, pw[tenant])
	door, err := frontdoor.New(nc, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- door.Run(ctx) }()
	select {
	case <-door.Ready():
	case err := <-ran:
		t.Fatalf("the door cannot follow the catalog as %s: %v", tenant, err)
	case <-ctx.Done():
		t.Fatal("the door never read the catalog")
	}
	ct, st := mcp.NewInMemoryTransports()
	go door.Serve(ctx, tenant, st)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "an MCP client"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	var names []string
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	if !slices.Contains(names, "clock") {
		t.Fatalf("tools/list through the door: %v; want the catalog's, clock among them", names)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "clock", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("clock through the door: %+v, %v", res, err)
	}
	errs.none(t, tenant)
}

// tenantsServer serves nats-tenants.conf (its users' passwords set) and returns the
// passwords, the server's URLs and the topology of its tenants.
func tenantsServer(t *testing.T) (map[string]string, []string, bus.Topology) {
	t.Helper()
	pw := setPasswords(t)
	srv := startServer(t, loadConf(t, tenantsConf))
	topo := bus.Topology{}
	for _, name := range twoTenants {
		topo.Tenants = append(topo.Tenants, bus.Tenant{Name: name})
	}
	return pw, []string{srv.ClientURL()}, topo
}
