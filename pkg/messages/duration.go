package messages

import (
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// Duration is a time.Duration written in JSON as a string like "30s" or a number of
// seconds, as everywhere in toolbus's configuration (the mcpServers entries, the local
// tools, the executor).
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch v := v.(type) {
	case float64:
		if v > math.MaxInt64/float64(time.Second) || v < math.MinInt64/float64(time.Second) {
			return fmt.Errorf("duration %v seconds is out of range", v)
		}
		*d = Duration(v * float64(time.Second))
	case string:
		p, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("duration %q: %w", v, err)
		}
		*d = Duration(p)
	default:
		return fmt.Errorf("duration: want a string like \"30s\" or a number of seconds")
	}
	return nil
}
