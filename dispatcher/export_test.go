package dispatcher

// Closing reports whether Close has been called on d (test hook: lets a
// test wait until Close has stopped intake before it releases a listener).
func Closing(d *Dispatcher) bool { return d.closed.Load() }

// LiveWorkers returns how many worker goroutines are running (test hook:
// lets a test check that the pool keeps its size).
func LiveWorkers(d *Dispatcher) int { return int(d.workers.Load()) }
