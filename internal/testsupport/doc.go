// Package testsupport holds the helpers the library's own tests share:
// waiting on a condition with a deadline, receiving from a channel with a
// deadline, a concurrency-safe log capture and a settable clock. It is for
// tests only; nothing in the library's runtime code imports it.
package testsupport
