package bench

import (
	"context"
	"slices"
	"time"
)

// Point is one configuration of a sweep: its width, concurrency and catalog.
type Point struct {
	CallsPerResponse int `json:"calls_per_response"`
	Concurrency      int `json:"concurrency"`
	Catalog          int `json:"catalog,omitempty"`
}

// PointReport is what a sweep measured at one point: the medians of its rounds.
type PointReport struct {
	Point
	CallsPerSec            float64 `json:"calls_per_sec"`
	CPUSecondsPer1000Calls float64 `json:"cpu_seconds_per_1000_calls"`
	P50ms                  float64 `json:"p50_ms"`
	P99ms                  float64 `json:"p99_ms"`
	// VsFirst is CallsPerSec over the first point's; CPUVsFirst the same of the CPU per
	// call.
	VsFirst    float64 `json:"vs_first"`
	CPUVsFirst float64 `json:"cpu_vs_first"`
}

// Sweep runs the toolbus pipeline (no ceiling) at every point in turn, o.Rounds times
// (alternately: round one of every point, then round two, …), each on a fresh embedded
// server with o's other options, and reports each point's medians: how the cost of a
// call scales with the width of a response and the size of the catalog, measured side by
// side on one machine.
func Sweep(ctx context.Context, o Options, points []Point) ([]PointReport, error) {
	o.defaults()
	o.NoPaced, o.Console, o.ConsoleReady = true, false, nil
	type samples struct {
		rate, cpu []float64
		lat       []time.Duration
	}
	got := make([]samples, len(points))
	for k := range max(o.Rounds, 1) {
		for i, p := range points {
			po := o
			po.CallsPerResponse, po.Concurrency, po.Catalog = max(p.CallsPerResponse, 1), max(p.Concurrency, 1), p.Catalog
			po.Tool = o.Tool
			if p.Catalog > 0 {
				po.Tool = catalogTool
			}
			if k > 0 {
				po.Profile, po.AllocProfile = nil, nil
			}
			text := responseText(po.Tool, po.CallsPerResponse, po.Catalog)
			lat, _, secs, cpu, err := runPipeline(ctx, po, text, &Report{})
			if err != nil {
				return nil, err
			}
			calls := float64(po.Responses * po.CallsPerResponse)
			got[i].rate = append(got[i].rate, calls/secs)
			got[i].cpu = append(got[i].cpu, cpu/calls*1000)
			got[i].lat = append(got[i].lat, lat...)
		}
	}
	out := make([]PointReport, len(points))
	for i, p := range points {
		p.CallsPerResponse, p.Concurrency = max(p.CallsPerResponse, 1), max(p.Concurrency, 1)
		out[i] = PointReport{Point: p, CallsPerSec: median(got[i].rate), CPUSecondsPer1000Calls: median(got[i].cpu),
			P50ms: pct(got[i].lat, 50), P99ms: pct(got[i].lat, 99)}
		out[i].VsFirst = out[i].CallsPerSec / out[0].CallsPerSec
		out[i].CPUVsFirst = out[i].CPUSecondsPer1000Calls / out[0].CPUSecondsPer1000Calls
	}
	return out, nil
}

func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
