package timearg_test

import (
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/internal/timearg"
)

func TestAge(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"7d": 7 * 24 * time.Hour, "1d12h": 36 * time.Hour, "36h": 36 * time.Hour, "90m": 90 * time.Minute,
		"1ns": 1, "0": 0, "0d": 0, " 7d ": 7 * 24 * time.Hour,
	} {
		if got, err := timearg.Age(in); err != nil || got != want {
			t.Errorf("Age(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "d", "7", "-1h", "7days", "1.5d", "+7d", "99999999999d", "106751d24h"} {
		if got, err := timearg.Age(in); err == nil {
			t.Errorf("Age(%q) = %v, want an error", in, got)
		}
	}
}

func TestTime(t *testing.T) {
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"2025-01-31":                time.Date(2025, 1, 31, 0, 0, 0, 0, time.UTC),
		"2025-01-31T14:05":          time.Date(2025, 1, 31, 14, 5, 0, 0, time.UTC),
		"2025-01-31T14:05:06":       time.Date(2025, 1, 31, 14, 5, 6, 0, time.UTC),
		"2025-01-31 14:05":          time.Date(2025, 1, 31, 14, 5, 0, 0, time.UTC),
		"2025-01-31 14:05:06":       time.Date(2025, 1, 31, 14, 5, 6, 0, time.UTC),
		"2025-01-31T14:05:06.5Z":    time.Date(2025, 1, 31, 14, 5, 6, 5e8, time.UTC),
		"2025-01-31T14:05:06+02:00": time.Date(2025, 1, 31, 12, 5, 6, 0, time.UTC),
		"1969-07-20":                time.Date(1969, 7, 20, 0, 0, 0, 0, time.UTC),
		"0001-01-01T00:00:01Z":      time.Date(1, 1, 1, 0, 0, 1, 0, time.UTC),
		"36h":                       now.Add(-36 * time.Hour),
		"7d":                        now.Add(-7 * 24 * time.Hour),
		" 1d12h ":                   now.Add(-36 * time.Hour),
	} {
		got, err := timearg.Time(in, now)
		if err != nil || !got.Equal(want) || got.Location() != time.UTC {
			t.Errorf("Time(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"yesterday":                 `invalid time "yesterday": write RFC 3339 (2006-01-02T15:04:05Z), a UTC date or time (2006-01-02, 2006-01-02T15:04) or a duration ago (36h, 7d)`,
		"2025-13-01":                `invalid time "2025-13-01": write RFC 3339`,
		"-1h":                       `invalid time "-1h": write RFC 3339`,
		"0001-01-01":                `invalid time "0001-01-01": must be after 0001-01-01T00:00:00Z`,
		"0001-01-01T00:30:00+01:00": `invalid time "0001-01-01T00:30:00+01:00": must be after 0001-01-01T00:00:00Z`,
	} {
		got, err := timearg.Time(in, now)
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("Time(%q) = %v, %v; want the error %q", in, got, err, want)
		}
	}
}
