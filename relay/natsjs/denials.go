package natsjs

import (
	"errors"
	"regexp"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"
)

// deniedRing is how many of the latest permission refusals a relay
// remembers: far more than publishes refused within one AckTimeout.
const deniedRing = 256

// deniedSubjectRe finds the subject in the server's refusal of a publish
// ("Permissions Violation for Publish to "<subject>"").
var deniedSubjectRe = regexp.MustCompile(`Publish to "([^"\s]+)"`)

// denials records the server's refusals to let the connection publish to
// a subject (permissions violations), as the connection's asynchronous
// error handler reports each. The connection's last error keeps the latest
// one only: of two publishes refused at once, the first was taken for an
// outage.
type denials struct {
	off  atomic.Bool // the relay closed: nothing more is recorded
	mu   sync.Mutex
	seq  uint64   // refusals recorded so far
	ring []denial // deniedRing entries; nil once stopped
}

// denial is one refusal: its number, its subject and the server's error.
type denial struct {
	seq     uint64
	subject string
	err     error
}

// watchDenials puts a handler recording nc's publish refusals in front
// of nc's asynchronous error handler, which it goes on calling; nil for a
// nil nc.
func watchDenials(nc *nats.Conn) *denials {
	if nc == nil {
		return nil
	}
	d := &denials{ring: make([]denial, deniedRing)}
	prev := nc.ErrorHandler()
	nc.SetErrorHandler(func(c *nats.Conn, s *nats.Subscription, err error) {
		d.note(err)
		if prev != nil {
			prev(c, s, err)
		}
	})
	return d
}

// note records err when it is a refusal to publish.
func (d *denials) note(err error) {
	if d.off.Load() || !errors.Is(err, nats.ErrPermissionViolation) {
		return
	}
	m := deniedSubjectRe.FindStringSubmatch(err.Error())
	if m == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ring == nil {
		return
	}
	d.seq++
	d.ring[d.seq%deniedRing] = denial{seq: d.seq, subject: m[1], err: err}
}

// mark returns the number of refusals recorded so far: since takes it to
// tell the refusals that came later.
func (d *denials) mark() uint64 {
	if d == nil {
		return 0
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.seq
}

// since returns the server's refusal of a publish to subject recorded
// after mark, nil when there is none.
func (d *denials) since(subject string, mark uint64) error {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ring == nil {
		return nil
	}
	for seq := d.seq; seq > mark && d.seq-seq < deniedRing; seq-- {
		if e := d.ring[seq%deniedRing]; e.seq == seq && e.subject == subject {
			return e.err
		}
	}
	return nil
}

// stop ends the recording and frees what was recorded: the handler stays
// on the connection (nats.go can only replace it), calling the one it
// found, and costs a closed relay a few bytes.
func (d *denials) stop() {
	if d == nil {
		return
	}
	d.off.Store(true)
	d.mu.Lock()
	d.ring = nil
	d.mu.Unlock()
}
