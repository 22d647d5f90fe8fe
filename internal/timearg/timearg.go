// Package timearg reads the times and ages operators type: outboxctl's
// --since, --until and purge ages, and the dashboard's filters and purge
// preview. Both take the same forms and say the same about a bad one.
package timearg

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// maxDays keeps a day count within time.Duration.
const maxDays = math.MaxInt64 / int64(24*time.Hour)

// Age reads a non-negative Go duration ("36h", "90m", "1ns"), optionally
// led by a number of days ("7d", "1d12h"). Surrounding spaces are
// ignored.
func Age(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	bad := fmt.Errorf("invalid duration %q: write a Go duration (90m, 36h) or days (7d, 1d12h)", s)
	if s == "" {
		return 0, bad
	}
	var days int64
	rest := s
	if i := strings.IndexByte(s, 'd'); i > 0 && isDigits(s[:i]) {
		n, err := strconv.ParseInt(s[:i], 10, 64)
		if err != nil || n > maxDays {
			return 0, fmt.Errorf("duration %q is too long", s)
		}
		days, rest = n, s[i+1:]
	}
	var d time.Duration
	if rest != "" {
		var err error
		if d, err = time.ParseDuration(rest); err != nil {
			return 0, bad
		}
	}
	if d < 0 {
		return 0, fmt.Errorf("duration %q must not be negative", s)
	}
	total := time.Duration(days) * 24 * time.Hour
	if total > math.MaxInt64-d {
		return 0, fmt.Errorf("duration %q is too long", s)
	}
	return total + d, nil
}

func isDigits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// utcLayouts are the forms of a time without a zone, read as UTC: a date,
// and a date and time as an HTML datetime-local field sends it or as
// people write it.
var utcLayouts = []string{time.DateOnly, "2006-01-02T15:04:05", "2006-01-02T15:04", time.DateTime, "2006-01-02 15:04"}

// Time reads a time bound (of a filter on created_at): an RFC 3339 time
// (2006-01-02T15:04:05Z, fractions and any offset allowed), a date or a
// date and time in UTC (2006-01-02, 2006-01-02T15:04, 2006-01-02
// 15:04:05), or a duration ago (36h, 7d, 1d12h: see Age), taken from
// now. Surrounding spaces are ignored. The result is in UTC and after
// the zero time, which would bound nothing.
func Time(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	t, err := time.Parse(time.RFC3339Nano, s)
	for _, l := range utcLayouts {
		if err == nil {
			break
		}
		t, err = time.ParseInLocation(l, s, time.UTC)
	}
	if err == nil {
		if !t.After(time.Time{}) {
			return time.Time{}, fmt.Errorf("invalid time %q: must be after 0001-01-01T00:00:00Z", s)
		}
		return t.UTC(), nil
	}
	d, err := Age(s)
	if err != nil {
		return time.Time{}, fmt.Errorf("invalid time %q: write RFC 3339 (2006-01-02T15:04:05Z), a UTC date or time (2006-01-02, 2006-01-02T15:04) or a duration ago (36h, 7d)", s)
	}
	return now.Add(-d).UTC(), nil
}
