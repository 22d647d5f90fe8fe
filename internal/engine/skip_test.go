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

// A source whose operations fail in a row is skipped for 1 s, 2 s, 4 s,
// ..., 30 s at most; a success ends that, and so does Clear.
func TestSkip(t *testing.T) {
	var s Skip
	left := func() time.Duration { return time.Until(time.Unix(0, s.until.Load())) }
	if s.Skipping() {
		t.Fatal("a new Skip skips")
	}
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second} {
		s.Record(true, 0)
		if got := left(); got > want || got < want-time.Second || !s.Skipping() {
			t.Errorf("after %d failures: skipped for %v (skipping %v), want %v", i+1, got, s.Skipping(), want)
		}
	}
	s.Record(false, 0)
	if s.until.Load() != 0 || s.failures.Load() != 0 || s.Skipping() {
		t.Errorf("after a success: until %d, failures %d; want 0, 0", s.until.Load(), s.failures.Load())
	}
	// A failure that took long (a database that does not answer, its
	// timeout) is skipped four times as long: the other sources get most
	// of the loop's time.
	s.Record(true, 5*time.Second)
	if got := left(); got > 20*time.Second || got < 19*time.Second {
		t.Errorf("after a failure that took 5s: skipped for %v, want 20s", got)
	}
	s.Record(true, time.Hour)
	if got := left(); got > 5*time.Minute || got < 5*time.Minute-time.Second {
		t.Errorf("after a failure that took an hour: skipped for %v, want 5m", got)
	}
	s.Clear()
	if s.Skipping() || s.failures.Load() != 2 {
		t.Errorf("after Clear: skipping %v, failures %d; want false, 2", s.Skipping(), s.failures.Load())
	}
}

// Pass passes a failing source's turns: while it is skipped, then once
// its skip ended, by starting one probe at a time; a success ends that.
func TestSkipPass(t *testing.T) {
	var (
		s      Skip
		probes int
		ended  func()
	)
	probe := func(e func()) { probes++; ended = e }
	if s.Pass(probe) || probes != 0 {
		t.Fatalf("a new source: pass or probe (%d)", probes)
	}
	s.Record(true, 0)
	if !s.Pass(probe) || probes != 0 {
		t.Fatalf("a skipped source: pass %v, probes %d; want passed, no probe", s.Pass(probe), probes)
	}
	s.Clear() // the skip ended; the failure is remembered
	for range 3 {
		if !s.Pass(probe) {
			t.Fatal("the turn of a source being probed was not passed")
		}
	}
	if probes != 1 {
		t.Fatalf("%d probes started, want 1 at a time", probes)
	}
	ended()
	if !s.Pass(probe) || probes != 2 {
		t.Fatalf("after a probe ended with nothing learnt: probes %d, want another", probes)
	}
	ended()
	s.Record(false, 0) // the probe found the source answering
	if s.Pass(probe) || probes != 2 {
		t.Fatalf("after a success: pass or probe (%d)", probes)
	}
}
