package toolbus_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolbus"
)

// The engineering handshake through the pipeline, with the activation handled by one
// executor replica and the calculation by another one started after the first stopped:
// the session can only have travelled through the sessions bucket.
func TestEngineeringWorkflowAcrossReplicas(t *testing.T) {
	t.Parallel()
	connect := startBus(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pipeline, err := toolbus.Start(ctx, toolbus.Options{Provision: true, Conn: connect("pipeline"), Services: []string{toolbus.Parser, toolbus.Formatter}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(connect("orchestrator"))
	if err != nil {
		t.Fatal(err)
	}
	ask := func(text string) messages.OutputResult {
		t.Helper()
		out, err := c.Ask(ctx, "eng-1", text, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Results) != 1 {
			t.Fatalf("want one result, got %+v", out)
		}
		return out.Results[0]
	}
	startExecutor := func(name string) (stop func()) {
		ectx, ecancel := context.WithCancel(ctx)
		n, err := toolbus.Start(ectx, toolbus.Options{Provision: true, Conn: connect(name), Services: []string{toolbus.Executor}})
		if err != nil {
			t.Fatal(err)
		}
		return func() { ecancel(); n.Wait() }
	}

	stopA := startExecutor("executor-a")
	info := ask(`<tool_call>{"name": "dispatch_engineering", "arguments": {"domain": "pressure", "action": "info"}}</tool_call>`)
	list := ask(`<tool_call>{"name": "dispatch_engineering", "arguments": {"domain": "pressure", "action": "list"}}</tool_call>`)
	early := ask(`<tool_call>{"name": "execute_tool", "arguments": {"tool_name": "pressure.solve_kesselformel", "parameters": {"p": 10, "d": 100, "sigma": 160}}}</tool_call>`)
	act := ask(`<tool_call>{"name": "dispatch_engineering", "arguments": {"domain": "pressure", "action": "activate"}}</tool_call>`)
	stopA()

	stopB := startExecutor("executor-b")
	defer stopB()
	solved := ask(`<tool_call>{"name": "execute_tool", "arguments": {"tool_name": "pressure.solve_kesselformel", "parameters": {"p": 10, "d": 100, "sigma": 160}}}</tool_call>`)

	for name, r := range map[string]messages.OutputResult{"info": info, "list": list, "activate": act, "execute": solved} {
		if !r.Success {
			t.Fatalf("%s failed: %+v", name, r.Error)
		}
	}
	if !strings.Contains(string(info.Result), "pressure") || !strings.Contains(string(list.Result), "pressure.solve_kesselformel") {
		t.Errorf("info %s / list %s do not describe the pressure domain", info.Result, list.Result)
	}
	if early.Success || early.Error.Code != messages.CodeDomainNotActive || !strings.Contains(early.Error.Message, "dispatch_engineering") {
		t.Errorf("before activation: %+v, want domain_not_active naming the dispatch call", early)
	}
	var res struct {
		SolvedFor string  `json:"solved_for"`
		Value     float64 `json:"value"`
		Unit      string  `json:"unit"`
	}
	if err := json.Unmarshal(solved.Result, &res); err != nil || res.SolvedFor != "s" || res.Value != 0.3125 || res.Unit != "mm" {
		t.Errorf("solved %s, want s = 0.3125 mm", solved.Result)
	}
	cancel()
	pipeline.Wait()
}
