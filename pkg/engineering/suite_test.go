package engineering_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolbus/toolbus/pkg/engineering"
	"github.com/toolbus/toolbus/pkg/messages"
)

func call(t *testing.T, s *engineering.Suite, conv, tool, args string) (json.RawMessage, error) {
	t.Helper()
	return s.Call(context.Background(), conv, tool, json.RawMessage(args))
}

func mustCall(t *testing.T, s *engineering.Suite, conv, tool, args string) json.RawMessage {
	t.Helper()
	out, err := call(t, s, conv, tool, args)
	if err != nil {
		t.Fatalf("%s %s: %v", tool, args, err)
	}
	return out
}

const kesselCall = `{"tool_name": "pressure.solve_kesselformel", "parameters": {"p": 10, "d": 100, "sigma": 160}}`

func TestToolsHierarchical(t *testing.T) {
	s := engineering.New(nil)
	var names []string
	for _, tool := range s.Tools() {
		names = append(names, tool.Name)
		var schema map[string]any
		if err := json.Unmarshal(tool.InputSchema, &schema); err != nil || schema["type"] != "object" {
			t.Errorf("%s: input schema %s is not an object schema", tool.Name, tool.InputSchema)
		}
	}
	if !slices.Equal(names, []string{"clock", "dispatch_engineering", "execute_tool"}) {
		t.Fatalf("tools = %v", names)
	}
	for _, name := range []string{"clock", "dispatch_engineering", "execute_tool"} {
		if !s.Has(name) {
			t.Errorf("Has(%q) = false", name)
		}
	}
	if s.Has("pressure.solve_kesselformel") {
		t.Error("a hidden calculator is visible")
	}
	_, err := call(t, s, "c1", "pressure.solve_kesselformel", `{"p": 10, "d": 100, "sigma": 160}`)
	te := requireToolError(t, err, messages.CodeUnknownTool)
	if !strings.Contains(te.Message, `execute_tool {"tool_name": "pressure.solve_kesselformel"`) {
		t.Errorf("message does not say how to call it: %s", te.Message)
	}
}

func TestToolsFlat(t *testing.T) {
	s := engineering.New(&engineering.Options{Expose: engineering.ExposeFlat})
	if got, want := len(s.Tools()), 3+len(engineering.DefaultCalculators()); got != want {
		t.Fatalf("%d tools, want %d", got, want)
	}
	if !s.Has("materials.lookup") || !s.Has("execute_tool") {
		t.Fatal("flat mode hides a tool")
	}
	// Flat mode needs no activation, directly or through execute_tool.
	mustCall(t, s, "c1", "pressure.solve_kesselformel", `{"p": 10, "d": 100, "sigma": 160}`)
	mustCall(t, s, "c1", "execute_tool", kesselCall)
}

func TestDomainNotActive(t *testing.T) {
	s := engineering.New(nil)
	_, err := call(t, s, "c1", "execute_tool", kesselCall)
	te := requireToolError(t, err, messages.CodeDomainNotActive)
	if want := `dispatch_engineering with {"domain": "pressure", "action": "activate"}`; !strings.Contains(te.Message, want) {
		t.Fatalf("message %q does not contain the call to make, %s", te.Message, want)
	}
	mustCall(t, s, "c1", "dispatch_engineering", `{"domain": "pressure", "action": "activate"}`)
	out := mustCall(t, s, "c1", "execute_tool", kesselCall)
	if !strings.Contains(string(out), `"value":0.3125`) {
		t.Fatalf("result %s", out)
	}
}

func TestActivationIsPerConversation(t *testing.T) {
	s := engineering.New(nil)
	mustCall(t, s, "conv-a", "dispatch_engineering", `{"domain": "pressure", "action": "activate"}`)
	mustCall(t, s, "conv-a", "execute_tool", kesselCall)
	_, err := call(t, s, "conv-b", "execute_tool", kesselCall)
	requireToolError(t, err, messages.CodeDomainNotActive)
}

func TestActivationKeepsOtherDomains(t *testing.T) {
	s := engineering.New(nil)
	mustCall(t, s, "c1", "dispatch_engineering", `{"domain": "pressure", "action": "activate"}`)
	out := mustCall(t, s, "c1", "dispatch_engineering", `{"domain": "geometry", "action": "activate"}`)
	var res engineering.DispatchResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.ActiveDomains, []string{"pressure", "geometry"}) {
		t.Fatalf("active domains %v", res.ActiveDomains)
	}
	mustCall(t, s, "c1", "execute_tool", kesselCall)
	mustCall(t, s, "c1", "execute_tool", `{"tool_name": "geometry.solve_circle_area", "parameters": {"r": 1}}`)
	// Activating twice changes nothing.
	out = mustCall(t, s, "c1", "dispatch_engineering", `{"domain": "pressure", "action": "activate"}`)
	if err := json.Unmarshal(out, &res); err != nil || !slices.Equal(res.ActiveDomains, []string{"pressure", "geometry"}) {
		t.Fatalf("after activating again: %v %v", res.ActiveDomains, err)
	}
}

func TestExclusiveDomains(t *testing.T) {
	s := engineering.New(&engineering.Options{ExclusiveDomains: true})
	mustCall(t, s, "c1", "dispatch_engineering", `{"domain": "pressure", "action": "activate"}`)
	mustCall(t, s, "c1", "dispatch_engineering", `{"domain": "geometry", "action": "activate"}`)
	_, err := call(t, s, "c1", "execute_tool", kesselCall)
	requireToolError(t, err, messages.CodeDomainNotActive)
}

func TestSessionIsStored(t *testing.T) {
	store := engineering.NewMemorySessions()
	s := engineering.New(&engineering.Options{Sessions: store})
	mustCall(t, s, "c1", "dispatch_engineering", `{"domain": "materials", "action": "activate"}`)
	got, err := store.Get(context.Background(), "c1")
	if err != nil {
		t.Fatal(err)
	}
	want := engineering.Session{ActiveDomains: []string{"materials"}, AllowedTools: []string{"materials.allowable_stress", "materials.lookup", "materials.solve_mass"}}
	if !slices.Equal(got.ActiveDomains, want.ActiveDomains) || !slices.Equal(got.AllowedTools, want.AllowedTools) {
		t.Fatalf("stored %+v, want %+v", got, want)
	}
	// A second Suite on the same store (another executor replica) sees the activation.
	other := engineering.New(&engineering.Options{Sessions: store})
	mustCall(t, other, "c1", "execute_tool", `{"tool_name": "materials.lookup", "parameters": {"material": "P265GH"}}`)
}

func TestDispatchInfo(t *testing.T) {
	s := engineering.New(nil)
	mustCall(t, s, "c1", "dispatch_engineering", `{"domain": "geometry", "action": "activate"}`)
	out := mustCall(t, s, "c1", "dispatch_engineering", `{"action": "info"}`)
	var res engineering.DispatchResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatal(err)
	}
	want := []engineering.DomainInfo{
		{Name: "geometry", Tools: 4, Active: true},
		{Name: "materials", Tools: 3},
		{Name: "pressure", Tools: 3},
	}
	if len(res.Domains) != len(want) {
		t.Fatalf("domains %+v", res.Domains)
	}
	for i, d := range res.Domains {
		if d.Name != want[i].Name || d.Tools != want[i].Tools || d.Active != want[i].Active || d.Description == "" {
			t.Errorf("domain %d = %+v, want %+v", i, d, want[i])
		}
	}
	if !slices.Equal(res.ActiveDomains, []string{"geometry"}) {
		t.Errorf("active %v", res.ActiveDomains)
	}
}

func TestDispatchList(t *testing.T) {
	s := engineering.New(nil)
	out := mustCall(t, s, "c1", "dispatch_engineering", `{"domain": "Pressure", "action": "LIST"}`)
	var res engineering.DispatchResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Tools) != 3 {
		t.Fatalf("tools %+v", res.Tools)
	}
	for _, tool := range res.Tools {
		if tool.Description == "" || len(tool.InputSchema) == 0 || len(tool.Parameters) == 0 {
			t.Errorf("%s lacks description or parameters", tool.Name)
		}
	}
	kessel := res.Tools[2]
	if kessel.Name != "pressure.solve_kesselformel" || !strings.Contains(string(kessel.InputSchema), "[bar]") ||
		kessel.Parameters["sigma"] != "σ hoop stress in the wall [N/mm²]; also as hoop_stress, σ" {
		t.Errorf("kesselformel listing %+v lacks units", kessel)
	}
	if !strings.Contains(res.Next, `"action": "activate"`) {
		t.Errorf("next %q does not say to activate", res.Next)
	}
	// Listing does not activate.
	_, err := call(t, s, "c1", "execute_tool", kesselCall)
	requireToolError(t, err, messages.CodeDomainNotActive)
}

func TestDispatchActivateShowsExamples(t *testing.T) {
	s := engineering.New(nil)
	out := mustCall(t, s, "c1", "dispatch_engineering", `{"domain": "pressure", "action": "activate"}`)
	var res engineering.DispatchResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatal(err)
	}
	if !res.Activated || len(res.Tools) != 3 {
		t.Fatalf("activate answer %s", out)
	}
	for _, tool := range res.Tools {
		if tool.Example == nil || tool.Example.Call.ToolName != tool.Name || len(tool.Example.Result) == 0 {
			t.Errorf("%s has no worked example", tool.Name)
		}
	}
	if got := string(res.Tools[2].Example.Result); !strings.Contains(got, `"answer":"s = 0.3125 mm"`) {
		t.Errorf("kesselformel example result %s", got)
	}
}

func TestDispatchErrors(t *testing.T) {
	s := engineering.New(nil)
	tests := []struct {
		name    string
		args    string
		wantErr string
	}{
		{name: "no action", args: `{"domain": "pressure"}`, wantErr: "action is missing"},
		{name: "unknown action", args: `{"domain": "pressure", "action": "enable"}`, wantErr: `unknown action "enable"`},
		{name: "unknown domain", args: `{"domain": "thermo", "action": "list"}`, wantErr: `unknown domain "thermo": the domains are geometry, materials, pressure`},
		{name: "no domain", args: `{"action": "activate"}`, wantErr: "domain is missing"},
		{name: "action not a string", args: `{"action": 1}`, wantErr: "action must be a string"},
		{name: "arguments not an object", args: `[1]`, wantErr: "arguments must be a JSON object"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := call(t, s, "c1", "dispatch_engineering", tc.args)
			te := requireToolError(t, err, messages.CodeInvalidArguments)
			if !strings.Contains(te.Message, tc.wantErr) {
				t.Fatalf("%q does not contain %q", te.Message, tc.wantErr)
			}
		})
	}
}

func TestExecute(t *testing.T) {
	s := engineering.New(nil)
	for _, d := range []string{"pressure", "geometry", "materials"} {
		mustCall(t, s, "c1", "dispatch_engineering", `{"domain": "`+d+`", "action": "activate"}`)
	}
	tests := []struct {
		name     string
		args     string
		wantText []string
		wantCode messages.ErrorCode
		wantErr  string
	}{
		{name: "object parameters", args: kesselCall, wantText: []string{`"value":0.3125`}},
		{
			name:     "string parameters are decoded and reported",
			args:     `{"tool_name": "pressure.solve_kesselformel", "parameters": "{\"p\": 10, \"d\": 100, \"sigma\": 160}"}`,
			wantText: []string{`"value":0.3125`, `"repairs":["parameters were a JSON string; decoded it as an object"]`},
		},
		{
			name:     "sloppy string parameters are repaired and reported",
			args:     `{"tool_name": "pressure.solve_kesselformel", "parameters": "{'p': 10, d: 100, 'sigma': 160,}"}`,
			wantText: []string{`"value":0.3125`, "parameters were a JSON string", "repaired the parameters' JSON: single_quotes"},
		},
		{
			name: "hopeless string parameters", args: `{"tool_name": "pressure.solve_kesselformel", "parameters": "p is ten bar"}`,
			wantCode: messages.CodeInvalidArguments, wantErr: "parameters were a string that is not a JSON object",
		},
		{
			name:     "parameters beside tool_name",
			args:     `{"tool_name": "pressure.solve_kesselformel", "p": 10, "d": 100, "sigma": 160}`,
			wantText: []string{`"value":0.3125`, "parameters were given beside tool_name"},
		},
		{
			name:     "repairs on a lookup",
			args:     `{"tool_name": "materials.lookup", "parameters": "{\"material\": \"16Mo3\"}"}`,
			wantText: []string{`"material":"16Mo3"`, `"repairs":["parameters were a JSON string`},
		},
		{name: "missing tool_name", args: `{"parameters": {}}`, wantCode: messages.CodeInvalidArguments, wantErr: "tool_name is missing"},
		{
			name: "unknown calculator of a known domain", args: `{"tool_name": "pressure.barlow", "parameters": {}}`, wantCode: messages.CodeUnknownTool,
			wantErr: "the calculators of pressure are pressure.ad2000_cylinder_wall, pressure.solve_force, pressure.solve_kesselformel",
		},
		{name: "near match", args: `{"tool_name": "solve_circle_area", "parameters": {}}`, wantCode: messages.CodeUnknownTool, wantErr: "did you mean geometry.solve_circle_area?"},
		{name: "typo", args: `{"tool_name": "geometry.solve_circle_aera", "parameters": {}}`, wantCode: messages.CodeUnknownTool, wantErr: "geometry.solve_circle_area"},
		{name: "nothing near", args: `{"tool_name": "weather", "parameters": {}}`, wantCode: messages.CodeUnknownTool, wantErr: "the domains are geometry, materials, pressure"},
		{name: "invalid parameters", args: `{"tool_name": "pressure.solve_kesselformel", "parameters": {"p": -1, "d": 100, "sigma": 160}}`, wantCode: messages.CodeInvalidArguments, wantErr: "p must be greater than 0"},
		{name: "parameters not an object", args: `{"tool_name": "pressure.solve_kesselformel", "parameters": 5}`, wantCode: messages.CodeInvalidArguments, wantErr: "parameters must be a JSON object"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := call(t, s, "c1", "execute_tool", tc.args)
			if tc.wantCode != "" {
				te := requireToolError(t, err, tc.wantCode)
				if !strings.Contains(te.Message, tc.wantErr) {
					t.Fatalf("%q does not contain %q", te.Message, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range tc.wantText {
				if !strings.Contains(string(out), want) {
					t.Errorf("%s does not contain %s", out, want)
				}
			}
		})
	}
}

func TestEmptyConversationIsPerRequest(t *testing.T) {
	store := engineering.NewMemorySessions()
	s := engineering.New(&engineering.Options{Sessions: store})
	out := mustCall(t, s, "", "execute_tool", kesselCall)
	if !strings.Contains(string(out), "no conversation id") {
		t.Errorf("result does not say it ran without activation: %s", out)
	}
	out = mustCall(t, s, "", "dispatch_engineering", `{"domain": "pressure", "action": "activate"}`)
	if !strings.Contains(string(out), "activation is not kept") {
		t.Errorf("activate does not say it is not kept: %s", out)
	}
	if got, _ := store.Get(context.Background(), ""); len(got.ActiveDomains) != 0 {
		t.Errorf("an empty conversation was stored: %+v", got)
	}
}

// failingStore fails every call, like a session bucket that cannot be reached.
type failingStore struct{ err error }

func (f failingStore) Get(context.Context, string) (engineering.Session, error) {
	return engineering.Session{}, f.err
}

func (f failingStore) Update(context.Context, string, func(*engineering.Session) error) error {
	return f.err
}

func TestStoreFailures(t *testing.T) {
	tests := []struct {
		name string
		err  error
		code messages.ErrorCode
	}{
		{name: "unreachable", err: errors.New("nats: no responders"), code: messages.CodeServerUnavailable},
		{name: "deadline", err: context.DeadlineExceeded, code: messages.CodeTimeout},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := engineering.New(&engineering.Options{Sessions: failingStore{tc.err}})
			_, err := call(t, s, "c1", "dispatch_engineering", `{"domain": "pressure", "action": "activate"}`)
			te := requireToolError(t, err, tc.code)
			if !errors.Is(te, tc.err) {
				t.Errorf("cause %v is not kept", te.Err)
			}
			_, err = call(t, s, "c1", "execute_tool", kesselCall)
			requireToolError(t, err, tc.code)
		})
	}
}

func TestUnknownTool(t *testing.T) {
	_, err := call(t, engineering.New(nil), "c1", "weather", `{}`)
	te := requireToolError(t, err, messages.CodeUnknownTool)
	if !strings.Contains(te.Message, "clock, dispatch_engineering, execute_tool") {
		t.Errorf("message %q does not list the tools", te.Message)
	}
}

func TestClock(t *testing.T) {
	now := time.Date(2025, 1, 13, 8, 30, 15, 999, time.FixedZone("CET", 3600))
	want := `{"utc":"2025-01-13T07:30:15Z","unix":1736753415,"date":"2025-01-13","time":"07:30:15","weekday":"Monday","iso_week":"2025-W03","day_of_year":13}`
	if got := string(engineering.Clock(now)); got != want {
		t.Fatalf("Clock = %s\nwant    %s", got, want)
	}
	s := engineering.New(&engineering.Options{Now: func() time.Time { return now }})
	if got := string(mustCall(t, s, "c1", "clock", `{}`)); got != want {
		t.Fatalf("clock tool = %s", got)
	}
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name    string
		opts    *engineering.Options
		wantErr bool
	}{
		{name: "nil", opts: nil},
		{name: "default", opts: &engineering.Options{}},
		{name: "flat", opts: &engineering.Options{Expose: "flat"}},
		{name: "hierarchical", opts: &engineering.Options{Expose: "hierarchical"}},
		{name: "typo", opts: &engineering.Options{Expose: "falt"}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.opts.Validate(); (err != nil) != tc.wantErr {
				t.Fatalf("Validate = %v, wantErr %v", err, tc.wantErr)
			}
		})
	}
	// An unknown expose hides the calculators rather than showing them.
	if n := len(engineering.New(&engineering.Options{Expose: "falt"}).Tools()); n != 3 {
		t.Errorf("%d tools with an unknown expose", n)
	}
}

// The dispatch tool says which of its calls change nothing: info and list are read-only
// (they may run beside their neighbours), activate is not.
func TestDispatchReadOnlyAnnotation(t *testing.T) {
	var dispatch *messages.ToolInfo
	tools := engineering.New(nil).Tools()
	for i := range tools {
		if tools[i].Name == engineering.ToolDispatch {
			dispatch = &tools[i]
		}
	}
	if dispatch == nil || dispatch.ReadOnly {
		t.Fatalf("dispatch tool %+v: want it listed, and not read-only as a whole", dispatch)
	}
	for _, tt := range []struct {
		args string
		want bool
	}{
		{`{"action": "info"}`, true},
		{`{"action": "LIST", "domain": "pressure"}`, true},
		{`{"action": "activate", "domain": "pressure"}`, false},
		{`{}`, false},
		{`{"action": 1}`, false},
		{`not json`, false},
	} {
		if got := dispatch.ReadOnlyWhen.Holds(json.RawMessage(tt.args)); got != tt.want {
			t.Errorf("%s: read-only %v, want %v", tt.args, got, tt.want)
		}
	}
}
