package localtools

import (
	"context"
	"encoding/json"
	"time"

	"github.com/toolbus/toolbus/pkg/engineering"
	"github.com/toolbus/toolbus/pkg/messages"
)

// Clock is the built-in clock tool: the current UTC time, as the engineering suite's
// one clock implementation computes it. now nil means time.Now.
func Clock(now func() time.Time) Tool {
	if now == nil {
		now = time.Now
	}
	out, _ := inferSchema[engineering.ClockResult]()
	return Tool{
		Info: messages.ToolInfo{
			Name:         "clock",
			Description:  "Returns the current time in UTC (RFC 3339).",
			InputSchema:  json.RawMessage(`{"type":"object","properties":{}}`),
			OutputSchema: out,
			ReadOnly:     true, Idempotent: true,
		},
		Run: func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
			return engineering.Clock(now()), nil
		},
	}
}
