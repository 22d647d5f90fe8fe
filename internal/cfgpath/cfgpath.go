// Package cfgpath names configuration problems by their path in a nested
// Config: the *core.ConfigError of a part's Config ("Workers") becomes
// "Dispatcher.Workers" in the Config of the package that wires the part.
package cfgpath

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/nilval"
)

// Prefix returns err with the Field of every *core.ConfigError in it
// (err itself or the errors joined in it) put under prefix: "Workers"
// becomes prefix+".Workers", "" becomes prefix. Other errors are kept as
// they are. A nil err returns nil; err is not modified.
func Prefix(prefix string, err error) error {
	if err == nil {
		return nil
	}
	var ce *core.ConfigError
	if e, ok := err.(*core.ConfigError); ok {
		ce = e
	}
	if ce != nil {
		c := *ce
		if c.Field == "" {
			c.Field = prefix
		} else {
			c.Field = prefix + "." + c.Field
		}
		return &c
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs := j.Unwrap()
		out := make([]error, len(errs))
		for i, e := range errs {
			out[i] = Prefix(prefix, e)
		}
		return errors.Join(out...)
	}
	return err
}

// Collector gathers the problems of a configuration.
type Collector struct{ errs []error }

// Add records err (nil is ignored) under prefix ("" for none).
func (c *Collector) Add(prefix string, err error) {
	if err == nil {
		return
	}
	if prefix != "" {
		err = Prefix(prefix, err)
	}
	c.errs = append(c.errs, err)
}

// Field records a problem of the field at path.
func (c *Collector) Field(path, msg string) {
	c.errs = append(c.errs, &core.ConfigError{Field: path, Msg: msg})
}

// Err returns every problem recorded, joined, or nil.
func (c *Collector) Err() error { return errors.Join(c.errs...) }

// NilValue records a problem when v, an interface field whose nil means
// its default, holds a nil value of some type (retry.PolicyFunc(nil), a
// nil pointer): every call through it would fail.
func (c *Collector) NilValue(path string, v any) {
	if v != nil && nilval.Is(v) {
		c.Field(path, fmt.Sprintf("is a nil %T (leave it nil for the default)", v))
	}
}

// Validated records the problems of v, a value of an interface field such
// as a retry policy, when it has a Validate method (retry.Exponential),
// under path. A nil v, or a nil value of some type (see NilValue), is
// left alone.
func (c *Collector) Validated(path string, v any) {
	if nilval.Is(v) {
		return
	}
	if val, ok := v.(interface{ Validate() error }); ok {
		c.Add(path, val.Validate())
	}
}

// Logger records a problem when l is a logger without a handler (the zero
// slog.Logger, new(slog.Logger)): its first log line would panic, often
// in a background goroutine.
func (c *Collector) Logger(path string, l *slog.Logger) {
	if NoHandler(l) {
		c.Field(path, NoHandlerMsg)
	}
}

// NoHandler reports whether l is a logger without a handler (not nil, which
// means the default): the zero slog.Logger.
func NoHandler(l *slog.Logger) bool { return l != nil && l.Handler() == nil }

// NoHandlerMsg is the problem of a logger without a handler.
const NoHandlerMsg = "is a slog.Logger without a handler (make it with slog.New, or leave it nil for slog.Default())"

// UnsetClock records a problem when the clock of the part at path is set:
// the parts take the one clock of the Config that wires them.
func (c *Collector) UnsetClock(path string, now func() time.Time) {
	if now != nil {
		c.Field(path, "must be nil: set Config.Now, the clock of every part")
	}
}

// All returns every *core.ConfigError in err's tree, in order.
func All(err error) []*core.ConfigError {
	var out []*core.ConfigError
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case *core.ConfigError:
			out = append(out, e)
		case interface{ Unwrap() []error }:
			for _, x := range e.Unwrap() {
				walk(x)
			}
		case interface{ Unwrap() error }:
			walk(e.Unwrap())
		}
	}
	walk(err)
	return out
}

// Fields returns the sorted Field of every *core.ConfigError in err's tree.
func Fields(err error) []string {
	var out []string
	for _, ce := range All(err) {
		out = append(out, ce.Field)
	}
	slices.Sort(out)
	return out
}

// AtLeast1 records a problem when the count n at path is below 1.
func (c *Collector) AtLeast1(path string, n int) {
	if n < 1 {
		c.Field(path, "must be at least 1")
	}
}

// Count records a problem when the count n at path is outside 1..limit:
// a count sizes goroutines, queues allocated up front or the
// placeholders of a statement, so an absurd one fails here rather than
// as a panic or an out-of-memory later.
func (c *Collector) Count(path string, n, limit int) {
	if n < 1 || n > limit {
		c.Field(path, fmt.Sprintf("must be 1..%d", limit))
	}
}

// NotNegative records a problem when the duration d at path is negative.
func (c *Collector) NotNegative(path string, d time.Duration) {
	if d < 0 {
		c.Field(path, "must not be negative")
	}
}

// Duration records a problem when the duration d at path, where 0 means
// the default, is negative or positive but shorter than MinDuration (see
// DurationProblem).
func (c *Collector) Duration(path string, d time.Duration) {
	if msg := DurationProblem(d); msg != "" {
		c.Field(path, msg)
	}
}

// Sum returns the sum of durations that are not negative (the caller
// reports negative ones), saturating at the largest time.Duration instead
// of wrapping around: a lease checked against timeouts near the maximum
// must not pass because their sum overflowed.
func Sum(ds ...time.Duration) time.Duration {
	var sum time.Duration
	for _, d := range ds {
		if d > 0 && sum > math.MaxInt64-d {
			return math.MaxInt64
		}
		sum += max(d, 0)
	}
	return sum
}

// MinDuration is the shortest positive duration a timeout, delay or
// interval of a configuration takes: a shorter one is almost surely a
// number written without its unit (5 is 5 ns), which would make every
// wait fail or every loop spin.
const MinDuration = time.Millisecond

// DurationProblem returns what is wrong with the duration d of a
// configuration where 0 means the default: "" when it is 0 or at least
// MinDuration.
func DurationProblem(d time.Duration) string {
	switch {
	case d < 0:
		return fmt.Sprintf("must not be negative (got %v)", d)
	case d > 0 && d < MinDuration:
		return fmt.Sprintf("must be 0 (the default) or at least %v (got %v: a number without a unit is nanoseconds)", MinDuration, d)
	}
	return ""
}

// Cause returns a *core.ConfigError for field whose cause is sentinel,
// with err's text as its message less sentinel's own text at its start:
// the error's text names the sentinel once, not twice.
func Cause(field string, err, sentinel error) *core.ConfigError {
	msg := strings.TrimPrefix(err.Error(), sentinel.Error())
	msg = strings.TrimLeft(msg, ": ")
	return &core.ConfigError{Field: field, Msg: msg, Err: sentinel}
}
