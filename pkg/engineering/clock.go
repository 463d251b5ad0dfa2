package engineering

import (
	"encoding/json"
	"fmt"
	"time"
)

// ClockResult is the result of the clock tool.
type ClockResult struct {
	// UTC is the time in RFC 3339, to the second.
	UTC       string `json:"utc"`
	Unix      int64  `json:"unix"`
	Date      string `json:"date"`
	Time      string `json:"time"`
	Weekday   string `json:"weekday"`
	ISOWeek   string `json:"iso_week"`
	DayOfYear int    `json:"day_of_year"`
}

// Clock is the result of the clock tool at now: the one implementation, which the
// executor's local clock tool reuses.
func Clock(now time.Time) json.RawMessage {
	t := now.UTC()
	y, w := t.ISOWeek()
	return mustJSON(ClockResult{
		UTC:       t.Format(time.RFC3339),
		Unix:      t.Unix(),
		Date:      t.Format(time.DateOnly),
		Time:      t.Format(time.TimeOnly),
		Weekday:   t.Weekday().String(),
		ISOWeek:   fmt.Sprintf("%04d-W%02d", y, w),
		DayOfYear: t.YearDay(),
	})
}
