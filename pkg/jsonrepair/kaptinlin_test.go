// The side-by-side benchmark with github.com/kaptinlin/jsonrepair, a test dependency in
// go.mod, on the same inputs (README.md has the figures and how they were taken):
//
//	go test -run Kaptinlin -v ./pkg/jsonrepair/
//	go test -run '^$' -bench SideBySide -benchmem -count 10 ./pkg/jsonrepair/

package jsonrepair

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	kaptinlin "github.com/kaptinlin/jsonrepair"

	"github.com/toolbus/toolbus/internal/corpus"
)

// invalid9k is the 9 KB broken JSON file of json_repair's performance test
// (testdata/conformance/invalid.json), which it must repair in under 3 ms.
func invalid9k(tb testing.TB) string {
	b, err := os.ReadFile(filepath.Join("testdata", "conformance", "invalid.json"))
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

func BenchmarkSideBySide(b *testing.B) {
	corpus := corpus.Inputs(b, repairCorpus)
	size := 0
	for _, s := range corpus {
		size += len(s)
	}
	sets := []struct {
		name   string
		inputs []string
		bytes  int
	}{
		{"valid", []string{validArgs}, len(validArgs)},
		{"broken", []string{brokenArgs}, len(brokenArgs)},
		{"corpus", corpus, size},
		{"invalid9k", []string{invalid9k(b)}, len(invalid9k(b))},
	}
	for _, set := range sets {
		b.Run(set.name+"/toolbus", func(b *testing.B) {
			b.SetBytes(int64(set.bytes))
			b.ReportAllocs()
			for b.Loop() {
				for _, s := range set.inputs {
					_, _, _ = Repair(s)
				}
			}
		})
		b.Run(set.name+"/kaptinlin", func(b *testing.B) {
			b.SetBytes(int64(set.bytes))
			b.ReportAllocs()
			for b.Loop() {
				for _, s := range set.inputs {
					_, _ = kaptinlin.Repair(s)
				}
			}
		})
	}
}

// TestKaptinlinAgreement reports where the two libraries read the corpus differently.
// TestKaptinlinAgreement compares toolbus's repairs with kaptinlin/jsonrepair's on the
// repair corpus. Every input where the two disagree is listed, with how, in
// testdata/kaptinlin_differences.txt (rewritten with -update): a change of behaviour on
// any input, in either direction, fails here until the list is updated deliberately.
func TestKaptinlinAgreement(t *testing.T) {
	same := 0
	var differences []string
	for _, in := range corpus.Inputs(t, repairCorpus) {
		ours, _, err1 := Repair(in)
		theirs, err2 := kaptinlin.Repair(in)
		q, _ := json.Marshal(in)
		switch {
		case err1 != nil && err2 != nil:
			same++
		case err1 != nil:
			differences = append(differences, "only kaptinlin repairs "+string(q))
		case err2 != nil:
			differences = append(differences, "only toolbus repairs "+string(q))
		case equalJSON(ours, []byte(theirs)):
			same++
		default:
			differences = append(differences, "different repairs of "+string(q))
		}
	}
	t.Logf("same %d, different %d", same, len(differences))
	got := strings.Join(differences, "\n") + "\n"
	path := filepath.Join("testdata", "kaptinlin_differences.txt")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("the inputs where toolbus and kaptinlin/jsonrepair disagree changed (run with -update after checking):\n--- got ---\n%s--- want ---\n%s", got, want)
	}
}

func equalJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}
