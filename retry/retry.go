// Package retry decides how long a failed delivery waits before its next
// attempt.
package retry

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/outbox-go/outbox/core"
)

// Defaults of [Exponential].
const (
	DefaultBaseDelay = 200 * time.Millisecond
	DefaultMaxDelay  = 60 * time.Second
)

// DefaultMaxAttempts is how many delivery attempts an event gets before it
// goes DEAD when the dispatcher's Config.MaxAttempts is left zero; the
// policies here only space the attempts out.
const DefaultMaxAttempts = 10

// Policy returns the delay before the next attempt, given how many attempts
// have failed so far (1 after the first failure). Implementations must be
// safe for concurrent use.
type Policy interface {
	Delay(attempts int) time.Duration
}

// PolicyFunc adapts a function to [Policy].
type PolicyFunc func(attempts int) time.Duration

// Delay calls f.
func (f PolicyFunc) Delay(attempts int) time.Duration { return f(attempts) }

// Exponential is exponential backoff with jitter:
//
//	delay = min(MaxDelay, BaseDelay·2^(attempts−1)) · jitter,  jitter ∈ [0.5, 1.5)
//
// The zero value uses the defaults. Build it with [NewExponential] to have
// the values validated, or call [Exponential.Validate] (the configurations
// that take a policy do).
type Exponential struct {
	BaseDelay time.Duration  // Defaults to 200 ms.
	MaxDelay  time.Duration  // Caps the delay before the jitter (so delays reach 1.5·MaxDelay). Defaults to 60 s.
	Rand      func() float64 // uniform in [0,1); defaults to math/rand/v2.Float64
	_         struct{}       // keyed literals only
}

var _ Policy = Exponential{}

// NewExponential returns a validated policy (see [Exponential.Validate]);
// zero durations take the defaults.
func NewExponential(base, max time.Duration) (Exponential, error) {
	p := Exponential{BaseDelay: base, MaxDelay: max}
	if err := p.Validate(); err != nil {
		return Exponential{}, err
	}
	return p.withDefaults(), nil
}

// Validate reports, at once, a negative BaseDelay or MaxDelay and a
// MaxDelay shorter than BaseDelay (zero fields count as their defaults),
// each a *core.ConfigError naming its field. A configuration that takes a
// retry policy (dispatcher.Config.Retry, inbox.Config.Backoff, ...)
// validates an Exponential with it.
func (p Exponential) Validate() error {
	var errs []error
	if p.BaseDelay < 0 {
		errs = append(errs, &core.ConfigError{Field: "BaseDelay", Msg: fmt.Sprintf("must not be negative, got %v", p.BaseDelay)})
	}
	if p.MaxDelay < 0 {
		errs = append(errs, &core.ConfigError{Field: "MaxDelay", Msg: fmt.Sprintf("must not be negative, got %v", p.MaxDelay)})
	}
	if d := p.withDefaults(); len(errs) == 0 && d.MaxDelay < d.BaseDelay {
		errs = append(errs, &core.ConfigError{Field: "MaxDelay", Msg: fmt.Sprintf("(%v) must be at least BaseDelay (%v)", d.MaxDelay, d.BaseDelay)})
	}
	return errors.Join(errs...)
}

func (p Exponential) withDefaults() Exponential {
	if p.BaseDelay == 0 {
		p.BaseDelay = DefaultBaseDelay
	}
	if p.MaxDelay == 0 {
		p.MaxDelay = DefaultMaxDelay
	}
	return p
}

// Delay implements [Policy]. attempts below 1 count as 1.
func (p Exponential) Delay(attempts int) time.Duration {
	p = p.withDefaults()
	if attempts < 1 {
		attempts = 1
	}
	d := p.MaxDelay
	// base·2^(attempts−1) without overflow: stop doubling once past max.
	if shift := attempts - 1; shift < 63 { // b > 0 catches the sign bit
		if b := p.BaseDelay << shift; b>>shift == p.BaseDelay && b > 0 && b < p.MaxDelay {
			d = b
		}
	}
	r := rand.Float64
	if p.Rand != nil {
		r = p.Rand
	}
	f := float64(d) * (0.5 + r())
	if f >= math.MaxInt64 { // a MaxDelay near the Duration limit must not wrap negative
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(f)
}
