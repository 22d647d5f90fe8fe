package core

import (
	crand "crypto/rand"
	"encoding/binary"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

// ids assigns the default event ids: ULIDs, each greater than every one
// assigned before in the process, whatever the goroutine. The clock is
// read under the lock (ulid.Make reads it before taking its own, so a
// goroutine holding the previous millisecond could reseed the random part
// and hand out an id lower than one already given), and an id never goes
// back in time when the wall clock does (it keeps the last millisecond
// until the clock catches up).
var ids = struct {
	sync.Mutex
	now     func() time.Time
	lastMs  uint64
	entropy *ulid.MonotonicEntropy
}{now: time.Now}

func init() {
	var seed [32]byte
	if _, err := crand.Read(seed[:]); err != nil {
		// crypto/rand does not fail on supported platforms; a fixed seed
		// keeps ids unique within the process all the same.
		binary.LittleEndian.PutUint64(seed[:], uint64(time.Now().UnixNano()))
	}
	ids.entropy = ulid.Monotonic(rand.NewChaCha8(seed), 0)
}

// newID returns a new default event id.
func newID() string {
	ids.Lock()
	defer ids.Unlock()
	ms := max(ulid.Timestamp(ids.now()), ids.lastMs)
	id, err := ulid.New(ms, ids.entropy)
	if err != nil {
		// The random part of this millisecond ran out (2^80 values,
		// taken in steps of up to 2^32): the next millisecond starts
		// afresh.
		ms++
		id = ulid.MustNew(ms, ids.entropy)
	}
	ids.lastMs = ms
	return id.String()
}
