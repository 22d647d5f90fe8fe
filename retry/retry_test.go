package retry_test

import (
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/retry"
)

func fixed(v float64) func() float64 { return func() float64 { return v } }

// almostOne is the largest float64 below 1, the top of Rand's range.
var almostOne = math.Nextafter(1, 0)

// nearOne is close to the top of Rand's range, far enough from 1 that
// 0.5+nearOne does not round to 1.5.
const nearOne = 0.9999

func TestExponentialFormula(t *testing.T) {
	p := retry.Exponential{BaseDelay: 200 * time.Millisecond, MaxDelay: 60 * time.Second, Rand: fixed(0.5)} // jitter 1.0
	want := map[int]time.Duration{
		1:  200 * time.Millisecond,
		2:  400 * time.Millisecond,
		3:  800 * time.Millisecond,
		4:  1600 * time.Millisecond,
		5:  3200 * time.Millisecond,
		8:  25600 * time.Millisecond,
		9:  51200 * time.Millisecond,
		10: 60 * time.Second, // 102.4 s capped
		11: 60 * time.Second,
		30: 60 * time.Second,
	}
	for attempts, w := range want {
		if got := p.Delay(attempts); got != w {
			t.Errorf("Delay(%d) = %v, want %v", attempts, got, w)
		}
	}
	// Growth: non-decreasing over the whole range.
	prev := time.Duration(0)
	for a := 1; a <= 100; a++ {
		d := p.Delay(a)
		if d < prev {
			t.Fatalf("Delay(%d) = %v < Delay(%d) = %v", a, d, a-1, prev)
		}
		if d > p.MaxDelay {
			t.Fatalf("Delay(%d) = %v exceeds MaxDelay with jitter 1.0", a, d)
		}
		prev = d
	}
}

func TestExponentialJitterBounds(t *testing.T) {
	base, maxd := 200*time.Millisecond, 60*time.Second
	low := retry.Exponential{BaseDelay: base, MaxDelay: maxd, Rand: fixed(0)}
	high := retry.Exponential{BaseDelay: base, MaxDelay: maxd, Rand: fixed(nearOne)}

	if got, want := low.Delay(1), base/2; got != want {
		t.Errorf("Rand 0: Delay(1) = %v, want %v (0.5 x base)", got, want)
	}
	if got, want := low.Delay(2), base; got != want {
		t.Errorf("Rand 0: Delay(2) = %v, want %v (0.5 x 2 x base)", got, want)
	}
	got := high.Delay(1)
	if want := base * 3 / 2; got >= want || got < want-base/1000 {
		t.Errorf("Rand ~1: Delay(1) = %v, want just below %v (1.5 x base)", got, want)
	}
	// At the very top of Rand's range the float sum may round up to 1.5,
	// but never beyond.
	top := retry.Exponential{BaseDelay: base, MaxDelay: maxd, Rand: fixed(almostOne)}
	if got, want := top.Delay(1), base*3/2; got > want || got < want-time.Microsecond {
		t.Errorf("Rand max: Delay(1) = %v, want <= %v and within 1us of it", got, want)
	}
	if got, want := low.Delay(50), maxd/2; got != want {
		t.Errorf("Rand 0: Delay(50) = %v, want %v (0.5 x MaxDelay)", got, want)
	}
	got = high.Delay(50)
	if want := maxd * 3 / 2; got >= want || got < want-maxd/1000 {
		t.Errorf("Rand ~1: Delay(50) = %v, want just below %v (1.5 x MaxDelay)", got, want)
	}
}

func TestExponentialHugeAttemptsDoNotOverflow(t *testing.T) {
	for _, base := range []time.Duration{time.Nanosecond, 200 * time.Millisecond, 3 * time.Second} {
		for _, r := range []float64{0, 0.5, 0.25} {
			p := retry.Exponential{BaseDelay: base, MaxDelay: time.Hour, Rand: fixed(r)}
			want := time.Duration(float64(time.Hour) * (0.5 + r))
			for _, attempts := range []int{62, 63, 64, 65, 100, 1000, math.MaxInt32, math.MaxInt - 1, math.MaxInt} {
				if got := p.Delay(attempts); got != want {
					t.Errorf("base %v rand %v: Delay(%d) = %v, want MaxDelay x jitter = %v", base, r, attempts, got, want)
				}
			}
		}
	}
}

func TestExponentialShiftBoundary(t *testing.T) {
	// With a 1 ns base and no practical cap the doubling must stay exact
	// up to the largest shift that fits, and fall back to MaxDelay beyond.
	maxd := time.Duration(1 << 62)
	p := retry.Exponential{BaseDelay: time.Nanosecond, MaxDelay: maxd, Rand: fixed(0.5)}
	for attempts := 1; attempts <= 62; attempts++ {
		want := time.Duration(1) << (attempts - 1)
		if got := p.Delay(attempts); got != want {
			t.Fatalf("Delay(%d) = %v, want %v", attempts, got, want)
		}
	}
	for _, attempts := range []int{63, 64, 200} {
		if got := p.Delay(attempts); got != maxd {
			t.Fatalf("Delay(%d) = %v, want MaxDelay %v", attempts, got, maxd)
		}
	}
	// Uncapped, 2^62 ns still fits: attempt 63 doubles once more (it
	// returned MaxDelay), attempt 64 (2^63) does not fit.
	p.MaxDelay = math.MaxInt64
	if got, want := p.Delay(63), time.Duration(1)<<62; got != want {
		t.Errorf("uncapped Delay(63) = %v, want %v", got, want)
	}
	if got := p.Delay(64); got != math.MaxInt64 {
		t.Errorf("uncapped Delay(64) = %v, want MaxDelay", got)
	}
}

// An uncapped policy (MaxDelay = the largest Duration) must never return a
// negative delay: float64(MaxDelay) x 1.5 does not fit in an int64.
func TestExponentialMaxDurationCapDoesNotWrapNegative(t *testing.T) {
	p, err := retry.NewExponential(200*time.Millisecond, time.Duration(math.MaxInt64))
	if err != nil {
		t.Fatalf("NewExponential: %v", err)
	}
	for _, r := range []float64{0.5, 0.9, almostOne} {
		p.Rand = fixed(r)
		for _, attempts := range []int{36, 40, 64, 1000} {
			if got := p.Delay(attempts); got < p.MaxDelay/2 {
				t.Errorf("rand %v: Delay(%d) = %v, want at least MaxDelay/2 (float->int64 overflow)", r, attempts, got)
			}
		}
	}
}

func TestExponentialAttemptsBelowOneCountAsOne(t *testing.T) {
	p := retry.Exponential{BaseDelay: 300 * time.Millisecond, MaxDelay: time.Minute, Rand: fixed(0.5)}
	want := p.Delay(1)
	if want != 300*time.Millisecond {
		t.Fatalf("Delay(1) = %v, want 300ms", want)
	}
	for _, attempts := range []int{0, -1, -62, math.MinInt} {
		if got := p.Delay(attempts); got != want {
			t.Errorf("Delay(%d) = %v, want Delay(1) = %v", attempts, got, want)
		}
	}
}

func TestExponentialZeroValueUsesDefaults(t *testing.T) {
	if retry.DefaultBaseDelay != 200*time.Millisecond || retry.DefaultMaxDelay != 60*time.Second || retry.DefaultMaxAttempts != 10 {
		t.Fatalf("defaults changed: base %v max %v attempts %d (want 200ms, 60s, 10)",
			retry.DefaultBaseDelay, retry.DefaultMaxDelay, retry.DefaultMaxAttempts)
	}
	p := retry.Exponential{Rand: fixed(0.5)}
	if got := p.Delay(1); got != 200*time.Millisecond {
		t.Errorf("zero value: Delay(1) = %v, want 200ms", got)
	}
	if got := p.Delay(100); got != 60*time.Second {
		t.Errorf("zero value: Delay(100) = %v, want 60s", got)
	}
	// Only the zero field takes its default.
	p = retry.Exponential{MaxDelay: time.Second, Rand: fixed(0.5)}
	if got := p.Delay(1); got != 200*time.Millisecond {
		t.Errorf("zero base: Delay(1) = %v, want 200ms", got)
	}
	if got := p.Delay(10); got != time.Second {
		t.Errorf("MaxDelay 1s: Delay(10) = %v, want 1s", got)
	}
	// The zero value with the real random source stays in the jitter range.
	var z retry.Exponential
	if got := z.Delay(1); got < 100*time.Millisecond || got >= 300*time.Millisecond {
		t.Errorf("zero value: Delay(1) = %v, want in [100ms, 300ms)", got)
	}
}

func TestExponentialJitterRange(t *testing.T) {
	p, err := retry.NewExponential(0, 0) // defaults, real random source
	if err != nil {
		t.Fatalf("NewExponential(0, 0): %v", err)
	}
	for _, attempts := range []int{1, 4, 20} {
		d := min(p.MaxDelay, p.BaseDelay<<(min(attempts, 20)-1))
		lo, hi := d/2, d*3/2
		var below, above int
		seenLow, seenHigh := false, false
		for range 10000 {
			got := p.Delay(attempts)
			if got < lo || got >= hi {
				t.Fatalf("Delay(%d) = %v outside [%v, %v)", attempts, got, lo, hi)
			}
			if got < d {
				below++
			} else {
				above++
			}
			seenLow = seenLow || got < lo+d/10
			seenHigh = seenHigh || got >= hi-d/10
		}
		// Uniform jitter: both halves are populated and both ends reached.
		// (Binomial(10000, 0.5) below 4000 has probability < 1e-80.)
		if below < 4000 || above < 4000 {
			t.Errorf("Delay(%d): %d samples below the nominal delay, %d above: jitter is not centred on 1.0", attempts, below, above)
		}
		if !seenLow || !seenHigh {
			t.Errorf("Delay(%d): jitter did not cover its range (low end seen %v, high end seen %v)", attempts, seenLow, seenHigh)
		}
	}
}

func TestExponentialConcurrentUse(t *testing.T) {
	p := retry.Exponential{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for a := range 200 {
				if d := p.Delay(a); d <= 0 {
					t.Errorf("Delay(%d) = %v", a, d)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestNewExponentialValidation(t *testing.T) {
	bad := []struct {
		name      string
		base, max time.Duration
	}{
		{"negative base", -time.Millisecond, time.Second},
		{"negative max", time.Millisecond, -time.Second},
		{"both negative", -time.Second, -time.Millisecond},
		{"max below base", 2 * time.Second, time.Second},
		{"max below default base", 0, 100 * time.Millisecond},
		{"base above default max", 2 * time.Minute, 0},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			p, err := retry.NewExponential(tc.base, tc.max)
			if !errors.Is(err, core.ErrInvalidConfig) {
				t.Fatalf("NewExponential(%v, %v) = %+v, %v; want an error wrapping core.ErrInvalidConfig", tc.base, tc.max, p, err)
			}
			var ce *core.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v is not a *core.ConfigError", err)
			}
			// A literal reports the same problems through Validate.
			if verr := (retry.Exponential{BaseDelay: tc.base, MaxDelay: tc.max}).Validate(); verr == nil || verr.Error() != err.Error() {
				t.Errorf("Validate = %v, want %v", verr, err)
			}
		})
	}
	if err := (retry.Exponential{}).Validate(); err != nil {
		t.Errorf("Validate of the zero value = %v", err)
	}

	good := []struct {
		base, max, wantBase, wantMax time.Duration
	}{
		{0, 0, retry.DefaultBaseDelay, retry.DefaultMaxDelay},
		{time.Second, 0, time.Second, retry.DefaultMaxDelay},
		{0, time.Second, retry.DefaultBaseDelay, time.Second},
		{time.Second, time.Second, time.Second, time.Second},
		{time.Millisecond, time.Hour, time.Millisecond, time.Hour},
	}
	for _, tc := range good {
		p, err := retry.NewExponential(tc.base, tc.max)
		if err != nil {
			t.Errorf("NewExponential(%v, %v) = %v", tc.base, tc.max, err)
			continue
		}
		if p.BaseDelay != tc.wantBase || p.MaxDelay != tc.wantMax {
			t.Errorf("NewExponential(%v, %v) = base %v max %v, want %v %v", tc.base, tc.max, p.BaseDelay, p.MaxDelay, tc.wantBase, tc.wantMax)
		}
	}
}

func TestPolicyFunc(t *testing.T) {
	var seen []int
	var p retry.Policy = retry.PolicyFunc(func(attempts int) time.Duration {
		seen = append(seen, attempts)
		return time.Duration(attempts) * time.Second
	})
	if got := p.Delay(3); got != 3*time.Second {
		t.Fatalf("Delay(3) = %v, want 3s", got)
	}
	if got := p.Delay(7); got != 7*time.Second {
		t.Fatalf("Delay(7) = %v, want 7s", got)
	}
	if len(seen) != 2 || seen[0] != 3 || seen[1] != 7 {
		t.Fatalf("PolicyFunc received %v, want [3 7]", seen)
	}
}
