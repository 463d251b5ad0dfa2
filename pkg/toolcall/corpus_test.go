package toolcall

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the .want sections of testdata/*/*.txtar from the results")

// The corpus is txtar archives: a comment, then sections "-- NAME --". A case is the
// sections that share a prefix: CASE.in (the input; its final newline is not part of
// it), CASE.opts (Options as JSON, for extraction), CASE.want (the expected result) and
// CASE.source (where the input comes from: an upstream test, a chat template, a format
// document).

type section struct{ name, data string }

func parseTxtar(data string) (comment string, secs []section) {
	var cur *section
	var b strings.Builder
	flush := func() {
		if cur == nil {
			comment = b.String()
		} else {
			cur.data = b.String()
			secs = append(secs, *cur)
		}
		b.Reset()
	}
	for _, line := range strings.SplitAfter(data, "\n") {
		trimmed := strings.TrimRight(line, "\r\n")
		if strings.HasPrefix(trimmed, "-- ") && strings.HasSuffix(trimmed, " --") && len(trimmed) > 6 {
			flush()
			cur = &section{name: strings.TrimSpace(trimmed[3 : len(trimmed)-3])}
			continue
		}
		b.WriteString(line)
	}
	flush()
	return comment, secs
}

func formatTxtar(comment string, secs []section) string {
	var b strings.Builder
	b.WriteString(comment)
	for _, s := range secs {
		fmt.Fprintf(&b, "-- %s --\n", s.name)
		b.WriteString(s.data)
		if s.data != "" && !strings.HasSuffix(s.data, "\n") {
			b.WriteString("\n")
		}
	}
	return b.String()
}

type corpusCase struct {
	name    string
	in      string
	opts    string
	want    string
	wantErr bool // the expected result is an error (repair) or has a failed call (extract)
	source  string
}

// loadCorpus reads the cases of every archive in testdata/dir.
func loadCorpus(t testing.TB, dir string) map[string][]corpusCase {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", dir, "*.txtar"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus in testdata/%s: %v", dir, err)
	}
	out := make(map[string][]corpusCase)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		_, secs := parseTxtar(string(data))
		var cases []corpusCase
		index := map[string]int{}
		for _, s := range secs {
			name, kind, ok := strings.Cut(s.name, ".")
			if !ok {
				t.Fatalf("%s: section %q is not CASE.in, CASE.opts or CASE.want", f, s.name)
			}
			i, seen := index[name]
			if !seen {
				i = len(cases)
				index[name] = i
				cases = append(cases, corpusCase{name: name})
			}
			switch kind {
			case "in":
				cases[i].in = strings.TrimSuffix(s.data, "\n")
			case "opts":
				cases[i].opts = s.data
			case "source":
				cases[i].source = strings.TrimSpace(s.data)
			case "want":
				cases[i].want = s.data
				cases[i].wantErr = strings.HasPrefix(s.data, "error:") || strings.Contains(s.data, ": error (")
			default:
				t.Fatalf("%s: unknown section kind %q", f, s.name)
			}
		}
		out[f] = cases
	}
	return out
}

// rewrite replaces the .want sections of archive f with got, each after the other
// sections of its case.
func rewrite(t *testing.T, f string, got map[string]string) {
	t.Helper()
	data, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	comment, secs := parseTxtar(string(data))
	var out []section
	for i, s := range secs {
		name, kind, _ := strings.Cut(s.name, ".")
		if kind != "want" {
			out = append(out, s)
		}
		next := ""
		if i+1 < len(secs) {
			next, _, _ = strings.Cut(secs[i+1].name, ".")
		}
		if w, ok := got[name]; ok && next != name {
			out = append(out, section{name: name + ".want", data: w})
		}
	}
	if err := os.WriteFile(f, []byte(formatTxtar(comment, out)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// renderRepair is the golden form of a RepairJSON result.
func renderRepair(in string) string {
	out, repairs, err := RepairJSON(in)
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
	for f, cases := range loadCorpus(t, "repair") {
		got := map[string]string{}
		for _, tt := range cases {
			t.Run(filepath.Base(f)+"/"+tt.name, func(t *testing.T) {
				res := renderRepair(tt.in)
				got[tt.name] = res
				if *update {
					return
				}
				if res != tt.want {
					t.Errorf("RepairJSON(%q)\n got: %s\nwant: %s", tt.in, res, tt.want)
				}
				out, _, err := RepairJSON(tt.in)
				if (err != nil) != tt.wantErr {
					t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
				}
				if err == nil && !json.Valid(out) {
					t.Errorf("output is not valid JSON: %s", out)
				}
			})
		}
		if *update {
			rewrite(t, f, got)
			for _, tt := range cases {
				writeSeed(t, "FuzzRepairJSON", f, tt.name, fmt.Sprintf("string(%q)\n", tt.in))
			}
		}
	}
}

// writeSeed writes a case of the corpus as a seed of fuzz target fuzz.
func writeSeed(t *testing.T, fuzz, archive, name, values string) {
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

// renderExtraction is the golden form of an Extract result.
func renderExtraction(ex Extraction) string {
	var b strings.Builder
	for _, c := range ex.Calls {
		if c.Err != nil {
			fmt.Fprintf(&b, "call %d: error (%s) name=%q: %s\n", c.Index, c.Format, c.Name, c.Err.Error())
		} else {
			var args bytes.Buffer
			if err := json.Compact(&args, c.Arguments); err != nil {
				args.WriteString("INVALID " + string(c.Arguments))
			}
			fmt.Fprintf(&b, "call %d: %s (%s) %s\n", c.Index, c.Name, c.Format, args.String())
		}
		if len(c.Repairs) > 0 {
			fmt.Fprintf(&b, "  repairs: %s\n", strings.Join(c.Repairs, " "))
		}
	}
	if ex.Content != "" {
		fmt.Fprintf(&b, "content: %q\n", ex.Content)
	}
	if ex.Reasoning != "" {
		fmt.Fprintf(&b, "reasoning: %q\n", ex.Reasoning)
	}
	if b.Len() == 0 {
		return "nothing\n"
	}
	return b.String()
}

// corpusOptions is how a case's .opts section spells Options.
type corpusOptions struct {
	KnownTools []string                   `json:"known_tools"`
	Schemas    map[string]json.RawMessage `json:"schemas"`
	Format     string                     `json:"format"`
	MaxCalls   int                        `json:"max_calls"`
	MaxDepth   int                        `json:"max_depth"`
	MaxInput   int                        `json:"max_input_size"`
}

func TestExtractCorpus(t *testing.T) {
	for f, cases := range loadCorpus(t, "extract") {
		got := map[string]string{}
		for _, tt := range cases {
			t.Run(filepath.Base(f)+"/"+tt.name, func(t *testing.T) {
				var opts *Options
				if tt.opts != "" {
					var co corpusOptions
					if err := json.Unmarshal([]byte(tt.opts), &co); err != nil {
						t.Fatalf("opts: %v", err)
					}
					format, err := ParseFormat(co.Format)
					if err != nil {
						t.Fatal(err)
					}
					opts = &Options{KnownTools: co.KnownTools, Schemas: co.Schemas, Format: format,
						MaxCalls: co.MaxCalls, MaxDepth: co.MaxDepth, MaxInputSize: co.MaxInput}
				}
				ex := Extract(tt.in, opts)
				res := renderExtraction(ex)
				got[tt.name] = res
				checkExtraction(t, tt.in, ex)
				if *update {
					return
				}
				if res != tt.want {
					t.Errorf("Extract(%q)\n got:\n%s\nwant:\n%s", tt.in, res, tt.want)
				}
				failed := false
				for _, c := range ex.Calls {
					failed = failed || c.Err != nil
				}
				if failed != tt.wantErr {
					t.Errorf("a call failed: %v, wantErr %v", failed, tt.wantErr)
				}
			})
		}
		if *update {
			rewrite(t, f, got)
			for i, tt := range cases {
				writeSeed(t, "FuzzExtract", f, tt.name, fmt.Sprintf("string(%q)\nbyte(%q)\n", tt.in, byte(i)))
			}
		}
	}
}

// checkExtraction checks what every extraction must satisfy.
func checkExtraction(t *testing.T, in string, ex Extraction) {
	t.Helper()
	for i, c := range ex.Calls {
		if c.Index != i {
			t.Errorf("call %d has Index %d", i, c.Index)
		}
		if !json.Valid(c.Arguments) || len(c.Arguments) == 0 || c.Arguments[0] != '{' {
			t.Errorf("call %d: arguments %q are not a JSON object", i, c.Arguments)
		}
		if c.Err == nil && c.Name == "" {
			t.Errorf("call %d has no name and no error", i)
		}
		if c.Start < 0 || c.End > len(in) || c.Start > c.End || in[c.Start:c.End] != c.Raw {
			t.Errorf("call %d: Raw %q is not in[%d:%d]", i, c.Raw, c.Start, c.End)
		}
	}
}

// TestCorpusEveryFormat checks that the corpus holds, for every format, the two halves of
// the cut-off rule: a call the response ends inside of a value of (a parse_error, never
// run), and a call that lacks only closers after complete values (repaired, and run);
// and that every case of the formats added with issue 34 says where its input comes from.
func TestCorpusEveryFormat(t *testing.T) {
	cut, closers := map[Format]bool{}, map[Format]bool{}
	for f, cases := range loadCorpus(t, "extract") {
		for _, tt := range cases {
			if newFormatArchives[filepath.Base(f)] && tt.source == "" {
				t.Errorf("%s/%s: no .source section", filepath.Base(f), tt.name)
			}
			ex := Extract(tt.in, corpusOpts(t, tt.opts))
			for _, c := range ex.Calls {
				switch {
				case c.Err != nil && strings.Contains(c.Err.Message, "was cut off"):
					cut[c.Format] = true
				case c.Err == nil && strings.HasSuffix(tt.name, "cut_closers") && c.Index == len(ex.Calls)-1:
					closers[c.Format] = true
				}
			}
		}
	}
	for _, f := range Formats() {
		if !cut[f] {
			t.Errorf("format %s: no case of a call cut off inside a value", f)
		}
		if !closers[f] {
			t.Errorf("format %s: no case *cut_closers of a call lacking only its closers", f)
		}
	}
}

// newFormatArchives are the archives of issue 34, whose cases all name their source.
var newFormatArchives = map[string]bool{"harmony.txtar": true, "gemma.txtar": true,
	"xml_sections.txtar": true, "json_sections.txtar": true, "functionary.txtar": true,
	"lfm2.txtar": true, "reasoning_families.txtar": true, "model_aliases.txtar": true, "llama_cpp.txtar": true}

// TestAutoMatchesPinned checks that auto-detection never mistakes one format for another
// on the corpus: every call found without a format pin is found alike — name, arguments,
// error — with the format pinned to the one detected.
func TestAutoMatchesPinned(t *testing.T) {
	for f, cases := range loadCorpus(t, "extract") {
		for _, tt := range cases {
			opts := corpusOpts(t, tt.opts)
			if opts == nil {
				opts = &Options{}
			}
			if opts.Format != FormatAuto || len(opts.KnownTools) == 0 && strings.Contains(tt.want, "(json)") {
				continue
			}
			auto := Extract(tt.in, opts)
			formats := map[Format]bool{}
			for _, c := range auto.Calls {
				formats[c.Format] = true
			}
			for format := range formats {
				var pinned []Call
				for _, pin := range pinnedAs(format) {
					o := *opts
					o.Format = pin
					pinned = append(pinned, Extract(tt.in, &o).Calls...)
				}
				for _, c := range auto.Calls {
					if c.Format != format || format == FormatPythonic && strings.HasPrefix(c.Raw, "[") {
						continue // a bare pythonic list counts by the known tools, pinned or not
					}
					if !samePinned(c, pinned) {
						t.Errorf("%s/%s: call %d %s (%s) is not found with the format pinned to %v: %s",
							filepath.Base(f), tt.name, c.Index, c.Name, c.Format, pinnedAs(format), callsOf(Extraction{Calls: pinned}))
					}
				}
			}
		}
	}
}

// pinnedAs is the pin that reads calls detected as format f: the formats that share a
// marker are pinned by the first of them.
func pinnedAs(f Format) []Format {
	switch f {
	case FormatDeepSeekV31:
		return []Format{FormatDeepSeekV3}
	case FormatLlamaJSON:
		return []Format{FormatLlamaJSON, FormatPythonic} // JSON in <|python_start|>
	}
	return []Format{f}
}

// samePinned reports whether calls holds a call read as c is.
func samePinned(c Call, calls []Call) bool {
	for _, p := range calls {
		if p.Name == c.Name && p.Format == c.Format && bytes.Equal(p.Arguments, c.Arguments) && (p.Err == nil) == (c.Err == nil) {
			return true
		}
	}
	return false
}
