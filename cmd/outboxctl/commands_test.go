package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/jdbcstore"
)

func TestStats(t *testing.T) {
	path, _ := sqliteDB(t)
	out := ok(t, "--dsn", path, "stats")
	matches(t, out,
		`^table outbox_event on sqlite `+regexp.QuoteMeta(path)+`$`,
		`^STATUS\s+CODE\s+EVENTS$`,
		`^NEW\s+0\s+2$`, `^DONE\s+1\s+3$`, `^RETRY\s+2\s+1$`, `^DEAD\s+3\s+5$`, `^total\s+11$`,
		`^lag: \S+ \(oldest pending event created \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ; 3 pending\)$`,
		`^DEAD BY TYPE\s+EVENTS$`, `^PaymentRequested\s+4$`, `^Email\s+1$`,
	)
	if strings.Index(out, "PaymentRequested  ") > strings.Index(out, "Email  ") {
		t.Errorf("DEAD types are not sorted by count:\n%s", out)
	}

	var st statsJSON
	decodeJSON(t, ok(t, "--dsn", path, "--json", "stats"), &st)
	want := statusCounts{New: 2, Done: 3, Retry: 1, Dead: 5}
	if st.Counts != want || st.Total != 11 || st.Pending != 3 {
		t.Errorf("counts %+v total %d pending %d, want %+v 11 3", st.Counts, st.Total, st.Pending, want)
	}
	if st.Dialect != "sqlite" || st.Table != jdbcstore.DefaultTable || st.Database != path {
		t.Errorf("dialect %q table %q database %q", st.Dialect, st.Table, st.Database)
	}
	if st.OldestPending == nil || st.LagSeconds <= 0 || st.LagSeconds > 60 {
		t.Errorf("oldest pending %v, lag %vs", st.OldestPending, st.LagSeconds)
	}
	if len(st.DeadByType) != 2 || st.DeadByType["PaymentRequested"] != 4 || st.DeadByType["Email"] != 1 {
		t.Errorf("dead by type %v", st.DeadByType)
	}
}

// idsIn returns the event ids (x-…) at the start of the table lines of out.
func idsIn(out string) []string {
	var ids []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "x-") {
			ids = append(ids, strings.Fields(line)[0])
		}
	}
	return ids
}

func TestDeadList(t *testing.T) {
	path, _ := sqliteDB(t)
	dsn := []string{"--dsn", path}
	list := func(args ...string) string {
		return ok(t, append(append(slices.Clone(dsn), "dead", "list"), args...)...)
	}

	out := list()
	matches(t, out,
		`^EVENT_ID\s+TYPE\s+TENANT\s+ATTEMPTS\s+DIED_AT\s+LAST_ERROR$`,
		`^x-1\s+PaymentRequested\s+acme\s+2\s+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\s+payment provider unavailable$`,
		`^x-4\s+Email\s+globex\s+2\s`,
	)
	if got := idsIn(out); !slices.Equal(got, deadIDs) {
		t.Errorf("ids %v, want %v", got, deadIDs)
	}
	if strings.Contains(out, "next:") {
		t.Errorf("a partial page gives a cursor:\n%s", out)
	}
	// The long, two-line error is cut to one short line.
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "x-5") {
			cut := truncate(strings.ReplaceAll(longError, "\n", `\n`), listErrorWidth)
			if !strings.HasSuffix(line, cut) || !strings.HasSuffix(cut, "…") {
				t.Errorf("x-5 line %q does not end with the cut error %q", line, cut)
			}
		}
	}
	if strings.Contains(out, "second line") {
		t.Errorf("the table shows the error in full:\n%s", out)
	}

	// Filters.
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--type", "PaymentRequested"}, []string{"x-1", "x-2", "x-3", "x-5"}},
		{[]string{"--type", "Email"}, []string{"x-4"}},
		{[]string{"--tenant", "globex"}, []string{"x-4", "x-5"}},
		{[]string{"--tenant", "globex", "--type", "PaymentRequested"}, []string{"x-5"}},
		{[]string{"--since", "1h"}, deadIDs},
		{[]string{"--since", time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)}, deadIDs},
		{[]string{"--until", "1h"}, nil},
		{[]string{"--until", "2000-01-01"}, nil},
		{[]string{"--until", "2000-01-01T10:00"}, nil},
		{[]string{"--since", "1969-07-20 10:00"}, deadIDs},
		{[]string{"--type", "NoSuchType"}, nil},
	} {
		out := list(tc.args...)
		if got := idsIn(out); !slices.Equal(got, tc.want) {
			t.Errorf("dead list %q: ids %v, want %v\n%s", tc.args, got, tc.want, out)
		}
		if tc.want == nil && strings.TrimSpace(out) != "no DEAD events match" {
			t.Errorf("dead list %q: %q", tc.args, out)
		}
	}

	// Paging: full pages give the cursor, which gives the next page.
	var seen []string
	after := ""
	for page := 0; ; page++ {
		args := []string{"--limit", "2"}
		if after != "" {
			args = append(args, "--after", after)
		}
		out := list(args...)
		ids := idsIn(out)
		seen = append(seen, ids...)
		m := regexp.MustCompile(`(?m)^next: --after (\S+)$`).FindStringSubmatch(out)
		if len(ids) < 2 {
			if m != nil {
				t.Errorf("page %d is not full but gives a cursor:\n%s", page, out)
			}
			break
		}
		if m == nil || m[1] != ids[len(ids)-1] {
			t.Fatalf("page %d: no cursor for the last id %s:\n%s", page, ids[len(ids)-1], out)
		}
		after = m[1]
	}
	if !slices.Equal(seen, deadIDs) {
		t.Errorf("pages gave %v, want %v", seen, deadIDs)
	}

	// --json: an array, the error in full, no payload.
	var recs []recordJSON
	decodeJSON(t, list("--json", "--tenant", "globex"), &recs)
	if len(recs) != 2 || recs[0].ID != "x-4" || recs[1].ID != "x-5" {
		t.Fatalf("json list: %+v", recs)
	}
	r := recs[1]
	if r.LastError != longError+"\nsecond line" || r.Status != "DEAD" || r.Type != "PaymentRequested" ||
		r.TenantID != "globex" || r.Attempts != 2 || r.CreatedAt == nil {
		t.Errorf("json record: %+v", r)
	}
	// When it died is died_at, as DIED_AT in the table; no done_at.
	var raw []map[string]any
	decodeJSON(t, list("--json", "--tenant", "globex"), &raw)
	for _, m := range raw {
		if died, _ := m["died_at"].(string); !regexp.MustCompile(`^\d{4}-\d\d-\d\dT`).MatchString(died) {
			t.Errorf("json list died_at = %v, want a time: %v", m["died_at"], m)
		}
		if _, has := m["done_at"]; has {
			t.Errorf("json list of DEAD events has done_at: %v", m)
		}
	}
	if r.Payload != nil || r.PayloadBase64 != nil || r.Headers != nil || r.PayloadSize != nil {
		t.Errorf("json list carries payloads, their sizes or headers: %+v", r)
	}
	// Every other field as dead show --json has it.
	sameAsShow(t, dsn, list("--json"))
	decodeJSON(t, list("--json", "--type", "NoSuchType"), &recs)
	if len(recs) != 0 {
		t.Errorf("empty json list: %+v", recs)
	}
	if out := list("--json", "--type", "NoSuchType"); strings.TrimSpace(out) != "[]" {
		t.Errorf("empty json list prints %q, want []", out)
	}
}

func TestDeadShow(t *testing.T) {
	path, _ := sqliteDB(t)
	out := ok(t, "--dsn", path, "dead", "show", "x-5")
	matches(t, out,
		`^event_id\s+x-5$`, `^status\s+DEAD$`, `^event_type\s+PaymentRequested$`,
		`^aggregate_type\s+Payment$`, `^aggregate_id\s+p-x-5$`, `^tenant_id\s+globex$`, `^attempts\s+2$`,
		`^died_at\s+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$`,
		`^headers\s+source=checkout$`, `^\s+trace=t-x-5$`,
		`^payload_kind\s+json$`,
		`^payload \(JSON\):\n\{"amount":42,"id":"x-5"\}$`,
		`^last_error:\n`+regexp.QuoteMeta(longError)+`\nsecond line$`,
	)

	out = ok(t, "--dsn", path, "dead", "show", "x-4")
	matches(t, out, `^payload_kind\s+bytes$`, `^headers\s+-$`,
		`^payload \(base64\):\n`+regexp.QuoteMeta(base64.StdEncoding.EncodeToString(bytesValue))+`$`)

	// Any status is shown.
	matches(t, ok(t, "--dsn", path, "dead", "show", "d-1"), `^status\s+DONE$`, `^done_at\s+\d`, `^last_error: -$`)
	// In JSON too, a DEAD event has died_at, any other done_at (null while pending).
	for id, want := range map[string]string{"x-5": `"died_at": "2`, "d-1": `"done_at": "2`, "n-1": `"done_at": null`} {
		out := ok(t, "--dsn", path, "--json", "dead", "show", id)
		other := `"died_at"`
		if strings.Contains(want, "died_at") {
			other = `"done_at"`
		}
		if !strings.Contains(out, want) || strings.Contains(out, other) {
			t.Errorf("json show %s: want %s and no %s:\n%s", id, want, other, out)
		}
	}

	var r recordJSON
	decodeJSON(t, ok(t, "--dsn", path, "--json", "dead", "show", "x-5"), &r)
	var payload map[string]any
	if err := json.Unmarshal(r.Payload, &payload); err != nil || payload["id"] != "x-5" {
		t.Errorf("json payload %s: %v", r.Payload, err)
	}
	if r.Headers["trace"] != "t-x-5" || r.Headers["source"] != "checkout" || r.LastError != longError+"\nsecond line" ||
		r.PayloadKind != "json" || r.PayloadBase64 != nil {
		t.Errorf("json show: %+v", r)
	}
	decodeJSON(t, ok(t, "--dsn", path, "--json", "dead", "show", "x-4"), &r)
	if r.PayloadBase64 == nil || *r.PayloadBase64 != base64.StdEncoding.EncodeToString(bytesValue) || r.PayloadKind != "bytes" {
		t.Errorf("json bytes payload: %+v", r)
	}

	line := fails(t, exitFailed, "--dsn", path, "dead", "show", "no-such-id")
	if line != `outboxctl: dead show: event "no-such-id" not found in table outbox_event` {
		t.Errorf("not found: %q", line)
	}
}

func TestDeadReplay(t *testing.T) {
	path, store := sqliteDB(t)
	payments := []string{"x-1", "x-2", "x-3", "x-5"}

	out := ok(t, "--dsn", path, "dead", "replay", "--type", "PaymentRequested", "--dry-run")
	matches(t, out, `^would replay 4 events \(dry run: nothing changed\)$`, `^  x-1$`, `^  x-5$`)
	wantCounts(t, store, 2, 3, 1, 5)

	var res replayJSON
	decodeJSON(t, ok(t, "--dsn", path, "--json", "dead", "replay", "--type", "PaymentRequested", "--dry-run"), &res)
	if !res.DryRun || res.Matched != 4 || res.Replayed != 0 || !slices.Equal(res.IDs, payments) {
		t.Errorf("json dry run: %+v", res)
	}
	wantCounts(t, store, 2, 3, 1, 5)

	out = ok(t, "--dsn", path, "dead", "replay", "--type", "PaymentRequested", "--batch", "3")
	matches(t, out, `^replayed 4 events$`)
	wantCounts(t, store, 6, 3, 1, 1)
	for _, id := range payments {
		rec, err := store.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Status != core.StatusNew || rec.Attempts != 0 || rec.LastError != "" || rec.LockedBy != "" {
			t.Errorf("%s after replay: %v attempts %d error %q lease %q", id, rec.Status, rec.Attempts, rec.LastError, rec.LockedBy)
		}
	}
	// Nothing left of that type; --id picks exact events.
	matches(t, ok(t, "--dsn", path, "dead", "replay", "--type", "PaymentRequested"), `^replayed 0 events$`)
	// x-1 is NEW by now: named, exit 1, x-4 replayed all the same.
	r := cli(t, "--dsn", path, "--json", "dead", "replay", "--id", "x-4", "--id", "x-1")
	decodeJSON(t, r.stdout, &res)
	if r.code != exitFailed || res.DryRun || res.Matched != 1 || res.Replayed != 1 || !slices.Equal(res.IDs, []string{"x-4"}) ||
		len(res.NotReplayed) != 1 || res.NotReplayed[0].ID != "x-1" {
		t.Errorf("json replay --id: exit %d, %+v", r.code, res)
	}
	wantCounts(t, store, 7, 3, 1, 0)
}

// Any number of --id works, more than a statement of any database takes.
func TestDeadReplayAndDiscardManyIDs(t *testing.T) {
	path, store := sqliteDB(t)
	var args []string
	for i := range 70000 {
		args = append(args, "--id", deadIDs[i%len(deadIDs)])
	}
	var res replayJSON
	r := cli(t, append([]string{"--dsn", path, "--json", "dead", "replay", "--dry-run"}, args...)...)
	decodeJSON(t, r.stdout, &res)
	if r.code != 0 || res.Matched != len(deadIDs) || !slices.Equal(res.IDs, deadIDs) {
		t.Fatalf("replay --dry-run: exit %d, %+v, stderr %q", r.code, res, r.stderr)
	}
	r = cli(t, append([]string{"--dsn", path, "--json", "dead", "discard"}, args...)...)
	var disc discardJSON
	decodeJSON(t, r.stdout, &disc)
	if r.code != 0 || disc.Discarded != len(deadIDs) {
		t.Fatalf("discard: exit %d, %+v, stderr %q", r.code, disc, r.stderr)
	}
	wantCounts(t, store, 2, 3, 1, 0)
}

// An --id that is not replayed is named with the reason, and the command
// fails (exit 1) though it replays the others; a dry run says the same.
func TestDeadReplayUnknownIDs(t *testing.T) {
	path, store := sqliteDB(t)
	args := []string{"--dsn", path, "dead", "replay", "--id", "NOPE", "--id", "x-1", "--id", "d-1", "--id", "n-1"}
	wantLine := func(r result, verb, done string) {
		t.Helper()
		want := "outboxctl: dead replay: 3 of the given ids " + verb + ": NOPE (not found), d-1 (not DEAD: DONE), n-1 (not DEAD: NEW); the " + done + "\n"
		if r.code != exitFailed || r.stderr != want {
			t.Errorf("exit %d, stderr %q; want exit 1, %q", r.code, r.stderr, want)
		}
	}

	r := cli(t, append(args, "--dry-run")...)
	wantLine(r, "would not be replayed", "1 other event would be replayed")
	matches(t, r.stdout, `^would replay 1 event \(dry run`, `^  x-1$`, `^would not replay:$`,
		`^  NOPE \(not found\)$`, `^  d-1 \(not DEAD: DONE\)$`, `^  n-1 \(not DEAD: NEW\)$`)
	wantCounts(t, store, 2, 3, 1, 5)

	r = cli(t, args...)
	wantLine(r, "were not replayed", "1 other event replayed")
	matches(t, r.stdout, `^replayed 1 event$`, `^  x-1$`, `^not replayed:$`, `^  NOPE \(not found\)$`)
	wantCounts(t, store, 3, 3, 1, 4) // x-1 replayed all the same

	// Only unknown ids: nothing replayed, still a failure; --json names them.
	r = cli(t, "--dsn", path, "--json", "dead", "replay", "--id", "NOPE", "--id", "x-1")
	var res replayJSON
	decodeJSON(t, r.stdout, &res)
	want := []notReplayed{{ID: "NOPE", Reason: "not found"}, {ID: "x-1", Reason: "not DEAD", Status: "NEW"}}
	if r.code != exitFailed || res.Replayed != 0 || !slices.Equal(res.NotReplayed, want) {
		t.Errorf("json: exit %d, %+v, stderr %q", r.code, res, r.stderr)
	}
	if r.stderr != "outboxctl: dead replay: 2 of the given ids were not replayed: NOPE (not found), x-1 (not DEAD: NEW); no other event replayed\n" {
		t.Errorf("json: stderr %q", r.stderr)
	}
	// A DEAD id the other selectors leave out.
	r = cli(t, "--dsn", path, "dead", "replay", "--id", "x-4", "--type", "PaymentRequested", "--dry-run")
	if r.code != exitFailed || !strings.Contains(r.stderr, "x-4 (does not match the other selectors)") {
		t.Errorf("--id with --type: exit %d, stderr %q", r.code, r.stderr)
	}
	// Every id replayed: success, and not_replayed is an empty list.
	decodeJSON(t, ok(t, "--dsn", path, "--json", "dead", "replay", "--id", "x-2"), &res)
	if res.Replayed != 1 || res.NotReplayed == nil || len(res.NotReplayed) != 0 {
		t.Errorf("json replay of a DEAD id: %+v", res)
	}
}

// A selected event that stops being DEAD between the read of its batch and
// the write (another operator, the purge) is named as not replayed or not
// discarded, with why, and the command fails (exit 1). A trigger that
// deletes the row as the write reaches it stands in for the other writer.
func TestDeadChangedMeanwhile(t *testing.T) {
	path, store := sqliteDB(t)
	meanwhile := func(op, id string) {
		t.Helper()
		trg := "CREATE TRIGGER gone_" + strings.ReplaceAll(id, "-", "_") + " BEFORE " + op + " ON outbox_event WHEN OLD.event_id = '" + id +
			"' BEGIN DELETE FROM outbox_event WHERE event_id = '" + id + "'; END"
		if _, err := store.DB().Exec(trg); err != nil {
			t.Fatal(err)
		}
	}
	gone := "(" + jdbcstore.ReasonNoLongerDead + ")"

	meanwhile("UPDATE", "x-2")
	r := cli(t, "--dsn", path, "dead", "replay", "--id", "x-1", "--id", "x-2")
	if r.code != exitFailed || r.stderr != "outboxctl: dead replay: 1 of the given ids was not replayed: x-2 "+gone+"; the 1 other event replayed\n" {
		t.Errorf("replay: exit %d, stderr %q", r.code, r.stderr)
	}
	matches(t, r.stdout, `^replayed 1 event \(2 matched\)$`, `^  x-1$`, `^not replayed:$`, `^  x-2 \(stopped being DEAD meanwhile `)
	wantCounts(t, store, 3, 3, 1, 3) // x-1 replayed, x-2 gone

	meanwhile("DELETE", "x-4")
	var res discardJSON
	r = cli(t, "--dsn", path, "--json", "dead", "discard", "--type", "Email")
	decodeJSON(t, r.stdout, &res)
	if r.code != exitFailed || res.Matched != 1 || res.Discarded != 0 || len(res.IDs) != 0 ||
		!slices.Equal(res.NotDiscarded, []notReplayed{{ID: "x-4", Reason: jdbcstore.ReasonNoLongerDead}}) ||
		r.stderr != "outboxctl: dead discard: 1 of the selected events was not discarded: x-4 "+gone+"; no other event discarded\n" {
		t.Errorf("discard: exit %d, %+v, stderr %q", r.code, res, r.stderr)
	}
	wantCounts(t, store, 3, 3, 1, 2)
}

// More than 20 ids: the table lists 20 and says how many more.
func TestDeadReplayManyIDs(t *testing.T) {
	path, store := sqliteDB(t)
	ctx := context.Background()
	for i := range 25 {
		env, err := core.NewEvent("Bulk").PayloadJSONString(`{}`).Build()
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Insert(ctx, store.DB(), env, core.Lease{Owner: "o", Until: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if ok, err := store.MarkDead(ctx, "o", env.ID(), "bulk failure"); err != nil || !ok {
			t.Fatalf("MarkDead %d: %v %v", i, ok, err)
		}
	}
	out := ok(t, "--dsn", path, "dead", "replay", "--all", "--dry-run")
	matches(t, out, `^would replay 30 events`, `^  … and 10 more \(--json lists them all\)$`)
	if n := strings.Count(out, "\n  "); n != replayShownIDs+1 {
		t.Errorf("%d indented lines, want %d:\n%s", n, replayShownIDs+1, out)
	}
	matches(t, ok(t, "--dsn", path, "dead", "replay", "--all", "--batch", "7"), `^replayed 30 events$`)
	wantCounts(t, store, 32, 3, 1, 0)
}

func TestPurge(t *testing.T) {
	path, store := sqliteDB(t)
	time.Sleep(5 * time.Millisecond) // every finished row is now older than 1ms

	// Long retentions remove nothing.
	out := ok(t, "--dsn", path, "purge", "--done-older-than", "7d", "--dead-older-than", "30d")
	matches(t, out, `^removed 0 DONE events older than 7d$`, `^removed 0 DEAD events older than 30d$`)
	wantCounts(t, store, 2, 3, 1, 5)

	out = ok(t, "--dsn", path, "purge", "--done-older-than", "1ms", "--dead-older-than", "1ns", "--dry-run")
	matches(t, out, `^would remove 3 DONE events older than 1ms$`, `^would remove 5 DEAD events older than 1ns$`,
		`^dry run: nothing deleted$`)
	wantCounts(t, store, 2, 3, 1, 5)

	// One status only; the other is kept.
	out = ok(t, "--dsn", path, "purge", "--done-older-than", "1ms", "--batch", "2", "--pause-factor", "0.5", "--max-rate", "1e6")
	matches(t, out, `^removed 3 DONE events older than 1ms$`, `^kept every DEAD event \(no --dead-older-than\)$`)
	wantCounts(t, store, 2, 0, 1, 5)

	var res purgeJSON
	decodeJSON(t, ok(t, "--dsn", path, "--json", "purge", "--dead-older-than", "1ns", "--batch", "2"), &res)
	if res.DryRun || res.Done != 0 || res.Dead != 5 || res.DeadOlderThan != 1e-9 || res.DoneOlderThan != 0 || res.Batches != 3 {
		t.Errorf("json purge: %+v", res)
	}
	// NEW and RETRY are never touched.
	wantCounts(t, store, 2, 0, 1, 0)
	for _, id := range append(slices.Clone(newIDs), retryIDs...) {
		if _, err := store.Get(context.Background(), id); err != nil {
			t.Errorf("%s: %v", id, err)
		}
	}
}

func TestSchemaPrint(t *testing.T) {
	out := ok(t, "schema", "print", "--dialect", "sqlite")
	matches(t, out, `^CREATE TABLE IF NOT EXISTS "outbox_event" \($`, `^CREATE INDEX IF NOT EXISTS "outbox_event_pending_idx"$`)
	out = ok(t, "--table", "shop_outbox", "schema", "print", "--dialect", "mysql")
	matches(t, out, "^CREATE TABLE IF NOT EXISTS `shop_outbox` \\($", `ENGINE=InnoDB`)
	if strings.Contains(out, "outbox_event") {
		t.Errorf("--table ignored:\n%s", out)
	}
	// The dialect follows --dsn; nothing connects (the server does not exist,
	// the file neither).
	if got := ok(t, "--dsn", "app:pw@tcp(127.0.0.1:1)/shop", "schema", "print"); got != ok(t, "schema", "print", "--dialect", "mysql") {
		t.Errorf("schema print with a MySQL DSN is not the mysql schema:\n%s", got)
	}
	if got := ok(t, "--dsn", "postgres://app:pw@127.0.0.1:1/shop", "schema", "print"); got != ok(t, "schema", "print", "--dialect", "postgres") {
		t.Errorf("schema print with a PostgreSQL URL is not the postgres schema:\n%s", got)
	}
	out = ok(t, "--table", "shop_outbox", "schema", "print", "--dialect", "postgres")
	matches(t, out, `^CREATE TABLE IF NOT EXISTS "shop_outbox" \($`, `JSONB`, `^CREATE INDEX IF NOT EXISTS "shop_outbox_pending_idx"$`)
	if fails(t, exitUsage, "--dsn", "postgres://h/db", "schema", "print", "--dialect", "mysql") == "" {
		t.Error("--dialect mysql with a PostgreSQL URL: no error")
	}
	if got := ok(t, "--dsn", "/nonexistent/app.db", "schema", "print"); got != ok(t, "schema", "print", "--dialect", "SQLite") {
		t.Errorf("schema print with a SQLite path is not the sqlite schema:\n%s", got)
	}
	// Neither --dialect nor --dsn: the sqlite schema, and a note saying so.
	r := cli(t, "schema", "print")
	if r.code != exitOK || r.stdout != ok(t, "schema", "print", "--dialect", "sqlite") ||
		r.stderr != "outboxctl: schema print: no --dialect or --dsn: printed the sqlite schema (--dialect mysql for MySQL/MariaDB, postgres for PostgreSQL)\n" {
		t.Errorf("schema print alone: exit %d, stderr %q, stdout:\n%s", r.code, r.stderr, r.stdout)
	}
	// A failure is one line on stderr, without the note.
	if line := fails(t, exitUsage, "--table", "bad-name", "schema", "print"); !strings.Contains(line, `Table "bad-name" must match`) {
		t.Errorf("schema print with a bad --table: %q", line)
	}
	var sj schemaJSON
	decodeJSON(t, ok(t, "--json", "schema", "print", "--dialect", "mysql"), &sj)
	if sj.Dialect != "mysql" || sj.Table != "outbox_event" || !strings.Contains(sj.SQL, "CREATE TABLE IF NOT EXISTS `outbox_event`") {
		t.Errorf("json schema: %+v", sj)
	}
}

func TestHelpers(t *testing.T) {
	for in, want := range map[string]string{
		"root:pw@tcp(127.0.0.1:3306)/db":                             "root:***@tcp(127.0.0.1:3306)/db",
		"mysql://u:p@ss:w/rd@tcp(h:1)/db?x=1":                        "mysql://u:***@tcp(h:1)/db?x=1",
		"root@tcp(127.0.0.1:3306)/db":                                "root@tcp(127.0.0.1:3306)/db",
		"u:@tcp(h)/db":                                               "u:@tcp(h)/db",
		"/var/lib/app:1@x/outbox.db":                                 "/var/lib/app:1@x/outbox.db",
		"app.db":                                                     "app.db",
		"app:secret@localhost/shop":                                  "app:***@localhost/shop",
		"tcp(127.0.0.1:3306)/db":                                     "tcp(127.0.0.1:3306)/db",
		"user:pa:ss@unix(/run/mysqld.sock)/db?a=b":                   "user:***@unix(/run/mysqld.sock)/db?a=b",
		"postgres://app:s3cr3t@db:5432/shop?sslmode=disable":         "postgres://app:***@db:5432/shop?sslmode=disable",
		"postgresql://app@db/shop?password=s3cr3t&sslmode=disable":   "postgresql://app@db/shop?password=***&sslmode=disable",
		"postgres://app:p%40ss@db/shop?sslmode=disable&password=two": "postgres://app:***@db/shop?sslmode=disable&password=***",
		"postgres://db/shop":                                         "postgres://db/shop",
		"root:pw@tcp(h)/db?allowNativePasswords=true":                "root:***@tcp(h)/db?allowNativePasswords=true",
		"file:app.db?_auth_user=a&_auth_pass=s3cr3t&mode=rw":         "file:app.db?_auth_user=a&_auth_pass=***&mode=rw",
		"./password=s3cr3t.db":                                       "./password=***",
		"my:sql://app:s3cr3t@db":                                     hiddenDSN,
	} {
		if got := maskDSN(in); got != want {
			t.Errorf("maskDSN(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[time.Duration]string{
		7 * 24 * time.Hour: "7d", 36 * time.Hour: "1d12h0m0s", time.Hour: "1h0m0s", 1: "1ns",
	} {
		if got := formatAge(in); got != want {
			t.Errorf("formatAge(%v) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"":            "-",
		"plain text":  "plain text",
		"a\nb\tc\rd":  `a\nb\tc\rd`,
		"esc\x1b[31m": `esc\x1b[31m`,
		"bad\xffutf8": `bad\xffutf8`,
		"rtl\u202e!":  `rtl\u202e!`,
		"émoji ✓":     "émoji ✓",
	} {
		if got := cell(in); got != want {
			t.Errorf("cell(%q) = %q, want %q", in, got, want)
		}
	}
	if got := shellQuote("it's"); got != `'it'\''s'` {
		t.Errorf("shellQuote: %s", got)
	}
	// Every id comes back as itself through a shell: one with control
	// characters, a byte that is not UTF-8 or a backslash too (the next
	// page's cursor printed them escaped inside '…', which a shell keeps
	// as backslashes).
	if bash, err := exec.LookPath("bash"); err == nil {
		for _, id := range []string{"plain", "a b", "it's", "a\r\nb", "a\r\nb", "tab\there", "esc\x1b[1m", "bad\xff", "rtl\u202e!", `back\slash`, "q\"uote", "-dash", "é✓"} {
			q := shellQuote(id)
			if cell(q) != q || strings.ContainsAny(q, "\n\r") {
				t.Errorf("shellQuote(%q) = %q: not safe to print on a terminal", id, q)
			}
			cmd := exec.Command(bash, "-c", "printf %s "+q)
			cmd.Env = append(os.Environ(), "LC_ALL=C") // a shell outside a UTF-8 locale too
			out, err := cmd.Output()
			if err != nil || string(out) != id {
				t.Errorf("shellQuote(%q) = %s: through bash %q, %v", id, q, out, err)
			}
		}
	}
	if got := truncate("abcdef", 4); got != "abc…" {
		t.Errorf("truncate: %s", got)
	}
}

// sameAsShow checks that each event of a dead list --json document has
// the fields dead show --json gives it, but the headers, the payload and
// its size.
func sameAsShow(t *testing.T, dsn []string, listed string) {
	t.Helper()
	var list []map[string]any
	decodeJSON(t, listed, &list)
	if len(list) == 0 {
		t.Fatalf("empty list: %s", listed)
	}
	for _, m := range list {
		id, _ := m["event_id"].(string)
		var show map[string]any
		decodeJSON(t, ok(t, append(slices.Clone(dsn), "--json", "dead", "show", id)...), &show)
		for _, k := range []string{"headers", "headers_raw", "payload", "payload_base64", "payload_size"} {
			delete(show, k)
		}
		if !reflect.DeepEqual(m, show) {
			t.Errorf("dead list --json has\n%v\nfor %s, dead show --json\n%v", m, id, show)
		}
	}
}
