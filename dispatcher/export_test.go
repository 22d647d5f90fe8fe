package dispatcher

// Closing reports whether Close has been called on d (test hook: lets a
// test wait until Close has stopped intake before it releases a listener).
func Closing(d *Dispatcher) bool { return d.closed.Load() }
