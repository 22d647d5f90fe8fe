package rabbitmq

// TakeSlots occupies n of r's MaxInFlight publish slots, as publishes
// awaiting their confirm would, until release is called.
func TakeSlots(r *Relay, n int) (release func()) {
	for range n {
		r.sem <- struct{}{}
	}
	return func() {
		for range n {
			<-r.sem
		}
	}
}
