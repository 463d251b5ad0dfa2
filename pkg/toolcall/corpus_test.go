package toolcall

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolbus/toolbus/internal/corpus"
)

var update = flag.Bool("update", false, "rewrite the .want sections of testdata/*/*.txtar from the results")

// extractCorpus holds the extraction corpus (see internal/corpus): each case's .opts
// section, if any, is its Options as JSON (corpusOptions).
var extractCorpus = filepath.Join("testdata", "extract")

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
		if c.ID != "" {
			fmt.Fprintf(&b, "  id: %s\n", c.ID)
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
	for f, cases := range corpus.Load(t, extractCorpus) {
		got := map[string]string{}
		for _, tt := range cases {
			t.Run(filepath.Base(f)+"/"+tt.Name, func(t *testing.T) {
				var opts *Options
				if tt.Opts != "" {
					var co corpusOptions
					if err := json.Unmarshal([]byte(tt.Opts), &co); err != nil {
						t.Fatalf("opts: %v", err)
					}
					format, err := ParseFormat(co.Format)
					if err != nil {
						t.Fatal(err)
					}
					opts = &Options{KnownTools: co.KnownTools, Schemas: co.Schemas, Format: format,
						MaxCalls: co.MaxCalls, MaxDepth: co.MaxDepth, MaxInputSize: co.MaxInput}
				}
				ex := Extract(tt.In, opts)
				res := renderExtraction(ex)
				got[tt.Name] = res
				checkExtraction(t, tt.In, ex)
				if *update {
					return
				}
				if res != tt.Want {
					t.Errorf("Extract(%q)\n got:\n%s\nwant:\n%s", tt.In, res, tt.Want)
				}
				failed := false
				for _, c := range ex.Calls {
					failed = failed || c.Err != nil
				}
				if failed != tt.WantErr {
					t.Errorf("a call failed: %v, wantErr %v", failed, tt.WantErr)
				}
			})
		}
		if *update {
			corpus.Rewrite(t, f, got)
			for i, tt := range cases {
				corpus.WriteSeed(t, "FuzzExtract", f, tt.Name, fmt.Sprintf("string(%q)\nbyte(%q)\n", tt.In, byte(i)))
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
	for f, cases := range corpus.Load(t, extractCorpus) {
		for _, tt := range cases {
			if newFormatArchives[filepath.Base(f)] && tt.Source == "" {
				t.Errorf("%s/%s: no .source section", filepath.Base(f), tt.Name)
			}
			ex := Extract(tt.In, corpusOpts(t, tt.Opts))
			for _, c := range ex.Calls {
				switch {
				case c.Err != nil && strings.Contains(c.Err.Message, "was cut off"):
					cut[c.Format] = true
				case c.Err == nil && strings.HasSuffix(tt.Name, "cut_closers") && c.Index == len(ex.Calls)-1:
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
	for f, cases := range corpus.Load(t, extractCorpus) {
		for _, tt := range cases {
			opts := corpusOpts(t, tt.Opts)
			if opts == nil {
				opts = &Options{}
			}
			if opts.Format != FormatAuto || len(opts.KnownTools) == 0 && strings.Contains(tt.Want, "(json)") {
				continue
			}
			auto := Extract(tt.In, opts)
			formats := map[Format]bool{}
			for _, c := range auto.Calls {
				formats[c.Format] = true
			}
			for format := range formats {
				var pinned []Call
				for _, pin := range pinnedAs(format) {
					o := *opts
					o.Format = pin
					pinned = append(pinned, Extract(tt.In, &o).Calls...)
				}
				for _, c := range auto.Calls {
					if c.Format != format || format == FormatPythonic && strings.HasPrefix(c.Raw, "[") {
						continue // a bare pythonic list counts by the known tools, pinned or not
					}
					if !samePinned(c, pinned) {
						t.Errorf("%s/%s: call %d %s (%s) is not found with the format pinned to %v: %s",
							filepath.Base(f), tt.Name, c.Index, c.Name, c.Format, pinnedAs(format), callsOf(Extraction{Calls: pinned}))
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
