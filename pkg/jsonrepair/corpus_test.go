package jsonrepair

import (
	"encoding/json"
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolbus/toolbus/internal/corpus"
)

var update = flag.Bool("update", false, "rewrite the .want sections of testdata/repair/*.txtar and testdata/kaptinlin_differences.txt from the results")

// repairCorpus holds the repair corpus (see internal/corpus): each case's .want is
// renderRepair's.
var repairCorpus = filepath.Join("testdata", "repair")

// renderRepair is the golden form of a Repair result.
func renderRepair(in string) string {
	out, repairs, err := Repair(in)
	if err != nil {
		return "error: " + err.Error() + "\n"
	}
	s := string(out) + "\n"
	if len(repairs) > 0 {
		s += "repairs: " + strings.Join(repairs, " ") + "\n"
	}
	return s
}

func TestRepairCorpus(t *testing.T) {
	for f, cases := range corpus.Load(t, repairCorpus) {
		got := map[string]string{}
		for _, tt := range cases {
			t.Run(filepath.Base(f)+"/"+tt.Name, func(t *testing.T) {
				res := renderRepair(tt.In)
				got[tt.Name] = res
				if *update {
					return
				}
				if res != tt.Want {
					t.Errorf("Repair(%q)\n got: %s\nwant: %s", tt.In, res, tt.Want)
				}
				out, _, err := Repair(tt.In)
				if (err != nil) != tt.WantErr {
					t.Fatalf("err = %v, wantErr %v", err, tt.WantErr)
				}
				if err == nil && !json.Valid(out) {
					t.Errorf("output is not valid JSON: %s", out)
				}
			})
		}
		if *update {
			corpus.Rewrite(t, f, got)
			for _, tt := range cases {
				corpus.WriteSeed(t, "FuzzRepair", f, tt.Name, fmt.Sprintf("string(%q)\n", tt.In))
			}
		}
	}
}
