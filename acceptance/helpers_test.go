package acceptance

import (
	"time"

	"github.com/outbox-go/outbox/retry"
)

// fixedRetry retries after d whatever the attempt.
func fixedRetry(d time.Duration) retry.Policy {
	return retry.PolicyFunc(func(int) time.Duration { return d })
}
