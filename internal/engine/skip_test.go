package engine

import (
	"testing"
	"time"
)

func TestSkipFor(t *testing.T) {
	for _, tc := range []struct {
		failures int
		took     time.Duration
		want     time.Duration
	}{
		{1, 0, time.Second},
		{2, 0, 2 * time.Second},
		{5, 0, 16 * time.Second},
		{6, 0, 30 * time.Second},
		{60, 0, 30 * time.Second},
		{1, 5 * time.Second, 20 * time.Second}, // a claim that took StatusTimeout
		{1, 30 * time.Second, 2 * time.Minute}, // a poll that took QueryTimeout
		{1, time.Hour, 5 * time.Minute},        // capped
		{6, 10 * time.Millisecond, 30 * time.Second},
	} {
		if got := SkipFor(tc.failures, tc.took); got != tc.want {
			t.Errorf("SkipFor(%d, %v) = %v, want %v", tc.failures, tc.took, got, tc.want)
		}
	}
}
