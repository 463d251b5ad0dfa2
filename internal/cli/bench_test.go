package cli

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/toolbus/toolbus/internal/bench"
)

// `toolbus bench --json` ends with one JSON object of the figures: a short run here (the
// figures themselves are recorded in docs/performance.md, not asserted).
func TestBenchPrintsTheFigures(t *testing.T) {
	stdout, stderr, code := runMain(t, "", "bench", "--json", "--responses", "200", "--calls-per-response", "2", "--concurrency", "8")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	r := lastJSON(t, stdout)
	for _, k := range []string{"calls_per_sec", "p50_ms", "p99_ms", "ceiling_calls_per_sec", "ratio",
		"cpu_seconds_per_1000_calls", "paced_responses_per_sec", "paced_p50_ms", "paced_p99_ms", "ceiling_paced_p50_ms"} {
		if v, ok := r[k].(float64); !ok || v <= 0 {
			t.Errorf("%s = %v, want a positive number", k, r[k])
		}
	}
	if r["calls"] != float64(400) || r["responses"] != float64(200) {
		t.Errorf("calls %v, responses %v; want 400 and 200", r["calls"], r["responses"])
	}
	if r["p50_ms"].(float64) > r["p99_ms"].(float64) {
		t.Errorf("p50 %v above p99 %v", r["p50_ms"], r["p99_ms"])
	}
	for _, want := range []string{"toolbus:", "paced at", "ceiling (same hops", "ratio toolbus / ceiling"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the report lacks %q:\n%s", want, stdout)
		}
	}
}

// --rounds repeats the three runs and reports each round and the medians.
func TestBenchRounds(t *testing.T) {
	stdout, stderr, code := runMain(t, "", "bench", "--json", "--responses", "50", "--no-paced", "--rounds", "3")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var r struct {
		CallsPerSec  float64 `json:"calls_per_sec"`
		RatioVsRelay float64 `json:"ratio_vs_relay"`
		Rounds       []struct {
			CallsPerSec      float64 `json:"calls_per_sec"`
			RelayCallsPerSec float64 `json:"relay_calls_per_sec"`
			RatioVsRelay     float64 `json:"ratio_vs_relay"`
		} `json:"rounds"`
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Rounds) != 3 {
		t.Fatalf("%d rounds, want 3:\n%s", len(r.Rounds), stdout)
	}
	calls, ratios := []float64{}, []float64{}
	for _, x := range r.Rounds {
		if x.CallsPerSec <= 0 || x.RelayCallsPerSec <= 0 {
			t.Errorf("a round without figures: %+v", x)
		}
		if d := x.RatioVsRelay - x.CallsPerSec/x.RelayCallsPerSec; d > 1e-9 || d < -1e-9 {
			t.Errorf("round ratio %v, its figures give %v", x.RatioVsRelay, x.CallsPerSec/x.RelayCallsPerSec)
		}
		calls, ratios = append(calls, x.CallsPerSec), append(ratios, x.RatioVsRelay)
	}
	slices.Sort(calls)
	slices.Sort(ratios)
	if r.CallsPerSec != calls[1] || r.RatioVsRelay != ratios[1] {
		t.Errorf("calls/s %v and ratio %v are not the medians of %v and %v", r.CallsPerSec, r.RatioVsRelay, calls, ratios)
	}
	if !strings.Contains(stdout, "round 3:") {
		t.Errorf("the report does not list the rounds:\n%s", stdout)
	}
}

func TestBenchInProcess(t *testing.T) {
	stdout, stderr, code := runMain(t, "", "bench", "--json", "--responses", "50", "--no-paced", "--in-process", "--console")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	r := lastJSON(t, stdout)
	if r["in_process"] != true || r["console"] != true || r["calls"] != float64(50) || r["paced_p50_ms"] != nil {
		t.Errorf("in_process %v, calls %v, paced_p50_ms %v", r["in_process"], r["calls"], r["paced_p50_ms"])
	}
	if !strings.Contains(stdout, "connected in process") {
		t.Errorf("the report does not say how it connected:\n%s", stdout)
	}
}

// `toolbus bench --stream --json` ends with the streamed and whole figures measured
// side by side (a short run: fast tokens, a short tool; the figures are not asserted,
// only that both were measured).
func TestBenchStream(t *testing.T) {
	stdout, stderr, code := runMain(t, "", "bench", "--stream", "--json", "--responses", "4", "--concurrency", "2",
		"--tokens-per-sec", "2000", "--tool-latency", "20ms")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	r := lastJSON(t, stdout)
	for _, k := range []string{"streamed_p50_ms", "whole_p50_ms", "bus_p50_ms", "write_seconds"} {
		if v, ok := r[k].(float64); !ok || v <= 0 {
			t.Errorf("%s = %v, want a positive number", k, r[k])
		}
	}
	if r["responses"] != float64(4) || r["calls_per_response"] != float64(3) || r["tool_latency_ms"] != float64(20) {
		t.Errorf("responses %v, calls %v, tool latency %v", r["responses"], r["calls_per_response"], r["tool_latency_ms"])
	}
	if !strings.Contains(stdout, "streamed p50") {
		t.Errorf("the report:\n%s", stdout)
	}
}

// lastJSON reads the JSON object a report ends with.
func lastJSON(t *testing.T, stdout string) map[string]any {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	var r map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
		t.Fatalf("last line is not a JSON object: %v\n%s", err, stdout)
	}
	return r
}

// A list of widths, concurrencies or catalogs sweeps: each point in turn, every round,
// one line and one JSON object each, the first point the measure of the others.
func TestBenchSweep(t *testing.T) {
	stdout, stderr, code := runMain(t, "", "bench", "--json", "--responses", "20", "--rounds", "2",
		"--calls-per-response", "1,4", "--concurrency", "4,1", "--catalog", "10,300")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	var points []struct {
		CallsPerResponse int     `json:"calls_per_response"`
		Concurrency      int     `json:"concurrency"`
		Catalog          int     `json:"catalog"`
		CallsPerSec      float64 `json:"calls_per_sec"`
		CPU              float64 `json:"cpu_seconds_per_1000_calls"`
		VsFirst          float64 `json:"vs_first"`
		P50ms            float64 `json:"p50_ms"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &points); err != nil {
		t.Fatalf("the last line is not the points' JSON: %v\n%s", err, stdout)
	}
	want := [][3]int{{1, 4, 10}, {4, 1, 300}}
	if len(points) != len(want) {
		t.Fatalf("%d points, want %d:\n%s", len(points), len(want), stdout)
	}
	for i, p := range points {
		if [3]int{p.CallsPerResponse, p.Concurrency, p.Catalog} != want[i] || p.CallsPerSec <= 0 || p.CPU <= 0 || p.P50ms <= 0 || p.VsFirst <= 0 {
			t.Errorf("point %d: %+v, want %v with positive figures", i, p, want[i])
		}
	}
	if points[0].VsFirst != 1 {
		t.Errorf("the first point's ratio to itself is %v", points[0].VsFirst)
	}
	if !strings.Contains(stdout, "calls/response") || strings.Count(stdout, "\n") < 4 {
		t.Errorf("no table:\n%s", stdout)
	}
	// Lists of different lengths do not pair.
	if _, _, code := runMain(t, "", "bench", "--calls-per-response", "1,2,3", "--concurrency", "4,1"); code == 0 {
		t.Error("lists of 3 and 2 points were taken")
	}
}

// `toolbus bench --front-door` calls one MCP server's tool through the front door and
// directly, and reports both: every call answered, each figure there.
func TestBenchFrontDoor(t *testing.T) {
	stdout, stderr, code := runMain(t, "", "bench", "--front-door", "--responses", "20", "--concurrency", "2", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	var r bench.FrontDoorReport
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	if r.Calls != 20 || r.Concurrency != 2 || r.DoorCallsPerSec <= 0 || r.DoorP50ms <= 0 || r.DirectCallsPerSec <= 0 || r.DirectP50ms <= 0 {
		t.Errorf("report %+v", r)
	}
	if !strings.Contains(stdout, "through toolbus's front door") || !strings.Contains(stdout, "straight to the server") {
		t.Errorf("output:\n%s", stdout)
	}
}

// `toolbus bench --remote` calls a remote MCP server's tool directly and through toolbus,
// beside the plain relay, at one in flight and at 256, and reports the added latency
// against the relay's and the rates' ratio: every figure there and consistent.
func TestBenchRemote(t *testing.T) {
	stdout, stderr, code := runMain(t, "", "bench", "--remote", "--responses", "30", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	var r bench.RemoteReport
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	if len(r.Points) != 2 || r.Points[0].Concurrency != 1 || r.Points[1].Concurrency != 256 {
		t.Fatalf("points %+v", r.Points)
	}
	if p := r.Points[0]; p.Tool != "echo__echo" || p.DirectP50ms <= 0 || p.DirectCallsPerSec <= 0 {
		t.Errorf("one in flight: %+v", p)
	}
	if p := r.Points[1]; p.Tool != "execute_tool" || p.DirectP50ms != 0 || p.AddedP50ms != 0 {
		t.Errorf("256 in flight: %+v", p)
	}
	for _, p := range r.Points {
		if p.Calls != 30 || p.ToolbusP50ms <= 0 || p.RelayP50ms <= 0 || p.ToolbusCallsPerSec <= 0 || p.RelayCallsPerSec <= 0 {
			t.Errorf("point %+v", p)
		}
		if d := p.AddedP50ms - (p.ToolbusP50ms - p.DirectP50ms); p.DirectP50ms > 0 && (d > 1e-9 || d < -1e-9) {
			t.Errorf("added %v, toolbus %v − direct %v", p.AddedP50ms, p.ToolbusP50ms, p.DirectP50ms)
		}
		if d := p.ToolbusVsRelay - p.ToolbusCallsPerSec/p.RelayCallsPerSec; d > 1e-9 || d < -1e-9 {
			t.Errorf("toolbus / relay %v of %v and %v", p.ToolbusVsRelay, p.ToolbusCallsPerSec, p.RelayCallsPerSec)
		}
	}
	if !strings.Contains(stdout, "added / relay") || !strings.Contains(stdout, "toolbus / relay") {
		t.Errorf("output:\n%s", stdout)
	}
}
