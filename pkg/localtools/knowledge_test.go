package localtools

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolbus/toolbus/pkg/messages"
)

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func paths(hits []Hit) []string {
	var out []string
	for _, h := range hits {
		out = append(out, h.Path)
	}
	return out
}

// TestBM25Ranking checks the order BM25 (k1 1.2, b 0.75) gives on a corpus small
// enough to reason about. Five documents; a, b, c, d have 4 terms each, e has 13, so
// the average length is 29/5 = 5.8.
func TestBM25Ranking(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"a.txt": "pump pump pump valve",
		"b.txt": "pump valve seal gasket",
		"c.txt": "valve seal gasket flange",
		"d.txt": "seal gasket flange bolt",
		"e.txt": "flange alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu",
	})
	kb, err := NewKnowledgeBase(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		query string
		want  []string
	}{
		// Only a and b contain "pump"; they are equally long, and a has it three times.
		{name: "term frequency", query: "pump", want: []string{"a.txt", "b.txt"}},
		// "bolt" is in one document of five (idf ln 4 = 1.39), "pump" in two (idf
		// ln 2.4 = 0.88). Term frequency saturates: three pumps score 0.88 × 1.68 =
		// 1.47 in a, one bolt 1.39 × 1.15 = 1.59 in d, one pump 0.88 × 1.15 = 1.00 in b.
		{name: "rare term beats repeated common term", query: "pump bolt", want: []string{"d.txt", "a.txt", "b.txt"}},
		// c and d hold "flange" once at the same length: a tie, broken by path. e holds
		// it once too, but is three times as long.
		{name: "length normalisation and ties", query: "flange", want: []string{"c.txt", "d.txt", "e.txt"}},
		{name: "case folded and repeated query terms count once", query: "FLANGE Flange flange", want: []string{"c.txt", "d.txt", "e.txt"}},
		// b holds all three terms; a and c hold two, a with pump (the rarer of its
		// two) three times; d holds only seal. Scores 2.24, 2.09, 1.23, 0.62.
		{name: "more distinct terms first", query: "pump valve seal", want: []string{"b.txt", "a.txt", "c.txt", "d.txt"}},
		{name: "no match", query: "turbine", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hits, err := kb.Search(context.Background(), tt.query, 10)
			if err != nil {
				t.Fatal(err)
			}
			if got := paths(hits); !slices.Equal(got, tt.want) {
				t.Errorf("Search(%q) = %v, want %v (hits %+v)", tt.query, got, tt.want, hits)
			}
			for i := 1; i < len(hits); i++ {
				if hits[i].Score > hits[i-1].Score {
					t.Errorf("scores not descending: %+v", hits)
				}
			}
		})
	}
}

func TestKnowledgeBaseLanguages(t *testing.T) {
	kb, err := NewKnowledgeBase("testdata/kb", nil)
	if err != nil {
		t.Fatal(err)
	}
	if kb.Len() != 4 {
		t.Errorf("indexed %d documents, want 4 (the hidden folder and the .pdf skipped)", kb.Len())
	}
	tests := []struct {
		name      string
		query     string
		wantFirst string
		wantTitle string
		wantIn    string // in the snippet
	}{
		{name: "german with umlaut", query: "Wandstärke", wantFirst: "kesselformel.md", wantTitle: "Die Kesselformel", wantIn: "Wandstärke"},
		{name: "german written with ss", query: "GRÖSSER", wantFirst: "kesselformel.md", wantTitle: "Die Kesselformel", wantIn: "größer"},
		{name: "cyrillic", query: "столица", wantFirst: "moskva.md", wantTitle: "Москва", wantIn: "столица России"},
		{name: "japanese word inside a sentence", query: "首都", wantFirst: "tokyo.md", wantTitle: "東京", wantIn: "首都"},
		{name: "japanese, several bigrams", query: "京都駅", wantFirst: "tokyo.md", wantTitle: "東京", wantIn: "京都駅"},
		{name: "english text file titled by its name", query: "wall thickness", wantFirst: "pipes.txt", wantTitle: "pipes", wantIn: "wall thickness"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hits, err := kb.Search(context.Background(), tt.query, 3)
			if err != nil {
				t.Fatal(err)
			}
			if len(hits) == 0 {
				t.Fatalf("Search(%q): no hits", tt.query)
			}
			h := hits[0]
			if h.Path != tt.wantFirst || h.Title != tt.wantTitle || !strings.Contains(h.Snippet, tt.wantIn) || h.Score <= 0 {
				t.Errorf("Search(%q)[0] = %+v, want %s titled %q with %q in the snippet", tt.query, h, tt.wantFirst, tt.wantTitle, tt.wantIn)
			}
		})
	}
}

func TestKnowledgeBaseRefresh(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"one.md": "# One\nalpha", "sub/two.md": "# Two\nbeta"})
	kb, err := NewKnowledgeBase(dir, &KnowledgeOptions{RefreshInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	search := func(q string) []string {
		t.Helper()
		hits, err := kb.Search(context.Background(), q, 10)
		if err != nil {
			t.Fatal(err)
		}
		return paths(hits)
	}
	if got := search("beta"); !slices.Equal(got, []string{"sub/two.md"}) {
		t.Fatalf("beta: %v", got)
	}
	writeFiles(t, dir, map[string]string{"three.md": "gamma beta"})
	if got := search("gamma"); !slices.Equal(got, []string{"three.md"}) {
		t.Errorf("after adding a file, gamma: %v", got)
	}
	// A changed file: different size, so the change is seen even within one mtime tick.
	writeFiles(t, dir, map[string]string{"one.md": "# One\nalpha delta delta"})
	if got := search("delta"); !slices.Equal(got, []string{"one.md"}) {
		t.Errorf("after changing a file, delta: %v", got)
	}
	if err := os.Remove(filepath.Join(dir, "sub/two.md")); err != nil {
		t.Fatal(err)
	}
	if got := search("beta"); !slices.Equal(got, []string{"three.md"}) {
		t.Errorf("after removing a file, beta: %v", got)
	}
}

func TestKnowledgeBaseNotRefreshedBeforeInterval(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"one.md": "alpha"})
	kb, err := NewKnowledgeBase(dir, &KnowledgeOptions{RefreshInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string]string{"two.md": "alpha"})
	hits, _ := kb.Search(context.Background(), "alpha", 10)
	if len(hits) != 1 {
		t.Errorf("refreshed before the interval: %v", paths(hits))
	}
	if err := kb.Refresh(); err != nil {
		t.Fatal(err)
	}
	if hits, _ := kb.Search(context.Background(), "alpha", 10); len(hits) != 2 {
		t.Errorf("after Refresh: %v", paths(hits))
	}
}

func TestSnippet(t *testing.T) {
	long := strings.Repeat("filler words here. ", 40)
	tests := []struct {
		name        string
		text, query string
		want        []string // all in the snippet
		wantPrefix  bool     // starts with …
	}{
		{name: "start of text", text: "needle in the text", query: "needle", want: []string{"needle in the text"}},
		{name: "middle of a long text", text: long + "the needle is here " + long, query: "needle", want: []string{"the needle is here"}, wantPrefix: true},
		{name: "passage with most distinct terms", text: "alpha " + long + "alpha beta together " + long, query: "alpha beta", want: []string{"alpha beta together"}, wantPrefix: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := map[string]bool{}
			for _, q := range terms(tt.query) {
				want[q] = true
			}
			got := snippet(tt.text, want)
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("snippet = %q, want it to hold %q", got, w)
				}
			}
			if strings.HasPrefix(got, "…") != tt.wantPrefix || len(got) > snippetBytes+8 {
				t.Errorf("snippet = %q (%d bytes)", got, len(got))
			}
		})
	}
}

func TestSearchKnowledgeBaseTool(t *testing.T) {
	kb, err := NewKnowledgeBase("testdata/kb", &KnowledgeOptions{MaxResults: 2})
	if err != nil {
		t.Fatal(err)
	}
	tool := kb.Tool()
	tests := []struct {
		name     string
		args     string
		wantErr  messages.ErrorCode
		wantHits int
	}{
		{name: "default limit", args: `{"query": "Kesselformel"}`, wantHits: 2},
		{name: "limit capped by MaxResults", args: `{"query": "die Kesselformel pipe", "limit": 50}`, wantHits: 2},
		{name: "limit 1", args: `{"query": "Kesselformel", "limit": 1}`, wantHits: 1},
		{name: "missing query", args: `{}`, wantErr: messages.CodeInvalidArguments},
		{name: "empty query", args: `{"query": ""}`, wantErr: messages.CodeInvalidArguments},
		{name: "no words", args: `{"query": "?!"}`, wantErr: messages.CodeInvalidArguments},
		{name: "limit zero", args: `{"query": "x", "limit": 0}`, wantErr: messages.CodeInvalidArguments},
		{name: "unknown argument", args: `{"query": "x", "top_k": 3}`, wantErr: messages.CodeInvalidArguments},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := tool.Run(context.Background(), json.RawMessage(tt.args))
			if tt.wantErr != "" {
				var te *messages.ToolError
				if !errors.As(err, &te) || te.Code != tt.wantErr {
					t.Fatalf("err = %v, want %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var res searchOutput
			if err := json.Unmarshal(out, &res); err != nil {
				t.Fatal(err)
			}
			if len(res.Results) != tt.wantHits {
				t.Errorf("%d hits, want %d: %s", len(res.Results), tt.wantHits, out)
			}
		})
	}
}
