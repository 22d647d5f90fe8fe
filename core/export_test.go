package core

// Unvalidated returns a copy of e whose cached "already validated" mark is
// cleared, so that e.Validate() runs every rule again. Envelopes from
// Builder.Build and Record.Envelope carry the mark; tests and benchmarks use
// this to measure and exercise the full validation path.
func Unvalidated(e Envelope) Envelope {
	e.validated = false
	return e
}
