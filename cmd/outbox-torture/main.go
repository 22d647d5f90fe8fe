// Command outbox-torture checks the outbox's delivery guarantees across
// crashes: a child process publishes continuously while its dispatcher and
// poller run, and is SIGKILLed at random moments and restarted, again and
// again; a last child drains what is left, and the database is checked.
//
//	go run ./cmd/outbox-torture -db sqlite -cycles 20
//	go run ./cmd/outbox-torture -db mysql -dsn 'root@tcp(127.0.0.1:3306)/test?parseTime=true' -cycles 20
//	go run ./cmd/outbox-torture -db postgres -dsn 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable' -cycles 20
//
// Each business transaction of a child inserts the event's id into a ledger
// table and publishes the event; about one in ten is rolled back on purpose
// after both writes. The listener records every invocation in a deliveries
// table. At the end every ledger id must have been delivered (lost = 0), no
// id may have been delivered without a ledger row and an outbox row
// (phantom = 0), and every event must be DONE. Duplicates are allowed (at
// least once) and counted. The result is one line on stdout:
//
//	torture: db=sqlite cycles=20 events=… lost=0 phantom=0 duplicates=… …
//
// With -ordered the events are published ordered per key, spread over
// -keys keys, and the line adds order_violations (deliveries of a key's
// event n+1 before the first successful delivery of its event n) and
// seq_mismatch (outbox positions that differ from the commit positions the
// publishers recorded); both must be 0. -procs runs several children at
// once on the database:
//
//	go run ./cmd/outbox-torture -db postgres -ordered -procs 3 -cycles 60
//
// With -relay natsjs every child relays every event to a JetStream stream
// made for the run (through relay/natsjs) before it records the delivery;
// the parent reads the stream back at the end and the line adds
// stream_lost (committed events not in the stream), stream_duplicates
// (events stored twice despite their Nats-Msg-Id) and stream_phantom
// (messages of no committed event), all of which must be 0:
//
//	go run ./cmd/outbox-torture -db sqlite -relay natsjs -cycles 20
//
// The exit status is 1 when an event was lost, phantom, not DONE or DEAD,
// delivered out of order under -ordered, missing or stored twice in the
// stream under -relay, or when a child failed; 2 on bad flags. Run it
// with -h for the flags.
//
// The same binary is the child: the parent re-executes itself with the
// environment variable OUTBOX_TORTURE_CHILD set (see child.go).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if spec, ok := os.LookupEnv(envChild); ok {
		os.Exit(childMain(spec, os.Stdout, os.Stderr))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal the run stops and cleans up (killing its
	// child, dropping its database); a second signal kills the process.
	context.AfterFunc(ctx, stop)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
