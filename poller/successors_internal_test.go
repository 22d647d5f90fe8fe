package poller

import (
	"math"
	"testing"
	"time"
)

// A delayed event is asked for again dueSlack after it is due: at once
// when it is due already, and never sooner for one due centuries ahead
// (past the largest Duration, where the wait once wrapped negative and
// the poller asked again at once, for ever).
func TestDueWait(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		due  time.Time
		want time.Duration
	}{
		{"due an hour ago", now.Add(-time.Hour), dueSlack},
		{"due now", now, dueSlack},
		{"due in a second", now.Add(time.Second), time.Second + dueSlack},
		{"due in 300 years", now.AddDate(300, 0, 0), math.MaxInt64},
		{"due in year 9999", time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC), math.MaxInt64},
	} {
		if got := dueWait(now, tc.due); got != tc.want {
			t.Errorf("%s: wait %v, want %v", tc.name, got, tc.want)
		}
	}
}
