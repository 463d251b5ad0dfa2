package catalog

import (
	"math"
	"slices"
	"sort"
	"strings"
)

// Matching a tool name a model wrote against the names that exist, to say which it may
// have meant.

// ClosestNames returns up to n of names, the closest to name first: by edit distance,
// case-insensitive, with names that contain name or that name contains (a server
// prefix added or left out) counted as close; ties in alphabetical order.
//
// Its cost grows with the names but hardly with their lengths: a name that cannot be
// among the n closest kept so far is left as soon as that is certain (its length alone,
// or a row of the distance's table), so a catalog of thousands costs a pass over them.
func ClosestNames(name string, names []string, n int) []string {
	if len(names) <= n {
		return names
	}
	if n <= 0 {
		return nil
	}
	type scored struct {
		name string
		d    int
	}
	// The distance to a name of kilobytes is its length, whatever it is compared with,
	// and costs its length times each name's: its start is enough to rank by.
	q := strings.ToLower(name[:min(len(name), 4*MaxNameLen)])
	best := make([]scored, 0, n+1) // the n closest so far, closest first, ties in the names' order
	var rows distanceRows
	for _, c := range names {
		limit := math.MaxInt // a name must be closer than the last kept: a tie comes later
		if len(best) == n {
			limit = best[n-1].d
		}
		lc := strings.ToLower(c)
		var d int
		if strings.Contains(lc, q) || strings.Contains(q, lc) {
			d = 1
			if lc == q {
				d = 0
			}
		} else {
			d = rows.within(q, lc, limit)
		}
		if d >= limit {
			continue
		}
		i := sort.Search(len(best), func(i int) bool { return best[i].d > d })
		best = slices.Insert(best, i, scored{c, d})
		if len(best) > n {
			best = best[:n]
		}
	}
	out := make([]string, len(best))
	for i, s := range best {
		out[i] = s.name
	}
	return out
}

// distanceRows are the two rows of an edit distance's table, kept for the next.
type distanceRows struct{ prev, cur []int }

// within returns the Levenshtein distance between a and b when it is below limit, and
// limit otherwise, stopping as soon as no path through the table can end below it.
func (r *distanceRows) within(a, b string, limit int) int {
	if diff := len(a) - len(b); diff >= limit || -diff >= limit {
		return limit
	}
	if cap(r.prev) < len(b)+1 {
		r.prev, r.cur = make([]int, len(b)+1), make([]int, len(b)+1)
	}
	prev, cur := r.prev[:len(b)+1], r.cur[:len(b)+1]
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		low := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			low = min(low, cur[j])
		}
		if low >= limit {
			return limit // every cell of a later row is at least its row's least
		}
		prev, cur = cur, prev
	}
	return min(prev[len(b)], limit)
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
