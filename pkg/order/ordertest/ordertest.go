// Package ordertest keeps the state of streamed responses in memory, with the
// compare-and-set semantics of the gather bucket, for the tests of the stages that
// release streamed calls.
package ordertest

import (
	"context"
	"slices"
	"sync"

	"github.com/toolbus/toolbus/pkg/order"
)

// Streams implements the stages' stream state (as order.StreamStore does) in memory.
// The zero value is ready.
type Streams struct {
	mu sync.Mutex
	m  map[string]order.Streamed
}

// Update applies fn to the state of response, as one compare-and-set would.
func (s *Streams) Update(_ context.Context, response string, fn func(*order.Streamed) (bool, error)) (order.Streamed, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]order.Streamed{}
	}
	st := s.m[response]
	st.Calls = slices.Clone(st.Calls)
	changed, err := fn(&st)
	if err == nil && changed {
		s.m[response] = st
	}
	return st, err
}
