package formatter

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/toolbus/toolbus/internal/bus"
	"github.com/toolbus/toolbus/pkg/messages"
)

// Gatherer collects the results of responses of several calls.
type Gatherer interface {
	// Add records r and returns every result of its response held after it, r included.
	// A result already held (a redelivery) is not added twice.
	Add(ctx context.Context, r messages.ToolResult) ([]messages.ToolResult, error)
}

// Stage is the formatter.
type Stage struct {
	Gather Gatherer
	// RetryDelay is the delay of a result handed back because the gatherer failed.
	// Default 1s.
	RetryDelay time.Duration
	// MaxOutputBytes bounds an output message (the connection's payload limit, less a
	// margin for headers): the results of a response too large for it together are cut
	// to previews until it fits (messages.CapResult). Default 1 MB less 64 KiB.
	MaxOutputBytes int
}

// Decode reads a result message; one nobody can place cannot complete any output.
func Decode(d *bus.Delivery) (messages.ToolResult, error) {
	var r messages.ToolResult
	if err := messages.DecodeResult(d.Data, &r); err != nil {
		return r, err
	}
	if r.ResponseID == "" || r.Count <= 0 {
		return r, fmt.Errorf("a result without its response id or call count")
	}
	return r, nil
}

// Format takes one result and returns the response's output once every result of the
// response is in, else nothing. A response of one call needs no gathering.
//
// Every delivery that finds the response complete returns the output again (a result
// redelivered because its ack was lost): the output's message id makes the second
// publish a no-op, and nothing is lost when the first publish failed.
func (s *Stage) Format(ctx context.Context, r messages.ToolResult, d *bus.Delivery) ([]bus.Outgoing, error) {
	results := []messages.ToolResult{r}
	if r.Count > 1 {
		all, err := s.Gather.Add(ctx, r)
		if err != nil {
			return nil, bus.Retry(err, s.retryDelay())
		}
		if len(all) < r.Count {
			return nil, nil
		}
		results = all
	}
	return []bus.Outgoing{{Subject: messages.OutputSubject(r.Conversation), Meta: bus.Meta{
		ResponseID: r.ResponseID, Conversation: r.Conversation, MsgID: r.ResponseID,
	}, Body: s.output(r.ResponseID, r.Conversation, results)}}, nil
}

// output encodes the output of results, cutting the results to previews, each to an
// equal share that shrinks until the output fits MaxOutputBytes: every response is
// answered, whatever its results weigh.
func (s *Stage) output(responseID, conversation string, results []messages.ToolResult) []byte {
	limit := cmp.Or(s.MaxOutputBytes, 1<<20-64<<10)
	share := limit / (2*len(results) + 1) // each result travels in the text and in results
	for {
		o := messages.RenderOutput(responseID, conversation, results)
		body := messages.AppendOutput(make([]byte, 0, 2*len(o.Text)+128), &o)
		if len(body) <= limit || share < 256 {
			return body
		}
		capped := make([]messages.ToolResult, len(results))
		for i, r := range results {
			capped[i] = messages.CapResult(r, share)
		}
		results, share = capped, share/2
	}
}

func (s *Stage) retryDelay() time.Duration {
	if s.RetryDelay > 0 {
		return s.RetryDelay
	}
	return time.Second
}
