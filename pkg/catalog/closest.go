package catalog

import (
	"sort"
	"strings"
)

// Matching a tool name a model wrote against the names that exist, to say which it may
// have meant.

// ClosestNames returns up to n of names, the closest to name first: by edit distance,
// case-insensitive, with names that contain name or that name contains (a server
// prefix added or left out) counted as close; ties in alphabetical order.
func ClosestNames(name string, names []string, n int) []string {
	if len(names) <= n {
		return names
	}
	type scored struct {
		name string
		d    int
	}
	// The distance to a name of kilobytes is its length, whatever it is compared with,
	// and costs its length times each name's: its start is enough to rank by.
	q := strings.ToLower(name[:min(len(name), 4*MaxNameLen)])
	all := make([]scored, 0, len(names))
	for _, c := range names {
		lc := strings.ToLower(c)
		d := EditDistance(q, lc)
		if strings.Contains(lc, q) || strings.Contains(q, lc) {
			d = min(d, 1)
		}
		all = append(all, scored{c, d})
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].d < all[j].d })
	out := make([]string, 0, n)
	for _, s := range all[:n] {
		out = append(out, s.name)
	}
	return out
}

// EditDistance is the Levenshtein distance between a and b, in bytes.
func EditDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
