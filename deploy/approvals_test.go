package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/messages"
)

// On a server with the tenants' users (deploy/nats-tenants.conf), a call of tenant acme
// that waits for approval is decided only by acme's own user: globex deciding it on its
// own decide subject is refused by the executors, on acme's subject by NATS; the default
// tenant's orchestrator cannot decide it; acme deciding it for other arguments decides
// nothing — and in each case nothing runs. Then acme approves it, and it runs, decided by
// the NATS user acme.
func TestTenantApprovalsOnServer(t *testing.T) {
	pw, urls, topo := tenantsServer(t)
	cfg, err := config.Parse([]byte(`{"policy": {"rules": [{"name": "ask", "tools": ["clock"], "when": "conversation.startsWith('acme.')", "effect": "approve"}]}}`),
		"approvals.json", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	startServicesWith(t, urls, pw, topo, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a bound on a hang
	defer cancel()

	anc, aerrs := connectAs(t, urls, "acme", pw["acme"])
	ac, err := client.New(anc)
	if err != nil {
		t.Fatal(err)
	}
	requests, err := anc.SubscribeSync(messages.ApprovalSubject("acme.ap"))
	if err != nil {
		t.Fatal(err)
	}
	if err := anc.Flush(); err != nil {
		t.Fatal(err)
	}
	answered := make(chan *messages.Output, 1)
	go func() {
		out, err := ac.Ask(ctx, "acme.ap", `<tool_call>{"name": "clock", "arguments": {}}</tool_call>`, nil)
		if err != nil {
			t.Errorf("acme's call: %v", err)
		}
		answered <- out
	}()
	m, err := requests.NextMsgWithContext(ctx)
	if err != nil {
		t.Fatalf("approval request: %v", err)
	}
	var req messages.ApprovalRequest
	if err := json.Unmarshal(m.Data, &req); err != nil {
		t.Fatal(err)
	}

	refused := func(who string, decide func(context.Context) (messages.Decision, error)) {
		t.Helper()
		dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
		defer dcancel()
		if d, err := decide(dctx); err == nil {
			t.Errorf("%s decided acme's call: %+v", who, d)
		} else {
			t.Logf("%s: %v", who, err)
		}
		select {
		case out := <-answered:
			t.Fatalf("acme's call was answered after %s decided it: %s", who, out.Text)
		case <-time.After(time.Second):
		}
	}
	gnc, _ := connectAs(t, urls, "globex", pw["globex"])
	gc, err := client.New(gnc)
	if err != nil {
		t.Fatal(err)
	}
	refused("globex on its own subject", func(ctx context.Context) (messages.Decision, error) {
		return gc.Decide(ctx, req.ID, true, "", req.ArgumentsSHA256)
	})
	refused("globex on acme's subject", func(ctx context.Context) (messages.Decision, error) {
		return gc.DecideAs(ctx, "acme", req.ID, true, "", req.ArgumentsSHA256)
	})
	onc, _ := connectAs(t, urls, orchestr, pw[orchestr])
	oc, err := client.New(onc)
	if err != nil {
		t.Fatal(err)
	}
	refused("the default tenant's orchestrator", func(ctx context.Context) (messages.Decision, error) {
		return oc.Decide(ctx, req.ID, true, "", req.ArgumentsSHA256)
	})
	refused("acme, for other arguments", func(ctx context.Context) (messages.Decision, error) {
		return ac.Decide(ctx, req.ID, true, "", strings.Repeat("0", 64))
	})

	d, err := ac.Decide(ctx, req.ID, true, "", req.ArgumentsSHA256)
	if err != nil {
		t.Fatalf("acme approves its call: %v", err)
	}
	if d.DecidedBy != "acme" {
		t.Errorf("decided by %q, want the NATS user acme", d.DecidedBy)
	}
	select {
	case out := <-answered:
		if out == nil || len(out.Results) != 1 || !out.Results[0].Success {
			t.Fatalf("the approved call: %v", fmt.Sprint(out))
		}
	case <-ctx.Done():
		t.Fatal("the approved call was not answered")
	}
	aerrs.none(t, "acme")
}
