package dashboard

import (
	"testing"
	"time"
)

func TestFiguresAreDueAfterMaxAgeAndTheirReadTimesDuty(t *testing.T) {
	at := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name   string
		took   time.Duration
		maxAge time.Duration
		since  time.Duration
		want   bool
	}{
		{"fast read, within max age", time.Millisecond, 5 * time.Second, 4 * time.Second, false},
		{"fast read, past max age", time.Millisecond, 5 * time.Second, 5*time.Second + 1, true},
		{"slow read, past max age but not its duty", 200 * time.Millisecond, 5 * time.Second, 9 * time.Second, false},
		{"slow read, past its duty", 200 * time.Millisecond, 5 * time.Second, 10*time.Second + 1, true},
		{"zero max age, fast read", 0, 0, 1, true},
		{"zero max age, slow read", time.Second, 0, 49 * time.Second, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := overviewData{ReadAt: at, Took: c.took}
			if got := due(at.Add(c.since), d, c.maxAge); got != c.want {
				t.Errorf("due after %v (read took %v, max age %v) = %v, want %v", c.since, c.took, c.maxAge, got, c.want)
			}
		})
	}
}
