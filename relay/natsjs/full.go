package natsjs

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// maxFullSubjects bounds how many subjects refused by full streams a
// relay remembers. Beyond it a refused event is still put off, uncharged;
// its subject is not remembered, so its later acceptance does not count
// towards ending its stream's incident (the incident ends once the
// remembered subjects were all accepted again).
const maxFullSubjects = 4096

// isStreamFull reports whether err is JetStream's refusal of a message
// because its stream holds all it may (MaxMsgs or MaxBytes) and discards
// new messages (Discard: DiscardNew): 503 "maximum messages exceeded" or
// "maximum bytes exceeded". The per-subject limit is told apart before.
func isStreamFull(apiErr *jetstream.APIError) bool {
	return apiErr.Code == 503 &&
		(strings.Contains(apiErr.Description, "maximum messages exceeded") || strings.Contains(apiErr.Description, "maximum bytes exceeded"))
}

// fullStreams keeps the incidents of streams full with DiscardNew. Such a
// stream refuses every message until room is made (a consumer acks, a
// purge, MaxAge), and takes the messages of no subject of its own; the
// other streams take theirs. So a full stream is no outage of the broker:
// its events are put off, uncharged, one by one, and the others go on.
// Each incident logs one ERROR, naming the stream (asked of the JetStream
// API once per subject), when its first event is refused and one INFO
// when every subject refused meanwhile was accepted again: a stream at
// its limit whose consumer frees room one message at a time does not log
// a line per message.
type fullStreams struct {
	log        *slog.Logger
	broker     string // the breaker's name, in log lines
	retryAfter time.Duration
	now        func() time.Time

	// any is set while a subject is remembered, so that an accepted
	// message costs one atomic load when no stream is full.
	any atomic.Bool
	// lookupMu makes one refused publish at a time ask the JetStream API
	// for its subject's stream: the events of a stream that just filled
	// up, refused together, ask once per subject.
	lookupMu sync.Mutex

	mu       sync.Mutex
	subjects map[string]string        // refused subject -> its stream ("" when the API did not say)
	streams  map[string]*fullIncident // stream -> its incident
}

// fullIncident is one stream's time full.
type fullIncident struct {
	since    time.Time
	subjects int   // remembered subjects of the stream refused and not accepted since
	putOffs  int64 // events put off because the stream was full
}

func newFullStreams(log *slog.Logger, broker string, retryAfter time.Duration, now func() time.Time) *fullStreams {
	return &fullStreams{log: log, broker: broker, retryAfter: retryAfter, now: now,
		subjects: make(map[string]string), streams: make(map[string]*fullIncident)}
}

// refused records an event put off because the stream of subject was
// full, with err the broker's answer; stream asks the JetStream API which
// stream listens on subject, the first time it is refused in an incident.
func (f *fullStreams) refused(ctx context.Context, subject string, err error, stream func(context.Context, string) (string, error)) {
	if f.count(subject) {
		return
	}
	f.lookupMu.Lock()
	defer f.lookupMu.Unlock()
	if f.count(subject) { // another publish of subject asked meanwhile
		return
	}
	name, lerr := stream(ctx, subject)
	if lerr != nil {
		name = ""
	}
	f.mu.Lock()
	inc, ongoing := f.streams[name]
	if !ongoing {
		inc = &fullIncident{since: f.now()}
		f.streams[name] = inc
	}
	inc.putOffs++
	if len(f.subjects) < maxFullSubjects {
		f.subjects[subject] = name
		inc.subjects++
		f.any.Store(true)
	} else if !ongoing {
		// Nothing remembered would end it.
		delete(f.streams, name)
	}
	f.mu.Unlock()
	if !ongoing {
		f.log.LogAttrs(context.Background(), slog.LevelError,
			"natsjs: stream full (Discard: DiscardNew); its events are put off without charging attempts until it has room, the other streams' go on",
			slog.String("broker", f.broker), slog.String("stream", name), slog.String("subject", subject),
			slog.String("error", err.Error()), slog.Duration("retry_after", f.retryAfter))
	}
}

// count counts one more event put off for subject when subject is
// remembered, and reports whether it was.
func (f *fullStreams) count(subject string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	name, ok := f.subjects[subject]
	if ok {
		f.streams[name].putOffs++
	}
	return ok
}

// accepted records a message the stream of subject took: when subject was
// the last one refused of its stream's incident, the incident ends.
func (f *fullStreams) accepted(subject string) {
	if !f.any.Load() {
		return
	}
	f.mu.Lock()
	name, ok := f.subjects[subject]
	if !ok {
		f.mu.Unlock()
		return
	}
	delete(f.subjects, subject)
	if len(f.subjects) == 0 {
		f.any.Store(false)
	}
	inc := f.streams[name]
	inc.subjects--
	if inc.subjects > 0 {
		f.mu.Unlock()
		return
	}
	delete(f.streams, name)
	f.mu.Unlock()
	f.log.LogAttrs(context.Background(), slog.LevelInfo, "natsjs: full stream takes messages again",
		slog.String("broker", f.broker), slog.String("stream", name),
		slog.Duration("full", f.now().Sub(inc.since)), slog.Int64("put_offs", inc.putOffs))
}
