package writegate

// Pools returns how many pools have a gate.
func Pools() int {
	n := 0
	gates.Range(func(any, any) bool { n++; return true })
	return n
}
