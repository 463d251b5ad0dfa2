package toolcall

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// apiWant is a fixture's .want.json: the calls the response holds, in order (an error
// marks a call that must be a parse_error, never run), and its text content.
type apiWant struct {
	Format string `json:"format"`
	Calls  []struct {
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		Error     bool            `json:"error"`
	} `json:"calls"`
	Content string `json:"content"`
}

// Every fixture of testdata/api (the vendors' responses and streams, README.md cites
// each one's source) reads as the calls it holds, with their ids and arguments, whether
// its format is detected or pinned; a stream fed an event at a time gives the same, and
// settles its calls before its end where the API says they are complete.
func TestAPICorpus(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "api", "*.want.json"))
	if err != nil || len(files) < 40 {
		t.Fatalf("%d fixtures: %v", len(files), err)
	}
	perFormat := map[string]int{}
	early := 0
	for _, wantFile := range files {
		name := strings.TrimSuffix(filepath.Base(wantFile), ".want.json")
		t.Run(name, func(t *testing.T) {
			var want apiWant
			b, err := os.ReadFile(wantFile)
			if err != nil || json.Unmarshal(b, &want) != nil {
				t.Fatalf("%s: %v", wantFile, err)
			}
			perFormat[want.Format]++
			base := strings.TrimSuffix(wantFile, ".want.json")
			text, events := "", []string(nil)
			if b, err := os.ReadFile(base + ".json"); err == nil {
				text = string(b)
			} else if b, err := os.ReadFile(base + ".events"); err == nil {
				text = string(b)
				for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
					events = append(events, l+"\n")
				}
			} else {
				t.Fatalf("no %s.json or .events", base)
			}
			for _, f := range []Format{FormatAuto, Format(want.Format)} {
				checkAPIWant(t, string(f), Extract(text, &Options{Format: f}), want)
			}
			if events != nil {
				s := NewStream(&Options{Format: Format(want.Format)})
				var got []Call
				for _, e := range events[:len(events)-1] {
					got = append(got, s.Write(e)...)
				}
				early += len(got)
				got = append(got, s.Write(events[len(events)-1])...)
				ex, rest := s.Close()
				checkAPIWant(t, "streamed", Extraction{Calls: append(got, rest...), Content: ex.Content}, want)
			}
		})
	}
	for _, f := range APIFormats() {
		if perFormat[string(f)] < 4 {
			t.Errorf("format %s: %d fixtures", f, perFormat[string(f)])
		}
	}
	if early == 0 {
		t.Error("no streamed call settled before its stream's last event")
	}
}

func checkAPIWant(t *testing.T, how string, ex Extraction, want apiWant) {
	t.Helper()
	if len(ex.Calls) != len(want.Calls) {
		t.Fatalf("%s: %d calls (%s), want %d", how, len(ex.Calls), callsOf(ex), len(want.Calls))
	}
	for i, w := range want.Calls {
		c := ex.Calls[i]
		if c.ID != w.ID || c.Name != w.Name && !(w.Error && c.Name == "") {
			t.Errorf("%s: call %d is %q %q, want %q %q", how, i, c.ID, c.Name, w.ID, w.Name)
		}
		if w.Error {
			if c.Err == nil {
				t.Errorf("%s: call %d runs with %s; want a parse_error", how, i, c.Arguments)
			}
			continue
		}
		if c.Err != nil {
			t.Errorf("%s: call %d: %v", how, i, c.Err)
			continue
		}
		var got, exp bytes.Buffer
		if json.Compact(&got, c.Arguments) != nil || json.Compact(&exp, w.Arguments) != nil || got.String() != exp.String() {
			t.Errorf("%s: call %d arguments %s, want %s", how, i, c.Arguments, w.Arguments)
		}
	}
	if strings.TrimSpace(ex.Content) != strings.TrimSpace(want.Content) {
		t.Errorf("%s: content %q, want %q", how, ex.Content, want.Content)
	}
}

// TestAPIStreamResumedShorter: a streamed API response read again as a shorter text —
// the same events, written with fewer spaces — resumes from the earlier read without
// its byte positions (it panicked, answered as an internal error; found by FuzzExtract).
func TestAPIStreamResumedShorter(t *testing.T) {
	chunk1 := `{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"clock","arguments":"{}"}}]},"finish_reason":null}]}`
	chunk2 := `{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`
	long := "data:    " + chunk1 + "\n\n\n\ndata:    " + chunk2 + "\n\n\n\n"
	short := "data:" + chunk1 + "\ndata:" + chunk2
	for _, in := range []string{long, short} {
		ex := Extract(in, nil)
		if len(ex.Calls) != 1 || ex.Calls[0].Err != nil || ex.Calls[0].Name != "clock" {
			t.Fatalf("Extract(%q) = %+v, want the call to clock", in, ex.Calls)
		}
		if c := ex.Calls[0]; c.End > len(in) || in[c.Start:c.End] != c.Raw {
			t.Fatalf("Extract(%q): call at %d:%d outside the text", in, c.Start, c.End)
		}
	}
}
