package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// link is a Markdown link or image: [text](target).
var link = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// links returns the relative targets page (relative to the repository root) links to,
// each relative to the root, without its #fragment.
func links(t *testing.T, page string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", page))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range link.FindAllStringSubmatch(string(data), -1) {
		target, _, _ := strings.Cut(m[1], "#")
		if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		out = append(out, filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(page), target))))
	}
	return out
}

// Every relative link of every page leads to a file or folder of the repository, and
// every page of docs/ is linked from README.md: a newcomer reaches each from the front
// page.
func TestLinks(t *testing.T) {
	all := pages(t)
	for _, page := range all {
		for _, target := range links(t, page) {
			if _, err := os.Stat(filepath.Join("..", target)); err != nil {
				t.Errorf("%s links to %s, which is not there", page, target)
			}
		}
	}
	front := links(t, "README.md")
	docs, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) < 8 {
		t.Fatalf("docs/ has %d pages", len(docs))
	}
	for _, d := range append(docs, "asyncapi.yaml") {
		if !slices.Contains(front, "docs/"+d) {
			t.Errorf("README.md does not link to docs/%s", d)
		}
	}
	if info, err := os.Stat("../README.md"); err != nil || info.Size() > 12<<10 {
		t.Errorf("README.md is %d bytes; the front page stays within 12 KiB, reference goes to docs/", info.Size())
	}
}
