package main

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/testdb"
	"github.com/outbox-go/outbox/internal/testsupport"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
)

// seedOrdered publishes ordered events and kills the first of some keys:
// "acct:1" and "acct:2" are blocked (k1-1 and k2-1 DEAD, block policy,
// k1-2 and k2-2 waiting), "acct:3" skips its DEAD event (k3-1) and went on
// without it (k3-2 NEW), "acct:4" has nothing DEAD (k4-1 NEW).
func seedOrdered(t *testing.T, on *jdbcstore.Store) {
	t.Helper()
	ctx := context.Background()
	// A clock a millisecond further at each reading, so the events die in
	// a known order.
	var tick atomic.Int64
	base := time.Now().Add(-time.Minute)
	store, err := jdbcstore.New(on.DB(), jdbcstore.Config{Table: on.Table(), Now: func() time.Time {
		return base.Add(time.Duration(tick.Add(1)) * time.Millisecond)
	}})
	if err != nil {
		t.Fatal(err)
	}
	lease := core.Lease{Owner: "o", Until: time.Now().Add(time.Hour)}
	publish := func(id, key string, onDead core.DeadPolicy) {
		t.Helper()
		env, err := core.NewEvent("AccountChanged").ID(id).OrderKey(key).OnDead(onDead).PayloadJSONString(`{}`).Build()
		if err != nil {
			t.Fatal(err)
		}
		testsupport.InsertOrdered(t, store, env, lease)
	}
	kill := func(id string) {
		t.Helper()
		if ok, err := store.MarkDead(ctx, "o", id, "ledger rejected "+id); err != nil || !ok {
			t.Fatalf("MarkDead %s: %v %v", id, ok, err)
		}
	}
	publish("k1-1", "acct:1", core.BlockOnDead)
	publish("k2-1", "acct:2", core.BlockOnDead)
	publish("k3-1", "acct:3", core.SkipOnDead)
	publish("k4-1", "acct:4", core.BlockOnDead)
	kill("k2-1") // dies first: blocked longest
	kill("k1-1")
	kill("k3-1")
	publish("k1-2", "acct:1", core.BlockOnDead)
	publish("k2-2", "acct:2", core.BlockOnDead)
	publish("k3-2", "acct:3", core.SkipOnDead)
}

// checkOrderedOps runs stats, dead show and dead discard on a table seeded
// by seedOrdered; with adds the --dsn (and --table) flags.
func checkOrderedOps(t *testing.T, store *jdbcstore.Store, with func(args ...string) []string) {
	out := ok(t, with("stats")...)
	matches(t, out,
		`^blocked ordering keys: 2 \(release one with 'dead replay --id ID' or 'dead discard --id ID'\)$`,
		`^BLOCKED KEY\s+SEQ\s+DEAD EVENT\s+TYPE\s+DIED_AT\s+LAST_ERROR$`,
		`^acct:2\s+1\s+k2-1\s+AccountChanged\s+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\s+ledger rejected k2-1$`,
		`^acct:1\s+1\s+k1-1\s+AccountChanged\s`)
	if strings.Index(out, "acct:2 ") > strings.Index(out, "acct:1 ") {
		t.Errorf("blocked keys are not listed longest blocked first:\n%s", out)
	}
	if strings.Contains(out, "acct:3") {
		t.Errorf("a key under the skip policy is listed as blocked:\n%s", out)
	}
	matches(t, ok(t, with("stats", "--keys", "1")...), `^acct:2\s+1\s+k2-1\s`, `^… and 1 more \(--keys N lists more\)$`)
	var st statsJSON
	decodeJSON(t, ok(t, with("--json", "stats")...), &st)
	if st.BlockedKeys != 2 || len(st.Blocked) != 2 || st.Blocked[0].Key != "acct:2" || st.Blocked[0].EventID != "k2-1" ||
		st.Blocked[0].Seq != 1 || st.Blocked[0].DiedAt == nil || st.Blocked[0].LastError != "ledger rejected k2-1" ||
		st.Blocked[1].Key != "acct:1" {
		t.Errorf("json stats: blocked_keys %d, blocked %+v", st.BlockedKeys, st.Blocked)
	}
	fails(t, exitUsage, with("stats", "--keys", "0")...)

	matches(t, ok(t, with("dead", "show", "k1-1")...), `^order_key\s+acct:1$`, `^order_seq\s+1$`, `^on_dead\s+block$`)
	var r recordJSON
	decodeJSON(t, ok(t, with("--json", "dead", "show", "k3-1")...), &r)
	if r.OrderKey != "acct:3" || r.OrderSeq != 1 || r.OnDead != "skip" {
		t.Errorf("json show of an ordered event: %+v", r)
	}
	sameAsShow(t, with(), ok(t, with("--json", "dead", "list")...))

	// Replay: k3-1's key went on without it (skip policy), so it stays
	// DEAD, named with why, exit 1; by type, the blocked keys' events are
	// replayed (in a dry run here) and k3-1 is named the same way.
	wentOn := "k3-1 (" + jdbcstore.ReasonKeyWentOn + ")"
	res := cli(t, with("dead", "replay", "--id", "k3-1")...)
	if res.code != exitFailed || res.stderr != "outboxctl: dead replay: 1 of the given ids was not replayed: "+wentOn+"; no other event replayed\n" {
		t.Errorf("replay of a skipped event whose key went on: exit %d, stderr %q", res.code, res.stderr)
	}
	matches(t, res.stdout, `^replayed 0 events \(1 matched\)$`, `^not replayed:$`, `^  k3-1 \(its key went on without it under the skip policy; `)
	if r, err := store.Get(context.Background(), "k3-1"); err != nil || r.Status != core.StatusDead {
		t.Fatalf("k3-1 after the replay: %v, %v; want DEAD", r.Status, err)
	}
	var rj replayJSON
	res = cli(t, with("--json", "dead", "replay", "--type", "AccountChanged", "--dry-run")...)
	decodeJSON(t, res.stdout, &rj)
	if res.code != exitFailed || rj.Matched != 3 || !slices.Equal(rj.IDs, []string{"k1-1", "k2-1"}) ||
		!slices.Equal(rj.NotReplayed, []notReplayed{{ID: "k3-1", Reason: jdbcstore.ReasonKeyWentOn, Status: "DEAD"}}) ||
		res.stderr != "outboxctl: dead replay: 1 of the selected events would not be replayed: "+wentOn+"; the 2 other events would be replayed\n" {
		t.Errorf("dry replay by type: exit %d, %+v, stderr %q", res.code, rj, res.stderr)
	}

	// Discard: a dry run changes nothing; an --id not DEAD is named, exit 1.
	res = cli(t, with("dead", "discard", "--id", "k1-1", "--id", "k1-2", "--dry-run")...)
	if res.code != exitFailed || res.stderr != "outboxctl: dead discard: 1 of the given ids would not be discarded: k1-2 (not DEAD: NEW); the 1 other event would be discarded\n" {
		t.Errorf("dry run: exit %d, stderr %q", res.code, res.stderr)
	}
	matches(t, res.stdout, `^would discard 1 event \(dry run: nothing deleted\)$`, `^  k1-1$`, `^would not discard:$`, `^  k1-2 \(not DEAD: NEW\)$`)
	if _, err := store.Get(context.Background(), "k1-1"); err != nil {
		t.Fatalf("a dry run deleted k1-1: %v", err)
	}
	var dj discardJSON
	decodeJSON(t, ok(t, with("--json", "dead", "discard", "--id", "k1-1")...), &dj)
	if dj.DryRun || dj.Matched != 1 || dj.Discarded != 1 || !slices.Equal(dj.IDs, []string{"k1-1"}) || dj.NotDiscarded == nil || len(dj.NotDiscarded) != 0 {
		t.Errorf("json discard: %+v", dj)
	}
	if _, err := store.Get(context.Background(), "k1-1"); err == nil {
		t.Error("k1-1 is still there after the discard")
	}
	// acct:1 is released: one key left, and its waiting event is claimable.
	matches(t, ok(t, with("stats")...), `^blocked ordering keys: 1 `, `^acct:2\s+1\s+k2-1\s`)
	recs, err := store.ClaimDue(context.Background(), core.ClaimRequest{Owner: "ops", Now: time.Now().Add(time.Hour), LeaseUntil: time.Now().Add(2 * time.Hour), Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var claimed []string
	for _, rec := range recs {
		claimed = append(claimed, rec.ID)
	}
	slices.Sort(claimed)
	if !slices.Equal(claimed, []string{"k1-2", "k3-2", "k4-1"}) {
		t.Errorf("claimable after the discard: %v, want k1-2, k3-2 and k4-1 (k2-2 waits behind k2-1)", claimed)
	}
	// By type, table output; then nothing is blocked.
	matches(t, ok(t, with("dead", "discard", "--type", "AccountChanged", "--batch", "1")...), `^discarded 2 events$`, `^  k2-1$`, `^  k3-1$`)
	matches(t, ok(t, with("stats")...), `^no blocked ordering keys$`, `^no DEAD events$`)
	var st2 statsJSON
	decodeJSON(t, ok(t, with("--json", "stats")...), &st2)
	if st2.BlockedKeys != 0 || st2.Blocked == nil || len(st2.Blocked) != 0 {
		t.Errorf("json stats with nothing blocked: %d %v", st2.BlockedKeys, st2.Blocked)
	}
	// Bad usage.
	for _, args := range [][]string{
		{"dead", "discard"},
		{"dead", "discard", "--all", "--type", "X"},
		{"dead", "discard", "--id", "x", "--batch", "0"},
	} {
		fails(t, exitUsage, with(args...)...)
	}
}

func TestOrderedOpsSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ordered.db")
	db, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	store, err := jdbcstore.New(db, jdbcstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.ApplySchema(context.Background()); err != nil {
		t.Fatal(err)
	}
	seedOrdered(t, store)
	checkOrderedOps(t, store, func(args ...string) []string { return append([]string{"--dsn", path}, args...) })
}

func TestOrderedOpsMySQL(t *testing.T) {
	cfg := testdb.MySQLConfig(t)
	db := testdb.OpenMySQL(t, cfg)
	const table = "ord_outbox"
	store, err := jdbcstore.New(db, jdbcstore.Config{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.ApplySchema(context.Background()); err != nil {
		t.Fatal(err)
	}
	seedOrdered(t, store)
	checkOrderedOps(t, store, func(args ...string) []string {
		return append([]string{"--dsn", cfg.FormatDSN(), "--table", table}, args...)
	})
}

func TestOrderedOpsPostgres(t *testing.T) {
	dsn := testdb.PostgresSchemaDSN(t)
	db := testdb.OpenPostgres(t, dsn)
	const table = "ord_outbox"
	store, err := jdbcstore.New(db, jdbcstore.Config{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.ApplySchema(context.Background()); err != nil {
		t.Fatal(err)
	}
	seedOrdered(t, store)
	checkOrderedOps(t, store, func(args ...string) []string { return append([]string{"--dsn", dsn, "--table", table}, args...) })
}
