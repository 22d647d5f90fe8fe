package inflight_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/outbox-go/outbox/internal/inflight"
	"github.com/outbox-go/outbox/internal/testsupport"
)

// BenchmarkAcquireFinish is the tracker's share of one delivery: the
// acquire at enqueue (hot: TryAcquire; cold: Mark and TryAcquireClaimed)
// the settle before the outcome write and the finish after it. The ids repeat every 4096
// deliveries, 2 ms apart on the tracker's clock: past the window in which a
// finished id is refused.
func BenchmarkAcquireFinish(b *testing.B) {
	for _, cold := range []bool{false, true} {
		for _, ttl := range []time.Duration{0, time.Minute} {
			name := "hot"
			if cold {
				name = "cold"
			}
			b.Run(name+"/ttl="+ttl.String(), func(b *testing.B) {
				now := testsupport.Epoch // not the zero time: a real clock's offsets never need the wall fallback
				tr := inflight.New(ttl, func() time.Time { return now })
				ids := make([]string, 4096)
				for i := range ids {
					ids[i] = "01J0000000000000000000" + strconv.Itoa(i)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					now = testsupport.Epoch.Add(time.Duration(i) * 2 * time.Millisecond)
					id := ids[i%len(ids)]
					var (
						gen uint64
						ok  bool
					)
					if cold {
						gen, ok = tr.TryAcquireClaimed(id, tr.Mark())
					} else {
						gen, ok = tr.TryAcquire(id)
					}
					if !ok || !tr.Settle(id, gen) || !tr.Finish(id, gen) {
						b.Fatalf("acquire, settle or finish of %s refused", id)
					}
				}
			})
		}
	}
}
