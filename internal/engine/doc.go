// Package engine is the claim → work → settle machinery shared by the
// outbox and the inbox. The outbox splits it in two parts (package poller
// claims due rows, package dispatcher works on them and settles them, next
// to the hot path that feeds the same workers from commits); the inbox's
// work-queue dispatcher does all three. Both are built from these pieces:
//
//   - [Runner]: the life cycle of a background loop (Start, Close with one
//     meaning everywhere) and its pacing (a wait between cycles that Wake
//     cuts short);
//   - [Set] and [Rotation]: the stores (databases, tenants) a loop serves,
//     added and removed while it runs, and the order its claims visit them;
//   - [Counter]: the work a store has in progress, so that removing it
//     waits for that work (or interrupts it) before the database is closed;
//   - [Guard]: the call of user code (listener, handler) that turns a panic
//     into an error and notices runtime.Goexit;
//   - [Decide]: what a failed attempt becomes: a retry after the policy's
//     delay, or dead after the last attempt.
package engine
