package dispatcher

import (
	"sync"
	"sync/atomic"
)

// roomNotices are the one-shot notices pollers arm when they find the
// cold queue full (handoff.RoomNotifier): they run once the workers have
// drained it to half its capacity and MaxHeldBytes has room for an event
// of the usual size, so a poller draining a backlog claims its next batch
// while the workers still have half a queue to work on, never waiting a
// fixed pause with idle workers.
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
	if d.roomNow() {
		d.fireRoom()
	}
}

// checkRoom is called by a worker that took an event from the cold
// queue, and once an event's bytes left the budget (drop): it runs the
// armed notices once there is room (roomNow). One atomic load when
// nothing is armed.
func (d *Dispatcher) checkRoom() {
	if d.room.waiting.Load() && d.roomNow() {
		d.fireRoom()
	}
}

// roomNow reports whether the cold queue holds at most half its capacity
// and MaxHeldBytes has room for one more event of the usual size: a
// poller woken while the budget is used up would find no room, arm its
// notice again, and be woken again at once.
func (d *Dispatcher) roomNow() bool { return d.coldHalfEmpty() && d.coldBudgetRoom() != 0 }

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
