package jsonrepair

import (
	"encoding/json"
	"strings"
	"testing"
)

// Benchmark inputs; -benchmem shows allocations.

// validArgs is valid JSON of the size of a large set of arguments.
var validArgs = func() string {
	b, _ := json.Marshal(map[string]any{
		"query": "pressure vessel wall thickness according to EN 13445-3, cylindrical shell",
		"filters": []map[string]any{
			{"field": "standard", "op": "eq", "value": "EN 13445"},
			{"field": "year", "op": "gte", "value": 2019},
			{"field": "tags", "op": "in", "value": []string{"pressure", "vessel", "shell", "ümlaut ✓"}},
		},
		"limit": 25, "offset": 0, "explain": true, "score": 0.75, "note": nil,
		"content": strings.Repeat("Line of text with \"quotes\" and \\ backslashes\n", 20),
	})
	return string(b)
}()

// brokenArgs is the same arguments as a model might botch them.
var brokenArgs = strings.NewReplacer(`"query"`, `query`, `"limit"`, `limit`, `true`, `True`, `null`, `None`).Replace(validArgs[:len(validArgs)-1]) + `,`

func BenchmarkRepairValid(b *testing.B) {
	b.SetBytes(int64(len(validArgs)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Repair(validArgs); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkJSONValid is the yardstick for BenchmarkRepairValid: encoding/json's
// validation of the same bytes (without the string conversion Repair pays).
func BenchmarkJSONValid(b *testing.B) {
	data := []byte(validArgs)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if !json.Valid(data) {
			b.Fatal("invalid")
		}
	}
}

func BenchmarkRepairBroken(b *testing.B) {
	b.SetBytes(int64(len(brokenArgs)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Repair(brokenArgs); err != nil {
			b.Fatal(err)
		}
	}
}
