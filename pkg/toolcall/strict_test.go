package toolcall

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolbus/toolbus/internal/corpus"
	"github.com/toolbus/toolbus/pkg/jsonrepair"
	"github.com/toolbus/toolbus/pkg/jsonscan"
)

// checkMemberSpans checks that scanStrictMembers scans s as jsonscan.Value does (where
// it fails too: readValue leaves text too deep to jsonrepair's Reader, which must fail
// at the same place), and that the members it records, when s is a valid object, are
// the members the walk over it finds.
func checkMemberSpans(t *testing.T, s string) {
	t.Helper()
	var rec memberSpans
	end, res := scanStrictMembers(s, 0, DefaultMaxDepth, &rec)
	if end2, res2 := jsonscan.Value(s, 0, DefaultMaxDepth, jsonscan.Strict); res != res2 || res != jsonscan.Invalid && end != end2 {
		t.Fatalf("scanStrictMembers(%q) = %d %v, jsonscan.Value %d %v", s, end, res, end2, res2)
	}
	if res != jsonscan.OK {
		return
	}
	v := strings.TrimLeft(s[:end], " \t\r\n")
	if v[0] != '{' {
		if rec.of(v) != nil {
			t.Fatalf("scanStrictMembers(%q) recorded members of a non-object", s)
		}
		return
	}
	walk, fromRec := objectMembers(v, nil), objectMembers(v, &rec)
	if fromRec.rec == nil {
		if strings.Count(v, ":") <= len(rec.spans) {
			t.Fatalf("scanStrictMembers(%q) recorded no members", s)
		}
		return
	}
	for {
		k1, vs1, ve1, ok1 := walk.next()
		k2, vs2, ve2, ok2 := fromRec.next()
		if k1 != k2 || vs1 != vs2 || ve1 != ve2 || ok1 != ok2 {
			t.Fatalf("members of %q: walked %q %d:%d %v, recorded %q %d:%d %v", v, k1, vs1, ve1, ok1, k2, vs2, ve2, ok2)
		}
		if !ok1 {
			return
		}
	}
}

func TestMemberSpans(t *testing.T) {
	for _, s := range []string{
		`{}`, ` { } `, `{"a":1}`, `{"a" : 1 , "b" :[1,{"c":2}] ,"d":{}}`, "\n{\"k\"\t:\n\"v\"}\n",
		`{"a":[],"b":{},"c":"x\"y","d":null,"e":true,"f":-1.5e3}`,
		`{"1":1,"2":2,"3":3,"4":4,"5":5,"6":6,"7":7,"8":8}`,
		`{"1":1,"2":2,"3":3,"4":4,"5":5,"6":6,"7":7,"8":8,"9":9}`,
		`[{"a":1}]`, `"{\"a\":1}"`, `{"a":{"b":{"c":{}}}}`,
	} {
		checkMemberSpans(t, s)
	}
	// The repair corpus, and its repairs: JSON of every shape.
	for _, s := range corpus.Inputs(t, filepath.Join("..", "jsonrepair", "testdata", "repair")) {
		checkMemberSpans(t, s)
		if out, _, err := jsonrepair.Repair(s); err == nil {
			checkMemberSpans(t, string(out))
		}
	}
}
