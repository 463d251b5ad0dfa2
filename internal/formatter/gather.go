package formatter

import (
	"context"
	"encoding/json"
	"sort"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/internal/bus"
	"github.com/toolbus/toolbus/pkg/messages"
)

// gathered is what the gather bucket holds for one response.
type gathered struct {
	Count   int                   `json:"count"`
	Results []messages.ToolResult `json:"results,omitempty"`
	// Done is set once the output was published; results are dropped then.
	Done bool `json:"done,omitempty"`
}

// add merges r into g and reports whether g changed. A result for an index already held
// (a redelivery) changes nothing.
func (g *gathered) add(r messages.ToolResult) bool {
	if g.Done {
		return false
	}
	if g.Count == 0 {
		g.Count = r.Count
	}
	for _, have := range g.Results {
		if have.Index == r.Index {
			return false
		}
	}
	g.Results = append(g.Results, r)
	sort.Slice(g.Results, func(i, j int) bool { return g.Results[i].Index < g.Results[j].Index })
	return true
}

func (g *gathered) complete() bool { return !g.Done && g.Count > 0 && len(g.Results) >= g.Count }

// gatherStore keeps gathering state in a key-value bucket, one key per response, updated
// with compare-and-set so that replicas never overwrite each other.
type gatherStore struct{ kv jetstream.KeyValue }

// Add records r and returns the response's state after it.
func (s gatherStore) Add(ctx context.Context, r messages.ToolResult) (gathered, error) {
	return bus.UpdateJSON(ctx, s.kv, bus.Key(r.ResponseID), func(g *gathered) (bool, error) {
		return g.add(r), nil
	})
}

// MarkDone records that the response's output was published.
func (s gatherStore) MarkDone(ctx context.Context, responseID string) error {
	val, _ := json.Marshal(gathered{Done: true})
	_, err := s.kv.Put(ctx, bus.Key(responseID), val)
	return err
}
