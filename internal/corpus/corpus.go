// Package corpus reads the golden corpora of toolbus's tests: txtar archives of cases,
// one file a topic. An archive is a comment, then sections "-- NAME --"; a case is the
// sections that share a prefix: CASE.in (the input; its final newline is not part of
// it), CASE.opts (options as JSON), CASE.want (the expected result) and CASE.source
// (where the input comes from: an upstream test, a chat template, a format document).
// With go test -update a test rewrites the .want sections from its results ([Rewrite])
// and writes the inputs as seeds of its fuzz target ([WriteSeed]).
package corpus

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Section is one "-- NAME --" section of an archive.
type Section struct{ Name, Data string }

// Parse splits an archive into its comment and its sections.
func Parse(data string) (comment string, secs []Section) {
	var cur *Section
	var b strings.Builder
	flush := func() {
		if cur == nil {
			comment = b.String()
		} else {
			cur.Data = b.String()
			secs = append(secs, *cur)
		}
		b.Reset()
	}
	for _, line := range strings.SplitAfter(data, "\n") {
		trimmed := strings.TrimRight(line, "\r\n")
		if strings.HasPrefix(trimmed, "-- ") && strings.HasSuffix(trimmed, " --") && len(trimmed) > 6 {
			flush()
			cur = &Section{Name: strings.TrimSpace(trimmed[3 : len(trimmed)-3])}
			continue
		}
		b.WriteString(line)
	}
	flush()
	return comment, secs
}

// Format is the archive of a comment and sections, as Parse reads it.
func Format(comment string, secs []Section) string {
	var b strings.Builder
	b.WriteString(comment)
	for _, s := range secs {
		fmt.Fprintf(&b, "-- %s --\n", s.Name)
		b.WriteString(s.Data)
		if s.Data != "" && !strings.HasSuffix(s.Data, "\n") {
			b.WriteString("\n")
		}
	}
	return b.String()
}

// Case is one case of an archive.
type Case struct {
	Name   string
	In     string
	Opts   string
	Want   string
	Source string
	// WantErr: the expected result is an error ("error: …", a repair) or has a failed
	// call ("…: error (…", an extraction).
	WantErr bool
}

// Load reads the cases of every archive in dir, by archive.
func Load(t testing.TB, dir string) map[string][]Case {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.txtar"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus in %s: %v", dir, err)
	}
	out := make(map[string][]Case)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		_, secs := Parse(string(data))
		var cases []Case
		index := map[string]int{}
		for _, s := range secs {
			name, kind, ok := strings.Cut(s.Name, ".")
			if !ok {
				t.Fatalf("%s: section %q is not CASE.in, CASE.opts or CASE.want", f, s.Name)
			}
			i, seen := index[name]
			if !seen {
				i = len(cases)
				index[name] = i
				cases = append(cases, Case{Name: name})
			}
			switch kind {
			case "in":
				cases[i].In = strings.TrimSuffix(s.Data, "\n")
			case "opts":
				cases[i].Opts = s.Data
			case "source":
				cases[i].Source = strings.TrimSpace(s.Data)
			case "want":
				cases[i].Want = s.Data
				cases[i].WantErr = strings.HasPrefix(s.Data, "error:") || strings.Contains(s.Data, ": error (")
			default:
				t.Fatalf("%s: unknown section kind %q", f, s.Name)
			}
		}
		out[f] = cases
	}
	return out
}

// Inputs returns the inputs of every case in dir, archive by archive.
func Inputs(t testing.TB, dir string) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.txtar"))
	var in []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		_, secs := Parse(string(data))
		for _, s := range secs {
			if strings.HasSuffix(s.Name, ".in") {
				in = append(in, strings.TrimSuffix(s.Data, "\n"))
			}
		}
	}
	return in
}

// Rewrite replaces the .want sections of archive f with got, by case name, each after
// the other sections of its case.
func Rewrite(t *testing.T, f string, got map[string]string) {
	t.Helper()
	data, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	comment, secs := Parse(string(data))
	var out []Section
	for i, s := range secs {
		name, kind, _ := strings.Cut(s.Name, ".")
		if kind != "want" {
			out = append(out, s)
		}
		next := ""
		if i+1 < len(secs) {
			next, _, _ = strings.Cut(secs[i+1].Name, ".")
		}
		if w, ok := got[name]; ok && next != name {
			out = append(out, Section{Name: name + ".want", Data: w})
		}
	}
	if err := os.WriteFile(f, []byte(Format(comment, out)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// WriteSeed writes case name of archive as a seed of fuzz target fuzz, in
// testdata/fuzz/FUZZ/ARCHIVE-NAME; values are the seed's lines after its header.
func WriteSeed(t *testing.T, fuzz, archive, name, values string) {
	t.Helper()
	dir := filepath.Join("testdata", "fuzz", fuzz)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := strings.TrimSuffix(filepath.Base(archive), ".txtar") + "-" + name
	if err := os.WriteFile(filepath.Join(dir, file), []byte("go test fuzz v1\n"+values), 0o644); err != nil {
		t.Fatal(err)
	}
}
