package localtools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/toolbus/toolbus/pkg/messages"
)

// BM25 parameters: the usual values, which work well without tuning.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// KnowledgeOptions configure a [KnowledgeBase]. The zero value is usable.
type KnowledgeOptions struct {
	// Extensions are the file name extensions indexed. Default .md, .markdown, .txt.
	Extensions []string
	// MaxFileBytes skips larger files. Default 4 MiB.
	MaxFileBytes int64
	// MaxResults caps a search's limit. Default 20.
	MaxResults int
	// RefreshInterval is how old the index may get before a search checks the folder
	// for changed files. Default 5s; negative means before every search.
	RefreshInterval time.Duration
	// Logger reports files that cannot be read. Default: discard.
	Logger *slog.Logger
}

// KnowledgeBase is a full-text index, ranked with BM25, of the Markdown and text files
// under a folder; see [tokenize] for how text becomes terms. Hidden files and folders
// are skipped. It is built when made, and a search first re-reads the files whose size
// or time changed once the index is older than RefreshInterval. It is safe for
// concurrent use.
type KnowledgeBase struct {
	dir  string
	opts KnowledgeOptions
	exts map[string]bool

	refreshMu sync.Mutex // serialises refreshes, and guards checked and tooLarge
	checked   time.Time
	tooLarge  map[string]fileStamp // files skipped for their size, logged once

	mu    sync.RWMutex
	docs  map[string]*kbDoc // by path relative to dir
	index kbIndex
}

// Hit is one search result.
type Hit struct {
	Title string `json:"title" jsonschema:"the document's title: its first heading, else its file name"`
	// Path is relative to the knowledge base folder, with forward slashes.
	Path    string  `json:"path" jsonschema:"the file, relative to the knowledge base folder"`
	Score   float64 `json:"score" jsonschema:"BM25 relevance; higher is better"`
	Snippet string  `json:"snippet" jsonschema:"the passage around the best match"`
}

type kbDoc struct {
	path, title, text string
	stamp             fileStamp
	length            int // in terms
	tf                map[string]int
}

type kbIndex struct {
	docs     []*kbDoc
	postings map[string][]posting
	avgLen   float64
}

type posting struct{ doc, tf int }

// NewKnowledgeBase indexes the folder dir.
func NewKnowledgeBase(dir string, opts *KnowledgeOptions) (*KnowledgeBase, error) {
	var o KnowledgeOptions
	if opts != nil {
		o = *opts
	}
	if len(o.Extensions) == 0 {
		o.Extensions = []string{".md", ".markdown", ".txt"}
	}
	if o.MaxFileBytes <= 0 {
		o.MaxFileBytes = 4 << 20
	}
	if o.MaxResults <= 0 {
		o.MaxResults = 20
	}
	if o.RefreshInterval == 0 {
		o.RefreshInterval = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	abs, err := existingDir("knowledge base", dir)
	if err != nil {
		return nil, err
	}
	kb := &KnowledgeBase{dir: abs, opts: o, exts: map[string]bool{}, docs: map[string]*kbDoc{}}
	for _, e := range o.Extensions {
		kb.exts[strings.ToLower(e)] = true
	}
	if err := kb.Refresh(); err != nil {
		return nil, err
	}
	return kb, nil
}

// Len is the number of documents indexed.
func (kb *KnowledgeBase) Len() int {
	kb.mu.RLock()
	defer kb.mu.RUnlock()
	return len(kb.index.docs)
}

// Refresh re-reads the files that were added, changed or removed since the last
// refresh and rebuilds the index if any were.
func (kb *KnowledgeBase) Refresh() error {
	kb.refreshMu.Lock()
	defer kb.refreshMu.Unlock()
	return kb.refresh()
}

func (kb *KnowledgeBase) refreshIfDue() {
	kb.refreshMu.Lock()
	defer kb.refreshMu.Unlock()
	if kb.opts.RefreshInterval < 0 || time.Since(kb.checked) >= kb.opts.RefreshInterval {
		if err := kb.refresh(); err != nil {
			// Keep answering from the index we have.
			kb.opts.Logger.Warn("cannot refresh the knowledge base", "folder", kb.dir, "err", err)
		}
	}
}

// refresh does the work of Refresh; kb.refreshMu is held.
func (kb *KnowledgeBase) refresh() error {
	kb.checked = time.Now()
	kb.mu.RLock()
	old := kb.docs
	kb.mu.RUnlock()
	docs := make(map[string]*kbDoc, len(old))
	tooLarge := map[string]fileStamp{}
	defer func() { kb.tooLarge = tooLarge }()
	changed := false
	err := filepath.WalkDir(kb.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == kb.dir {
				return err
			}
			kb.opts.Logger.Warn("knowledge base: skipped", "path", path, "err", err)
			return nil
		}
		if path != kb.dir && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() || !kb.exts[strings.ToLower(filepath.Ext(path))] {
			return nil
		}
		fi, err := os.Stat(path) // follows a symlinked file
		if err != nil || !fi.Mode().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(kb.dir, path)
		if err != nil {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if fi.Size() > kb.opts.MaxFileBytes {
			if kb.tooLarge[rel] != stampOf(fi) {
				kb.opts.Logger.Warn("knowledge base: file too large, skipped", "path", rel, "bytes", fi.Size())
			}
			tooLarge[rel] = stampOf(fi)
			return nil
		}
		if d := old[rel]; d != nil && d.stamp == stampOf(fi) {
			docs[rel] = d
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			kb.opts.Logger.Warn("knowledge base: skipped", "path", rel, "err", err)
			return nil
		}
		docs[rel] = newDoc(rel, strings.ToValidUTF8(string(data), "\uFFFD"), stampOf(fi))
		changed = true
		return nil
	})
	if err != nil {
		return fmt.Errorf("localtools: knowledge base: %w", err)
	}
	if !changed && len(docs) == len(old) {
		return nil
	}
	idx := buildIndex(docs)
	kb.mu.Lock()
	kb.docs, kb.index = docs, idx
	kb.mu.Unlock()
	kb.opts.Logger.Info("knowledge base indexed", "folder", kb.dir, "documents", len(docs))
	return nil
}

func newDoc(path, text string, stamp fileStamp) *kbDoc {
	d := &kbDoc{path: path, text: text, stamp: stamp, tf: map[string]int{}, title: documentTitle(path, text)}
	tokenize(text, func(t string, _, _ int) {
		d.tf[t]++
		d.length++
	})
	return d
}

func buildIndex(docs map[string]*kbDoc) kbIndex {
	idx := kbIndex{postings: map[string][]posting{}}
	for _, d := range docs {
		idx.docs = append(idx.docs, d)
	}
	sort.Slice(idx.docs, func(i, j int) bool { return idx.docs[i].path < idx.docs[j].path })
	total := 0
	for i, d := range idx.docs {
		total += d.length
		for t, n := range d.tf {
			idx.postings[t] = append(idx.postings[t], posting{doc: i, tf: n})
		}
	}
	if len(idx.docs) > 0 {
		idx.avgLen = float64(total) / float64(len(idx.docs))
	}
	return idx
}

// documentTitle is a Markdown file's front-matter title or first heading, else the
// file name without its extension.
func documentTitle(path, text string) string {
	name := filepath.Base(path)
	stem := strings.TrimSuffix(name, filepath.Ext(name))
	if ext := strings.ToLower(filepath.Ext(name)); ext != ".md" && ext != ".markdown" {
		return stem
	}
	lines := strings.Split(text, "\n")
	if len(lines) > 0 && strings.TrimSpace(lines[0]) == "---" {
		for i := 1; i < len(lines) && i < 100; i++ {
			l := strings.TrimSpace(lines[i])
			if l == "---" {
				lines = lines[i+1:]
				break
			}
			if v, ok := strings.CutPrefix(l, "title:"); ok {
				if v = strings.Trim(strings.TrimSpace(v), `"'`); v != "" {
					return v
				}
			}
		}
	}
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if h := strings.TrimLeft(l, "#"); len(h) < len(l) && len(l)-len(h) <= 6 && strings.HasPrefix(h, " ") {
			if h = strings.TrimSpace(strings.TrimRight(h, "# ")); h != "" {
				return h
			}
		}
	}
	return stem
}

// Search returns up to limit documents matching query, best first: BM25 over the
// query's distinct terms, ties broken by path.
func (kb *KnowledgeBase) Search(ctx context.Context, query string, limit int) ([]Hit, error) {
	qterms := terms(query)
	if len(qterms) == 0 {
		return nil, messages.Errorf(messages.CodeInvalidArguments, "the query %q has no words to search for", messages.EchoArguments(query))
	}
	if limit <= 0 {
		limit = 5
	}
	limit = min(limit, kb.opts.MaxResults)
	kb.refreshIfDue()
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	kb.mu.RLock()
	idx := kb.index
	kb.mu.RUnlock()
	n := float64(len(idx.docs))
	scores := map[int]float64{}
	for _, t := range qterms {
		ps := idx.postings[t]
		if len(ps) == 0 {
			continue
		}
		idf := math.Log(1 + (n-float64(len(ps))+0.5)/(float64(len(ps))+0.5))
		for _, p := range ps {
			tf := float64(p.tf)
			norm := bm25K1 * (1 - bm25B + bm25B*float64(idx.docs[p.doc].length)/idx.avgLen)
			scores[p.doc] += idf * tf * (bm25K1 + 1) / (tf + norm)
		}
	}
	ranked := make([]int, 0, len(scores))
	for d := range scores {
		ranked = append(ranked, d)
	}
	sort.Slice(ranked, func(i, j int) bool {
		a, b := ranked[i], ranked[j]
		if scores[a] != scores[b] {
			return scores[a] > scores[b]
		}
		return idx.docs[a].path < idx.docs[b].path
	})
	if len(ranked) > limit {
		ranked = ranked[:limit]
	}
	want := map[string]bool{}
	for _, t := range qterms {
		want[t] = true
	}
	hits := make([]Hit, 0, len(ranked))
	for _, i := range ranked {
		d := idx.docs[i]
		hits = append(hits, Hit{
			Title:   d.title,
			Path:    d.path,
			Score:   math.Round(scores[i]*1e4) / 1e4,
			Snippet: snippet(d.text, want),
		})
	}
	return hits, nil
}

// snippetBytes is the length of a snippet before white space is collapsed.
const snippetBytes = 240

// snippet is the passage of text that holds the most distinct query terms within
// snippetBytes, starting a little before the first of them.
func snippet(text string, want map[string]bool) string {
	type match struct {
		term       string
		start, end int
	}
	var ms []match
	tokenize(text, func(t string, s, e int) {
		if want[t] {
			ms = append(ms, match{t, s, e})
		}
	})
	anchor, best := 0, 0
	for i := range ms {
		distinct := map[string]bool{}
		for j := i; j < len(ms) && ms[j].end-ms[i].start <= snippetBytes*3/4; j++ {
			distinct[ms[j].term] = true
		}
		if len(distinct) > best {
			anchor, best = ms[i].start, len(distinct)
		}
	}
	start := max(0, anchor-snippetBytes/4)
	end := min(len(text), start+snippetBytes)
	start, end = wordBoundary(text, start, true), wordBoundary(text, end, false)
	s := strings.Join(strings.Fields(text[start:end]), " ")
	if start > 0 {
		s = "…" + s
	}
	if end < len(text) {
		s += "…"
	}
	return s
}

// wordBoundary moves i to a rune boundary, and to white space if there is some within
// a few bytes (forward for a start, backward for an end), so no word is cut.
func wordBoundary(text string, i int, forward bool) int {
	if i <= 0 || i >= len(text) {
		return i
	}
	for i > 0 && !utf8.RuneStart(text[i]) {
		i--
	}
	const reach = 24
	if forward {
		for j := i; j < len(text) && j < i+reach; j++ {
			if text[j] == ' ' || text[j] == '\n' || text[j] == '\t' {
				return j
			}
		}
		return i
	}
	for j := i; j > 0 && j > i-reach; j-- {
		if text[j] == ' ' || text[j] == '\n' || text[j] == '\t' {
			return j
		}
	}
	return i
}

// searchInput and searchOutput are the JSON of the search_knowledge_base tool.
type searchInput struct {
	Query string `json:"query"`
	Limit int    `json:"limit"`
}

type searchOutput struct {
	Results []Hit `json:"results"`
}

// Tool is the search_knowledge_base tool over kb.
func (kb *KnowledgeBase) Tool() Tool {
	t, err := NewTool(messages.ToolInfo{
		Name: "search_knowledge_base",
		Description: "Full-text search over the knowledge base documents (Markdown and text files). " +
			"Returns the best matches first, each with title, path, relevance score and a snippet around the match. " +
			"Use a few specific keywords in the documents' language.",
		InputSchema: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{`+
			`"query":{"type":"string","minLength":1,"description":"the words to search for"},`+
			`"limit":{"type":"integer","minimum":1,"default":5,"description":"how many results to return, at most %d"}},`+
			`"required":["query"],"additionalProperties":false}`, kb.opts.MaxResults)),
		ReadOnly:   true,
		Idempotent: true,
	}, func(ctx context.Context, in searchInput) (searchOutput, error) {
		hits, err := kb.Search(ctx, in.Query, in.Limit)
		return searchOutput{Results: hits}, err
	})
	if err != nil {
		panic(errors.Join(errors.New("localtools: the search_knowledge_base schema is broken"), err))
	}
	return t
}
