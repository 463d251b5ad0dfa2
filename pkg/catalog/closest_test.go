package catalog

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

func TestEditDistance(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"abc", "", 3}, {"kitten", "sitting", 3}, {"clock", "clocks", 1}, {"flaw", "lawn", 2}} {
		if got := EditDistance(tt.a, tt.b); got != tt.want {
			t.Errorf("EditDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

// closestNaive is ClosestNames without its shortcuts: every distance in full, a stable
// sort. The shortcuts must never change the answer.
func closestNaive(name string, names []string, n int) []string {
	if len(names) <= n {
		return names
	}
	q := strings.ToLower(name[:min(len(name), 4*MaxNameLen)])
	type scored struct {
		name string
		d    int
	}
	var all []scored
	for _, c := range names {
		lc := strings.ToLower(c)
		d := EditDistance(q, lc)
		if strings.Contains(lc, q) || strings.Contains(q, lc) {
			d = min(d, 1)
		}
		all = append(all, scored{c, d})
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].d < all[j].d })
	var out []string
	for _, s := range all[:n] {
		out = append(out, s.name)
	}
	return out
}

func TestClosestNamesAsInFull(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	word := func() string {
		const letters = "abcdeSTU_-."
		b := make([]byte, 1+rng.IntN(14))
		for i := range b {
			b[i] = letters[rng.IntN(len(letters))]
		}
		return string(b)
	}
	for range 2000 {
		names := make([]string, rng.IntN(40))
		for i := range names {
			names[i] = word()
		}
		name := word()
		if rng.IntN(4) == 0 && len(names) > 0 {
			name = names[rng.IntN(len(names))] // a name that exists, or a part of one
			name = name[:1+rng.IntN(len(name))]
		}
		n := rng.IntN(6)
		got, want := ClosestNames(name, names, n), closestNaive(name, names, n)
		if len(want) == 0 {
			want = nil
		}
		if len(got) == 0 {
			got = nil
		}
		if !slices.Equal(got, want) {
			t.Fatalf("ClosestNames(%q, %q, %d) = %q, want %q", name, names, n, got, want)
		}
	}
}

// The closest of 5,000 names (the unknown_tool message of a large catalog).
func BenchmarkClosestNames(b *testing.B) {
	for _, size := range []int{10, 5000} {
		names := make([]string, size)
		for i := range names {
			names[i] = fmt.Sprintf("cat%02d__tool_%d", i%50, i/50)
		}
		b.Run(strconv.Itoa(size), func(b *testing.B) {
			for b.Loop() {
				ClosestNames("cat07__tol_33", names, 10)
			}
		})
	}
}
