package main

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
)

// The dead commands, which show and select events without their payloads,
// read none: listing, replaying or discarding (dry runs) 16 DEAD events of
// 1 MiB each, or naming 16 DONE ones of 1 MiB each to replay or discard,
// allocates far less than the 16 MiB they hold, where reading them would
// allocate it at least once.
func TestDeadCommandsReadNoPayloads(t *testing.T) {
	path, store := sqliteDB(t)
	ctx := context.Background()
	lease := core.Lease{Owner: "o", Until: time.Now().Add(time.Hour)}
	const n, size = 16, core.MaxPayloadBytes
	big := make([]byte, size)
	var dead, done []string
	for i := range 2 * n {
		id := fmt.Sprintf("big-%02d", i)
		env, err := core.NewEvent("Big").ID(id).PayloadBytes(big).Build()
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Insert(ctx, store.DB(), env, lease); err != nil {
			t.Fatal(err)
		}
		if i >= n {
			done = append(done, id)
			continue
		}
		dead = append(dead, id)
		if ok, err := store.MarkDead(ctx, "o", id, "poison"); err != nil || !ok {
			t.Fatalf("MarkDead %s: %v %v", id, ok, err)
		}
	}
	if got, err := store.MarkDone(ctx, "o", done); err != nil || got != n {
		t.Fatalf("MarkDone: %d %v", got, err)
	}

	for _, c := range []struct {
		args []string
		code int // 1: the DONE events are named as not DEAD
	}{
		{[]string{"dead", "list", "--limit", "1000"}, 0},
		{[]string{"--json", "dead", "list", "--type", "Big"}, 0},
		{[]string{"dead", "replay", "--dry-run", "--all"}, 0},
		{[]string{"dead", "discard", "--dry-run", "--type", "Big"}, 0},
		{append([]string{"--json", "dead", "replay", "--dry-run"}, idFlags(dead)...), 0},
		{append([]string{"dead", "replay", "--dry-run"}, idFlags(done)...), 1},
		{append([]string{"dead", "discard"}, idFlags(done)...), 1},
	} {
		args := append([]string{"--dsn", path}, c.args...)
		cli(t, args...) // warm up: the driver's and the store's first-use allocations
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		r := cli(t, args...)
		runtime.ReadMemStats(&after)
		if r.code != c.code || (c.code == 1 && !strings.Contains(r.stdout, "(not DEAD: DONE)")) {
			t.Fatalf("outboxctl %q: exit %d, want %d\nstderr: %s\nstdout:\n%s", args, r.code, c.code, r.stderr, r.stdout)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > n*size/4 {
			t.Errorf("outboxctl %q allocated %d MiB; the %d payloads it names hold %d MiB", c.args, got>>20, n, n*size>>20)
		}
	}
}

// idFlags returns "--id", id for each of ids.
func idFlags(ids []string) []string {
	var out []string
	for _, id := range ids {
		out = append(out, "--id", id)
	}
	return out
}
