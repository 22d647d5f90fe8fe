package relay

// SweepArmed reports whether f's timer that forgets incidents is armed.
func SweepArmed(f *Full) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sweep != nil
}
