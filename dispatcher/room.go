package dispatcher

import (
	"sync"
	"sync/atomic"
)

// roomNotices are the one-shot notices pollers arm when they find the
// cold queue full (handoff.RoomNotifier): they run once the workers have
// drained it to half its capacity, so a poller draining a backlog claims
// its next batch while the workers still have half a queue to work on,
// never waiting a fixed pause with idle workers.
type roomNotices struct {
	waiting atomic.Bool // fns is not empty: the workers check the queue's length
	mu      sync.Mutex
	fns     []func()
}

// notifyRoom arms fn (see handoff.RoomNotifier.NotifyRoom).
func (d *Dispatcher) notifyRoom(fn func()) {
	d.room.mu.Lock()
	d.room.fns = append(d.room.fns, fn)
	d.room.waiting.Store(true)
	d.room.mu.Unlock()
	if d.coldHalfEmpty() {
		d.fireRoom()
	}
}

// tookCold is called by a worker that took an event from the cold queue:
// it runs the armed notices once the queue is down to half. One atomic
// load when nothing is armed.
func (d *Dispatcher) tookCold() {
	if d.room.waiting.Load() && d.coldHalfEmpty() {
		d.fireRoom()
	}
}

// coldHalfEmpty reports whether the cold queue holds at most half its
// capacity.
func (d *Dispatcher) coldHalfEmpty() bool { return len(d.cold) <= cap(d.cold)/2 }

// fireRoom runs and disarms every armed notice.
func (d *Dispatcher) fireRoom() {
	d.room.mu.Lock()
	fns := d.room.fns
	d.room.fns = nil
	d.room.waiting.Store(false)
	d.room.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}
