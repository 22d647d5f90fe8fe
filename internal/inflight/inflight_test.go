package inflight_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbox-go/outbox/internal/inflight"
	"github.com/outbox-go/outbox/internal/testsupport"
)

// tracker is a Tracker for tests that hold each id once at a time: it
// remembers the generation of each id's latest acquisition and passes it
// back. Not for concurrent use.
type tracker struct {
	*inflight.Tracker
	gens map[string]uint64
}

func newTracker(ttl time.Duration, now func() time.Time) *tracker {
	return &tracker{Tracker: inflight.New(ttl, now), gens: map[string]uint64{}}
}

func (t *tracker) TryAcquire(id string) bool {
	gen, ok := t.Tracker.TryAcquire(id)
	if ok {
		t.gens[id] = gen
	}
	return ok
}

func (t *tracker) TryAcquireClaimed(id string, mark uint64) bool {
	gen, ok := t.Tracker.TryAcquireClaimed(id, mark)
	if ok {
		t.gens[id] = gen
	}
	return ok
}

func (t *tracker) Release(id string) { t.Tracker.Release(id, t.gens[id]) }
func (t *tracker) Finish(id string)  { t.Tracker.Finish(id, t.gens[id]) }

func TestInFlightAcquireReleaseContains(t *testing.T) {
	tr := newTracker(0, nil)
	if tr.Contains("a") || tr.Len() != 0 {
		t.Fatal("new tracker is not empty")
	}
	if !tr.TryAcquire("a") {
		t.Fatal("TryAcquire(a) on an empty tracker = false")
	}
	if tr.TryAcquire("a") {
		t.Fatal("second TryAcquire(a) = true, want false")
	}
	if !tr.TryAcquire("b") {
		t.Fatal("TryAcquire(b) = false: ids must be independent")
	}
	if !tr.Contains("a") || !tr.Contains("b") || tr.Contains("c") || tr.Len() != 2 {
		t.Fatalf("Contains a=%v b=%v c=%v Len=%d; want true true false 2", tr.Contains("a"), tr.Contains("b"), tr.Contains("c"), tr.Len())
	}
	tr.Release("a")
	tr.Release("never-held") // no-op
	if tr.Contains("a") || tr.Len() != 1 {
		t.Fatalf("after Release(a): Contains(a)=%v Len=%d", tr.Contains("a"), tr.Len())
	}
	if !tr.TryAcquire("a") {
		t.Fatal("TryAcquire after Release = false")
	}
}

func TestInFlightWithoutTTLNeverExpires(t *testing.T) {
	clock := testsupport.NewClock(testsupport.Epoch)
	tr := newTracker(0, clock.Now)
	tr.TryAcquire("a")
	clock.Advance(1000 * time.Hour)
	if !tr.Contains("a") || tr.TryAcquire("a") {
		t.Fatal("an entry expired without a TTL")
	}
}

func TestInFlightTTLExpiry(t *testing.T) {
	clock := testsupport.NewClock(testsupport.Epoch)
	tr := newTracker(10*time.Second, clock.Now)
	if !tr.TryAcquire("a") {
		t.Fatal("TryAcquire(a) = false")
	}
	clock.Advance(9*time.Second + 999*time.Millisecond)
	if !tr.Contains("a") || tr.TryAcquire("a") {
		t.Fatal("entry expired before its TTL")
	}
	clock.Advance(time.Millisecond) // exactly the TTL
	if tr.Contains("a") {
		t.Fatal("Contains(a) = true at the TTL, want false (expired)")
	}
	if !tr.TryAcquire("a") {
		t.Fatal("TryAcquire of an expired entry = false")
	}
	// Re-acquired: a fresh TTL from now.
	clock.Advance(9 * time.Second)
	if !tr.Contains("a") || tr.TryAcquire("a") {
		t.Fatal("re-acquired entry did not get a fresh TTL")
	}
	tr.Release("a")
	if tr.Contains("a") {
		t.Fatal("Release did not drop the entry")
	}
}

// AnyExpired tells whether a matching entry may be taken again: held for
// the TTL or longer and not settling; never without a TTL.
func TestInFlightAnyExpired(t *testing.T) {
	clock := testsupport.NewClock(testsupport.Epoch)
	tr := newTracker(10*time.Second, clock.Now)
	isA := func(id string) bool { return id == "a" }
	tr.TryAcquire("a")
	clock.Advance(5 * time.Second)
	tr.TryAcquire("b")
	if tr.AnyExpired(func(string) bool { return true }) {
		t.Fatal("AnyExpired before any TTL elapsed")
	}
	clock.Advance(5 * time.Second)
	if !tr.AnyExpired(isA) {
		t.Fatal("AnyExpired(a) = false at a's TTL")
	}
	if tr.AnyExpired(func(id string) bool { return id == "b" }) {
		t.Fatal("AnyExpired(b) = true before b's TTL")
	}
	if !tr.Settle("a", tr.gens["a"]) || tr.AnyExpired(isA) {
		t.Fatal("a settling entry reported expired")
	}
	tr.Finish("a")
	clock.Advance(time.Hour)
	if tr.AnyExpired(isA) {
		t.Fatal("a finished entry reported expired")
	}

	none := newTracker(0, clock.Now)
	none.TryAcquire("a")
	clock.Advance(1000 * time.Hour)
	if none.AnyExpired(func(string) bool { return true }) {
		t.Fatal("AnyExpired without a TTL")
	}
}

func TestInFlightConcurrentAcquireHasOneWinner(t *testing.T) {
	tr := inflight.New(0, nil)
	for round := range 50 {
		id := string(rune('a' + round%26))
		var (
			wins atomic.Int32
			gen  atomic.Uint64
		)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if g, ok := tr.TryAcquire(id); ok {
					wins.Add(1)
					gen.Store(g)
				}
				_ = tr.Contains(id)
			}()
		}
		close(start)
		wg.Wait()
		if n := wins.Load(); n != 1 {
			t.Fatalf("round %d: %d goroutines acquired %q, want 1", round, n, id)
		}
		if !tr.Release(id, gen.Load()) {
			t.Fatalf("round %d: the winner's Release was refused", round)
		}
	}
	if tr.Len() != 0 {
		t.Fatalf("Len = %d after releasing everything", tr.Len())
	}
}

// A finished id is refused to a claim that began before its outcome was
// written (the claim may have read the row before), and taken at once by
// one that began after (a replay of a DEAD event). The hot path is
// refused it for a few seconds (a second hand-off of a delivered event).
func TestInFlightFinishRefusedToEarlierClaims(t *testing.T) {
	clock := testsupport.NewClock(testsupport.Epoch)
	tr := newTracker(0, clock.Now)
	if !tr.TryAcquire("a") {
		t.Fatal("first acquire refused")
	}
	before := tr.Mark()
	tr.Finish("a")
	if tr.Contains("a") {
		t.Fatal("finished id still in flight")
	}
	if tr.TryAcquireClaimed("a", before) {
		t.Fatal("a claim from before the finish took the id")
	}
	if tr.TryAcquire("a") {
		t.Fatal("finished id taken again at once by the hot path")
	}
	clock.Advance(4 * time.Second)
	if tr.TryAcquire("a") {
		t.Fatal("finished id taken again by the hot path within the window")
	}
	if !tr.TryAcquireClaimed("a", tr.Mark()) {
		t.Fatal("a claim from after the finish was refused")
	}
	tr.Finish("a")
	clock.Advance(6 * time.Second)
	if !tr.TryAcquire("a") {
		t.Fatal("finished id refused to the hot path after the window")
	}
	// Release (a failed or fenced write): refused to an earlier claim
	// only.
	before = tr.Mark()
	tr.Release("a")
	if tr.TryAcquireClaimed("a", before) || !tr.TryAcquire("a") {
		t.Fatal("released id: want refused to an earlier claim and taken by the hot path")
	}
}

// The memory is bounded: the oldest ids let go are forgotten first (a
// claim from before takes them).
func TestInFlightFinishIsBounded(t *testing.T) {
	tr := newTracker(0, nil)
	mark := tr.Mark()
	for i := range 9000 {
		id := fmt.Sprint(i)
		tr.TryAcquire(id)
		tr.Finish(id)
	}
	if !tr.TryAcquireClaimed("0", mark) {
		t.Fatal("the oldest finished id is still remembered past the bound")
	}
	if tr.TryAcquireClaimed("8999", mark) {
		t.Fatal("the newest finished id was forgotten")
	}
}

// A claim that read rows before an event was let go must not queue that
// stale copy: TryAcquireClaimed refuses an id released or finished after
// the claim's mark, and takes one let go before it.
func TestInFlightClaimAfterRelease(t *testing.T) {
	clock := testsupport.NewClock(testsupport.Epoch)
	tr := newTracker(0, clock.Now)
	tr.TryAcquire("put-off")
	tr.TryAcquire("earlier")
	tr.Release("earlier")
	mark := tr.Mark() // the claim reads its rows now
	tr.Release("put-off")
	if tr.TryAcquireClaimed("put-off", mark) {
		t.Fatal("a claim from before the release took the event again")
	}
	if !tr.TryAcquireClaimed("earlier", mark) {
		t.Fatal("an event released before the claim began was refused")
	}
	if !tr.TryAcquireClaimed("put-off", tr.Mark()) {
		t.Fatal("a claim that began after the release was refused")
	}
	tr.Release("put-off")
	if !tr.TryAcquire("put-off") {
		t.Fatal("the hot path (no claim) was refused a released event")
	}
	// An id let go twice keeps its latest entry when the older one leaves
	// the ring.
	tr.TryAcquire("twice")
	tr.Finish("twice")
	clock.Advance(time.Minute)
	tr.TryAcquire("twice")
	tr.Release("twice")
	m := tr.Mark()
	for i := range 8192 - 1 {
		tr.TryAcquire(fmt.Sprint("filler", i))
		tr.Release(fmt.Sprint("filler", i))
	}
	if tr.TryAcquireClaimed("twice", m-1) {
		t.Fatal("the latest release of an id was forgotten with its older finish")
	}
}

// Each acquisition has its own generation. Once the TTL let an entry be
// taken again, the former holder's generation is stale: it cannot settle,
// and its Release or Finish leaves the new holder's entry alone.
func TestInFlightStaleGeneration(t *testing.T) {
	clock := testsupport.NewClock(testsupport.Epoch)
	tr := inflight.New(10*time.Second, clock.Now)
	first, ok := tr.TryAcquire("a")
	if !ok || first == 0 {
		t.Fatalf("TryAcquire(a) = %d, %v; want a generation > 0, true", first, ok)
	}
	if !tr.Holds("a", first) {
		t.Fatal("Holds(a, first) = false for the current holder")
	}
	clock.Advance(10 * time.Second) // the first holder is stuck past the TTL
	second, ok := tr.TryAcquireClaimed("a", tr.Mark())
	if !ok || second == first {
		t.Fatalf("TryAcquireClaimed(a) after the TTL = %d, %v; want a new generation (first was %d), true", second, ok, first)
	}
	if tr.Holds("a", first) || !tr.Holds("a", second) {
		t.Fatalf("Holds first=%v second=%v; want false true", tr.Holds("a", first), tr.Holds("a", second))
	}
	if tr.Settle("a", first) {
		t.Fatal("Settle with the stale generation = true: its outcome would settle the row for the new holder")
	}
	mark := tr.Mark()
	if tr.Release("a", first) || tr.Finish("a", first) || tr.Resume("a", first) {
		t.Fatal("a stale holder's Release, Finish or Resume reported true")
	}
	if !tr.Contains("a") || tr.Mark() != mark {
		t.Fatalf("a stale holder let the new holder's entry go (Contains=%v, mark %d -> %d)", tr.Contains("a"), mark, tr.Mark())
	}
	if _, ok := tr.TryAcquireClaimed("a", mark); ok {
		t.Fatal("the entry was taken a third time while its second holder runs")
	}
	if !tr.Settle("a", second) || !tr.Finish("a", second) {
		t.Fatal("the current holder could not settle and finish")
	}
	if tr.Contains("a") || tr.Len() != 0 {
		t.Fatal("Finish by the current holder did not drop the entry")
	}
	if tr.Holds("a", second) || tr.Settle("a", second) {
		t.Fatal("a generation let go still holds its entry")
	}
}

// A settling entry is not taken again however old it is, so the check
// (Settle) and the outcome write cannot race with a new holder; Resume
// (an in-process retry) lets the TTL apply again, counted from then.
func TestInFlightSettlingIsNotTakenAgain(t *testing.T) {
	clock := testsupport.NewClock(testsupport.Epoch)
	tr := inflight.New(10*time.Second, clock.Now)
	gen, _ := tr.TryAcquire("a")
	clock.Advance(9 * time.Second)
	for range 2 { // settling twice is allowed
		if !tr.Settle("a", gen) {
			t.Fatal("the current holder could not settle")
		}
	}
	clock.Advance(time.Hour) // a slow outcome write
	if _, ok := tr.TryAcquire("a"); ok {
		t.Fatal("a settling entry was taken again past the TTL")
	}
	if _, ok := tr.TryAcquireClaimed("a", tr.Mark()); ok {
		t.Fatal("a settling entry was claimed again past the TTL")
	}
	if !tr.Contains("a") {
		t.Fatal("Contains(a) = false for a settling entry past the TTL")
	}
	if !tr.Resume("a", gen) {
		t.Fatal("Resume by the current holder = false")
	}
	clock.Advance(9 * time.Second)
	if _, ok := tr.TryAcquire("a"); ok || !tr.Contains("a") {
		t.Fatal("a resumed entry expired before the TTL from its resumption")
	}
	clock.Advance(time.Second)
	if tr.Contains("a") {
		t.Fatal("a resumed entry did not expire at the TTL")
	}
	next, ok := tr.TryAcquire("a")
	if !ok || tr.Settle("a", gen) || !tr.Settle("a", next) {
		t.Fatal("after the TTL, the resumed entry was not taken over by a new generation")
	}
}

// Without a TTL a held entry is never taken again: every holder's
// generation stays current until it lets go.
func TestInFlightWithoutTTLGenerationsStayCurrent(t *testing.T) {
	clock := testsupport.NewClock(testsupport.Epoch)
	tr := inflight.New(0, clock.Now)
	gen, _ := tr.TryAcquire("a")
	clock.Advance(1000 * time.Hour)
	if !tr.Holds("a", gen) || !tr.Settle("a", gen) || !tr.Resume("a", gen) {
		t.Fatal("a holder's generation went stale without a TTL")
	}
	if !tr.Release("a", gen) || tr.Contains("a") {
		t.Fatal("Release by the holder did not drop the entry")
	}
}

// An acquisition past the TTL that is released before it settles (its
// copy could not be queued, say) puts back the entry it replaced, with its
// generation and age: the first holder, whose run may be the only one,
// still settles.
func TestInFlightUndoneRetakePutsTheFirstHolderBack(t *testing.T) {
	clock := testsupport.NewClock(testsupport.Epoch)
	tr := inflight.New(10*time.Second, clock.Now)
	first, _ := tr.TryAcquire("a")
	clock.Advance(10 * time.Second)
	second, ok := tr.TryAcquireClaimed("a", tr.Mark())
	if !ok {
		t.Fatal("TryAcquireClaimed(a) past the TTL = false")
	}
	mark := tr.Mark()
	if !tr.Release("a", second) {
		t.Fatal("Release by the current holder = false")
	}
	if !tr.Holds("a", first) || tr.Holds("a", second) || tr.Len() != 1 {
		t.Fatalf("after the new holder's release: Holds first=%v second=%v, Len %d; want true false 1",
			tr.Holds("a", first), tr.Holds("a", second), tr.Len())
	}
	if tr.Contains("a") {
		t.Fatal("the entry put back got a fresh TTL: it kept the first holder's age, past the TTL")
	}
	if tr.Mark() != mark {
		t.Fatal("putting the first holder back counted as letting a go")
	}
	if tr.Release("a", second) || tr.Settle("a", second) {
		t.Fatal("the released generation still holds a")
	}
	if !tr.Settle("a", first) || !tr.Finish("a", first) || tr.Len() != 0 {
		t.Fatal("the first holder could not settle and finish after the new holder's release")
	}
}

// The entry an acquisition replaced is stale for good once that
// acquisition settled or finished, or once its holder gave up.
func TestInFlightRetakeReplacesForGood(t *testing.T) {
	for _, tc := range []struct {
		name string
		// end is what happens to a after its second acquisition, second.
		end func(tr *inflight.Tracker, first, second uint64) bool
	}{
		{"the new holder settles, then releases", func(tr *inflight.Tracker, _, second uint64) bool {
			return tr.Settle("a", second) && tr.Release("a", second)
		}},
		{"the new holder settles, resumes, then releases", func(tr *inflight.Tracker, _, second uint64) bool {
			return tr.Settle("a", second) && tr.Resume("a", second) && tr.Release("a", second)
		}},
		{"the new holder finishes", func(tr *inflight.Tracker, _, second uint64) bool {
			return tr.Settle("a", second) && tr.Finish("a", second)
		}},
		{"the first holder's settle was refused", func(tr *inflight.Tracker, first, second uint64) bool {
			return !tr.Settle("a", first) && tr.Release("a", second)
		}},
		{"the first holder released", func(tr *inflight.Tracker, first, second uint64) bool {
			return !tr.Release("a", first) && tr.Release("a", second)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := testsupport.NewClock(testsupport.Epoch)
			tr := inflight.New(10*time.Second, clock.Now)
			first, _ := tr.TryAcquire("a")
			clock.Advance(10 * time.Second)
			second, ok := tr.TryAcquire("a")
			if !ok || !tc.end(tr, first, second) {
				t.Fatal("a tracker call reported otherwise than expected")
			}
			if tr.Len() != 0 || tr.Holds("a", first) || tr.Settle("a", first) {
				t.Fatalf("the replaced entry came back: Len %d, Holds(first) %v", tr.Len(), tr.Holds("a", first))
			}
		})
	}
}

// Released before it settled, the third acquisition of a (each past the
// TTL) puts back the second, the one it replaced; the first stays stale.
func TestInFlightUndoneRetakePutsBackTheLatestHolder(t *testing.T) {
	clock := testsupport.NewClock(testsupport.Epoch)
	tr := inflight.New(10*time.Second, clock.Now)
	first, _ := tr.TryAcquire("a")
	clock.Advance(10 * time.Second)
	second, _ := tr.TryAcquire("a")
	clock.Advance(10 * time.Second)
	third, ok := tr.TryAcquire("a")
	if !ok || !tr.Release("a", third) {
		t.Fatal("the third acquisition or its release was refused")
	}
	if tr.Holds("a", first) || !tr.Holds("a", second) {
		t.Fatalf("after the third holder's release: Holds first=%v second=%v; want false true", tr.Holds("a", first), tr.Holds("a", second))
	}
	if !tr.Release("a", second) || tr.Len() != 0 {
		t.Fatal("the second holder, never settled, did not let a go: it replaced the first for good when the third took over")
	}
}

// Entry times cannot saturate: a clock still at the zero time when the
// tracker is made (a test clock set later) does not keep entries from
// expiring, nor does any other pair of times of years 1 to 9999.
func TestInFlightTTLExpiryFarFromTheStartingClock(t *testing.T) {
	for _, tc := range []struct {
		name      string
		made, use time.Time
	}{
		{"made at the zero time", time.Time{}, time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"made at year 1, used at 9999", time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 1, 1, 0, 0, 0, 999_999_999, time.UTC)},
		{"made at 9999, used at year 1", time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC), time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC)},
		{"made with a monotonic reading", time.Now(), time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := testsupport.NewClock(tc.made)
			tr := inflight.New(time.Second, clock.Now)
			clock.Set(tc.use)
			if _, ok := tr.TryAcquire("a"); !ok {
				t.Fatal("TryAcquire(a) = false")
			}
			clock.Advance(999 * time.Millisecond)
			if !tr.Contains("a") {
				t.Fatal("the entry expired before its TTL")
			}
			clock.Advance(time.Millisecond)
			if tr.Contains("a") {
				t.Fatal("the entry did not expire at its TTL")
			}
			clock.Advance(time.Hour)
			if tr.Contains("a") {
				t.Fatal("the entry did not expire an hour past its TTL")
			}
			if _, ok := tr.TryAcquire("a"); !ok {
				t.Fatal("TryAcquire of the expired entry = false")
			}
		})
	}
}
