package console

import (
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/toolbus/toolbus/pkg/messages"
)

// watcher follows the results the executors publish (a plain subscription, which takes
// nothing from the stages' queues) while at least one page is open, and keeps each
// call's duration for five minutes.
type watcher struct {
	mu       sync.Mutex
	watchers int
	sub      *nats.Subscription
	samples  []sample // oldest first
}

type sample struct {
	at time.Time
	ms float64
}

// Watch starts following the results for one more page; the function it returns stops
// when the last page goes.
func (c *Console) Watch() func() {
	w := &c.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.watchers++; w.watchers == 1 && c.NC != nil {
		w.sub, _ = c.NC.Subscribe(messages.AllResults, func(m *nats.Msg) {
			var r messages.ToolResult
			if messages.DecodeResult(m.Data, &r) == nil && !r.End && r.DurationMS > 0 {
				w.add(sample{time.Now(), r.DurationMS})
			}
		})
	}
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.watchers--; w.watchers == 0 && w.sub != nil {
			_ = w.sub.Unsubscribe()
			w.sub = nil
		}
	}
}

func (w *watcher) add(s sample) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.samples = append(w.samples, s)
	if len(w.samples) > 100000 {
		w.samples = w.samples[len(w.samples)-50000:]
	}
}

// latency summarises the samples since since, dropping older ones.
func (w *watcher) latency(since time.Time) Latency {
	w.mu.Lock()
	i, _ := slices.BinarySearchFunc(w.samples, since, func(s sample, t time.Time) int { return s.at.Compare(t) })
	w.samples = w.samples[i:]
	ms := make([]float64, len(w.samples))
	for k, s := range w.samples {
		ms[k] = s.ms
	}
	w.mu.Unlock()
	if len(ms) == 0 {
		return Latency{}
	}
	slices.Sort(ms)
	return Latency{Calls: len(ms), P50ms: ms[(len(ms)-1)*50/100], P99ms: ms[(len(ms)-1)*99/100]}
}
