package formatter

import (
	"context"
	"slices"

	"github.com/toolbus/toolbus/pkg/order"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/messages"
)

// gathered is what the gather bucket holds for one response: its results until its
// output is stored, then only the mark that it is answered (order.Finish), kept until
// the bucket's TTL so that a redelivered result finds the response answered.
type gathered struct {
	Results  []messages.ToolResult `json:"results,omitempty"`
	Answered bool                  `json:"answered,omitempty"`
}

// add merges r into g, in call order, and reports whether g changed. A result for an
// index already held (a redelivery) changes nothing.
func (g *gathered) add(r messages.ToolResult) bool {
	i, found := slices.BinarySearchFunc(g.Results, r.Index, func(have messages.ToolResult, index int) int { return have.Index - index })
	if found {
		return false
	}
	g.Results = slices.Insert(g.Results, i, r)
	return true
}

// KVGatherer keeps gathering state in the gather key-value bucket, one key per response,
// updated with compare-and-set so that replicas never overwrite each other.
type KVGatherer struct{ KV jetstream.KeyValue }

// Results implements [Gatherer].
func (s KVGatherer) Results(ctx context.Context, conversation, responseID string) ([]messages.ToolResult, error) {
	g, _, err := bus.GetJSON[gathered](ctx, s.KV, bus.Key(messages.ScopedID(conversation, responseID)))
	if err == nil && g.Answered {
		return nil, order.ErrAnswered
	}
	return g.Results, err
}

// Add implements [Gatherer].
func (s KVGatherer) Add(ctx context.Context, rs ...messages.ToolResult) ([]messages.ToolResult, error) {
	if len(rs) == 0 {
		return nil, nil
	}
	g, err := bus.UpdateJSON(ctx, s.KV, bus.Key(messages.ScopedID(rs[0].Conversation, rs[0].ResponseID)), func(g *gathered) (bool, error) {
		if g.Answered {
			return false, order.ErrAnswered
		}
		changed := false
		for _, r := range rs {
			changed = g.add(r) || changed
		}
		return changed, nil
	})
	return g.Results, err
}

// Finish implements [Finisher].
func (s KVGatherer) Finish(ctx context.Context, response string, keys ...string) error {
	return order.Finish(ctx, s.KV, response, keys...)
}

// Refinish implements [Finisher].
func (s KVGatherer) Refinish(ctx context.Context, response string) error {
	return order.Refinish(ctx, s.KV, response)
}
