package toolcall

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolbus/toolbus/internal/corpus"
	"github.com/toolbus/toolbus/pkg/messages"
)

// FuzzAPI drives the hosted APIs' readers: every input auto-detected and pinned to each
// API, whole and in chunks. Seeds: the api.txtar cases and the fixtures of testdata/api.
// Nothing panics; every call is a JSON object or a parse_error; a streamed call Write
// returned early is the whole response's; a strict API's object arguments are never
// repaired (only a stream's missing closers are supplied).
func FuzzAPI(f *testing.F) {
	for _, cases := range corpus.Load(f, extractCorpus) {
		for _, tt := range cases {
			if strings.HasPrefix(tt.In, "{") || strings.HasPrefix(tt.In, "[") || strings.HasPrefix(tt.In, "data:") {
				f.Add(tt.In, uint8(0), uint8(5))
			}
		}
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "api", "*"))
	for _, file := range files {
		if strings.HasSuffix(file, ".want.json") || strings.HasSuffix(file, ".md") {
			continue
		}
		if b, err := os.ReadFile(file); err == nil {
			f.Add(string(b), uint8(0), uint8(7))
		}
	}
	formats := append([]Format{FormatAuto}, APIFormats()...)
	f.Fuzz(func(t *testing.T, text string, format, size uint8) {
		opts := &Options{Format: formats[int(format)%len(formats)], Reasoning: ReasoningTagged}
		ex := Extract(text, opts)
		checkExtraction(t, text, ex)
		for _, c := range ex.Calls {
			if c.Err != nil && (c.Err.Code != messages.CodeParseError || c.Err.Message == "") {
				t.Fatalf("call %d: %v", c.Index, c.Err)
			}
			if c.Err == nil && (c.Format == FormatAnthropic || c.Format == FormatGemini || c.Format == FormatBedrock) {
				for _, r := range c.Repairs {
					if r != "unclosed_object" && r != "unclosed_array" {
						t.Fatalf("a %s call repaired: %v", c.Format, c.Repairs)
					}
				}
			}
		}
		step := int(size%32) + 1
		var cuts []int
		for i := step; i < len(text); i += step {
			cuts = append(cuts, i)
		}
		checkSplits(t, text, opts, cuts)
	})
}
