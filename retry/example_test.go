package retry_test

import (
	"fmt"
	"time"

	"github.com/outbox-go/outbox/retry"
)

// Exponential doubles the delay after every failed attempt, up to
// MaxDelay, and spreads it with a random jitter in [0.5, 1.5). A fixed Rand
// of 0.5 (a jitter of 1) shows the bare schedule.
func ExampleExponential() {
	p, err := retry.NewExponential(100*time.Millisecond, time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	p.Rand = func() float64 { return 0.5 }
	for attempts := 1; attempts <= 6; attempts++ {
		fmt.Println(attempts, p.Delay(attempts))
	}
	// Output:
	// 1 100ms
	// 2 200ms
	// 3 400ms
	// 4 800ms
	// 5 1s
	// 6 1s
}

// NewExponential rejects settings that make no schedule.
func ExampleNewExponential() {
	_, err := retry.NewExponential(2*time.Second, time.Second)
	fmt.Println(err != nil)
	// Output: true
}

// PolicyFunc turns any function into a policy, here a fixed delay.
func ExamplePolicyFunc() {
	var p retry.Policy = retry.PolicyFunc(func(attempts int) time.Duration {
		return 5 * time.Second
	})
	fmt.Println(p.Delay(1), p.Delay(9))
	// Output: 5s 5s
}
