package jdbcstore_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/jdbcstore/mysql"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
)

// FuzzDecodeRecord: whatever the columns hold, decoding a row never
// panics and a bad value only sets DecodeErr.
func FuzzDecodeRecord(f *testing.F) {
	f.Add("id", int64(0), []byte(`{}`), int64(1700000000000000), "", int64(0), false)
	f.Add("", int64(300), []byte{0xff}, int64(-1), `{"k":"v"}`, int64(-5), true)
	f.Fuzz(func(t *testing.T, id string, kind int64, payload []byte, micros int64, headers string, status int64, textTimes bool) {
		var tm any = micros
		if textTimes {
			tm = fmt.Sprint(micros)
		}
		vals := []any{id, "T", nil, []byte("agg"), nil, tm, payload, kind, headers, status, int64(0), tm, tm, nil, nil, nil, nil, nil, nil, int64(0)}
		r := jdbcstore.DecodeRecord(sqlite.Dialect, vals)
		if textTimes && r.DecodeErr == nil {
			t.Fatal("text times decoded without error")
		}
		if !textTimes && (kind == 0 || kind == 1) && r.DecodeErr != nil {
			t.Fatalf("valid row: DecodeErr = %v", r.DecodeErr)
		}
		_, _ = r.Envelope() // must not panic either
	})
}

// FuzzMySQLDecodeRecord: whatever the columns hold, decoding a row never
// panics and a bad value only sets DecodeErr.
func FuzzMySQLDecodeRecord(f *testing.F) {
	f.Add("id", int64(1), []byte(`"AAEC"`), "2024-03-15 10:30:00.123456", `{"k":"v"}`)
	f.Add("", int64(0), []byte(`{}`), "0000-00-00 00:00:00", "")
	f.Add("x", int64(1), []byte(`42`), "2024-02-30 25:61:00", "{")
	f.Fuzz(func(t *testing.T, id string, kind int64, payload []byte, tm string, headers string) {
		vals := []any{[]byte(id), []byte("T"), nil, nil, nil, []byte(tm), payload, kind, []byte(headers),
			int64(0), int64(0), []byte(tm), []byte(tm), nil, nil, nil, nil}
		r := jdbcstore.DecodeRecord(mysql.Dialect, vals)
		if _, err := time.Parse(time.DateTime, tm); err != nil && r.DecodeErr == nil {
			t.Fatalf("time %q decoded without error", tm)
		}
		_, _ = r.Envelope() // must not panic either
	})
}

// TestMySQLStatements: every statement has its placeholders, the quoted
// table and, for reads, times selected as text.
func TestMySQLStatements(t *testing.T) {
	t.Parallel()
	q := jdbcstore.StatementText(mysql.Dialect, "tbl")
	for name, c := range map[string]struct {
		sql  string
		args int
	}{
		"insert": {q["insert"], 16}, "markDone1": {q["markDone1"], 3}, "markRetry": {q["markRetry"], 5},
		"markDead": {q["markDead"], 4}, "poll": {q["poll"], 3}, "get": {q["get"], 1}, "countByStatus": {q["countByStatus"], 0},
		"claimSelect": {q["claimSelect"], 5}, "claimSelectRetry": {q["claimSelectRetry"], 5}, "reap": {q["reap"], 2},
	} {
		if n := strings.Count(c.sql, "?"); n != c.args {
			t.Errorf("%s has %d placeholders, want %d: %s", name, n, c.args, c.sql)
		}
		if !strings.Contains(c.sql, "`tbl`") {
			t.Errorf("%s does not use the quoted table: %s", name, c.sql)
		}
	}
	for _, col := range []string{"occurred_at", "available_at", "created_at", "done_at"} {
		if !strings.Contains(q["poll"], "CAST("+col+" AS CHAR)") || !strings.Contains(q["get"], "CAST("+col+" AS CHAR)") {
			t.Errorf("reads do not select %s as text:\n%s", col, q["poll"])
		}
	}
	if !strings.HasSuffix(q["poll"], "ORDER BY available_at, created_at, event_id LIMIT ?") {
		t.Errorf("poll = %s", q["poll"])
	}
	// SQLite reads its columns as they are.
	if strings.Contains(jdbcstore.StatementText(sqlite.Dialect, "tbl")["poll"], "CAST(") {
		t.Error("SQLite statements select casts")
	}
}
