package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolbus/toolbus/deploy"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/toolbus"
)

// jsz is what KEDA's nats-jetstream scaler reads of NATS's monitoring endpoint
// (/jsz?acc=<account>&consumers=true&config=true), the fields it uses.
type jsz struct {
	Accounts []struct {
		Name    string `json:"name"`
		Streams []struct {
			Name  string `json:"name"`
			State struct {
				LastSeq uint64 `json:"last_seq"`
			} `json:"state"`
			Consumers []struct {
				Name          string `json:"name"`
				NumPending    uint64 `json:"num_pending"`
				NumAckPending int    `json:"num_ack_pending"`
			} `json:"consumer_detail"`
		} `json:"stream_detail"`
	} `json:"account_details"`
}

// trigger is one nats-jetstream trigger of a rendered ScaledObject.
type trigger struct{ endpoint, account, stream, consumer string }

// lag is the lag KEDA's scaler computes for tr: the consumer's pending and
// unacknowledged messages; found says the account, stream and consumer exist (KEDA
// falls back to the stream's last sequence when the consumer does not, or to 0, and
// scales on that without a word).
func (tr trigger) lag(t *testing.T) (lag uint64, found bool) {
	t.Helper()
	u := url.URL{Scheme: "http", Host: tr.endpoint, Path: "/jsz", RawQuery: url.Values{"acc": {tr.account}, "consumers": {"true"}, "config": {"true"}}.Encode()}
	resp, err := http.Get(u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var j jsz
	if err := json.NewDecoder(resp.Body).Decode(&j); err != nil {
		t.Fatal(err)
	}
	for _, a := range j.Accounts {
		if a.Name != tr.account {
			continue
		}
		for _, s := range a.Streams {
			if s.Name != tr.stream {
				continue
			}
			for _, c := range s.Consumers {
				if c.Name == tr.consumer {
					return c.NumPending + uint64(c.NumAckPending), true
				}
			}
		}
	}
	return 0, false
}

// TestKEDATriggersReadToolbusQueues renders the chart with KEDA and a tenant against a
// NATS server provisioned from the rendered configuration, and reads each
// ScaledObject's trigger as KEDA's scaler does: every account, stream and consumer it
// names exists, and the lag it reads grows with the responses and calls waiting, and
// falls when the stages take them.
func TestKEDATriggersReadToolbusQueues(t *testing.T) {
	pw := setPasswords(t)
	dir := t.TempDir()
	accounts, err := deploy.NATSAccounts([]string{"acme"})
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "accounts.conf"), accounts, 0o644)
	os.WriteFile(filepath.Join(dir, "nats.conf"), []byte("jetstream {}\ninclude accounts.conf\n"), 0o644)
	opts := loadConf(t, filepath.Join(dir, "nats.conf"))
	opts.Host, opts.Port, opts.HTTPHost, opts.HTTPPort = "127.0.0.1", server.RANDOM_PORT, "127.0.0.1", server.RANDOM_PORT
	opts.StoreDir, opts.NoLog, opts.NoSigs = t.TempDir(), true, true
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	urls := []string{srv.ClientURL()}
	monitor := strings.TrimPrefix(srv.MonitorAddr().String(), "http://")

	c := renderChart(t, "--set", "autoscaling.keda.enabled=true", "--set", "nats.monitoringEndpoint="+monitor,
		"--set", "nats.streamReplicas=1", "--set-json", `config={"tenants":{"acme":{}}}`)
	cfgFile := filepath.Join(dir, "toolbus.json")
	os.WriteFile(cfgFile, []byte(c.get(t, "ConfigMap", "toolbus-config").Data["toolbus.json"]), 0o644)
	cfg, err := config.Load(cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	topo := cfg.Topology() // what `toolbus provision` makes of the rendered config
	topo.Replicas = 1
	anc, _ := connectAs(t, urls, "admin", pw["admin"])
	ajs, _ := jetstream.New(anc)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := bus.Provision(ctx, ajs, topo); err != nil {
		t.Fatal(err)
	}

	triggers := map[string][]trigger{}
	for _, stage := range []string{"parser", "executor", "formatter"} {
		so := c.get(t, "ScaledObject", "toolbus-"+stage)
		for _, tr := range so.Spec.Triggers {
			if tr.Type != "nats-jetstream" {
				t.Errorf("%s: a %s trigger", stage, tr.Type)
			}
			m := tr.Metadata
			tr := trigger{m["natsServerMonitoringEndpoint"], m["account"], m["stream"], m["consumer"]}
			if _, found := tr.lag(t); !found {
				t.Errorf("%s scales on %+v, which the provisioned server does not have", stage, tr)
			}
			triggers[tr.stream] = append(triggers[tr.stream], tr)
		}
	}
	// Every stage consumer toolbus provisions has its trigger, but the dead-letter
	// handler's (advisories, not calls).
	for stream, cc := range topo.Consumers() {
		if cc.Durable == "deadletter" {
			continue
		}
		if len(triggers[stream]) != 1 || triggers[stream][0].consumer != cc.Durable {
			t.Errorf("provisioned consumer %s.%s has triggers %+v", stream, cc.Durable, triggers[stream])
		}
	}
	lagOf := func(stream string) uint64 {
		l, _ := triggers[stream][0].lag(t)
		return l
	}
	waitLag := func(stream string, want uint64) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for lagOf(stream) != want {
			if time.Now().After(deadline) {
				t.Fatalf("the lag KEDA reads on %s is %d, want %d", stream, lagOf(stream), want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	// Responses wait for the parser: its triggers' lag grows with them, per tenant.
	call := `<tool_call>{"name": "clock", "arguments": {}}</tool_call>`
	type sent struct {
		c        *client.Client
		conv, id string
	}
	var responses []sent
	for _, who := range []struct {
		user, conv, stream string
		n                  int
	}{{"orchestrator", "keda", "TOOLBUS_RESPONSES", 6}, {"acme", "acme.keda", "TOOLBUS_RESPONSES_acme", 3}} {
		nc, _ := connectAs(t, urls, who.user, pw[who.user])
		cl, err := client.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		for i := range who.n {
			// The monitoring endpoint counts a stored message a moment after its
			// publish's ack: the lag reaches the count, it does not start there.
			waitLag(who.stream, uint64(i))
			id, err := cl.Submit(ctx, fmt.Sprintf("%s-%d", who.conv, i), call, nil)
			if err != nil {
				t.Fatal(err)
			}
			responses = append(responses, sent{cl, fmt.Sprintf("%s-%d", who.conv, i), id})
		}
		waitLag(who.stream, uint64(who.n))
	}
	// docs/deployment.md's load: the nats CLI publishing responses as the orchestrator,
	// no client library, no headers.
	published := 0
	if nats := natsCLI(t); nats != "" {
		before := lagOf("TOOLBUS_RESPONSES")
		out, err := exec.Command(nats, "--server", urls[0], "--user", "orchestrator", "--password", pw["orchestrator"],
			"pub", "toolbus.responses.load", call, "--count", "5").CombinedOutput()
		if err != nil {
			t.Fatalf("nats pub: %v\n%s", err, out)
		}
		published = 5
		waitLag("TOOLBUS_RESPONSES", before+5)
	}
	if l := lagOf("TOOLBUS_CALLS"); l != 0 {
		t.Fatalf("calls lag %d before any parser ran", l)
	}

	start := func(name string) {
		nc, _ := connectAs(t, urls, name, pw[name])
		sctx, stop := context.WithCancel(context.Background())
		tb, err := toolbus.Start(sctx, toolbus.Options{Conn: nc, Services: []string{name}, Topology: topo, Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { stop(); tb.Wait() })
	}
	// The parser takes the responses; their calls wait for an executor: the executors'
	// lag is the calls waiting.
	start(toolbus.Parser)
	waitLag("TOOLBUS_RESPONSES", 0)
	waitLag("TOOLBUS_RESPONSES_acme", 0)
	waitLag("TOOLBUS_CALLS", uint64(len(responses)+published))
	// Executors and formatters answer them all: the lag falls to nothing.
	start(toolbus.Executor)
	start(toolbus.Formatter)
	for _, r := range responses {
		out, err := r.c.Wait(ctx, r.conv, r.id)
		if err != nil || len(out.Results) != 1 || !out.Results[0].Success {
			t.Fatalf("%s: %v %+v", r.conv, err, out)
		}
	}
	waitLag("TOOLBUS_CALLS", 0)
	waitLag("TOOLBUS_RESULTS", 0)
}

// natsCLI finds the nats CLI (PATH, then the repository's .cache/bin, where
// scripts/install-test-tools builds it); "" when it is not there, unless
// TOOLBUS_REQUIRE_TOOLS is set.
func natsCLI(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("nats"); err == nil {
		return p
	}
	if p, err := filepath.Abs("../.cache/bin/nats"); err == nil && fileExists(p) {
		return p
	}
	if os.Getenv("TOOLBUS_REQUIRE_TOOLS") != "" {
		t.Fatal("the nats CLI not found (TOOLBUS_REQUIRE_TOOLS is set)")
	}
	t.Log("the nats CLI not found: the load of docs/deployment.md is not published")
	return ""
}
