package engineering

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// The numeric solver searches positive values between these bounds unless the variable
// has tighter ones. Thirty decades either side of 1 cover every value in the units the
// calculators use.
const (
	searchMin       = 1e-30
	searchMax       = 1e30
	pointsPerDecade = 10
)

var errNoRoot = errors.New("the formula has no positive solution for these inputs")

// findRoot finds the one x in [lo, hi] (0 means the default bound) where f changes sign.
// It scans a logarithmic grid for sign changes, so it needs no starting guess and cannot
// jump to a far root, then bisects the bracket in log space to full precision. More than
// one sign change is an error: the answer would be ambiguous.
func findRoot(f func(float64) float64, lo, hi float64) (float64, error) {
	if lo <= 0 {
		lo = searchMin
	}
	if hi <= 0 {
		hi = searchMax
	}
	if lo >= hi {
		return 0, errNoRoot
	}
	n := int(math.Ceil(math.Log10(hi/lo)*pointsPerDecade)) + 1
	step := math.Log(hi/lo) / float64(n-1)
	at := func(i int) float64 {
		switch i {
		case 0:
			return lo
		case n - 1:
			return hi
		}
		return lo * math.Exp(step*float64(i))
	}

	var roots []float64
	prevX, prevF := at(0), f(at(0))
	if prevF == 0 {
		roots = append(roots, prevX)
	}
	for i := 1; i < n; i++ {
		x := at(i)
		fx := f(x)
		switch {
		case fx == 0:
			roots = append(roots, x)
		case isFinite(prevF) && prevF != 0 && isFinite(fx) && math.Signbit(prevF) != math.Signbit(fx):
			roots = append(roots, bisect(f, prevX, x, prevF))
		}
		prevX, prevF = x, fx
	}
	switch len(roots) {
	case 0:
		return 0, errNoRoot
	case 1:
		return roots[0], nil
	}
	s := make([]string, len(roots))
	for i, r := range roots {
		s[i] = formatNumber(r)
	}
	return 0, fmt.Errorf("the formula has %d positive solutions (%s); the answer is ambiguous", len(roots), strings.Join(s, ", "))
}

// bisect narrows [a, b], where f(a) has the sign of fa and f(b) the other, until the
// bounds agree to 1e-12 relative. Splitting at the geometric mean treats every decade alike.
func bisect(f func(float64) float64, a, b, fa float64) float64 {
	for range 200 {
		m := math.Sqrt(a * b)
		if b-a <= 1e-12*m || m <= a || m >= b {
			return m
		}
		fm := f(m)
		switch {
		case fm == 0:
			return m
		case !isFinite(fm):
			return math.NaN()
		case math.Signbit(fm) == math.Signbit(fa):
			a, fa = m, fm
		default:
			b = m
		}
	}
	return math.Sqrt(a * b)
}

func isFinite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
