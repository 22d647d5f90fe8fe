package main

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// The rows a crashed node leaves behind, as the recovery scenarios seed
// them.
const (
	// recoveredType is the event type of the seeded rows.
	recoveredType = "OrderRecovered"
	// deadOwner is the owner whose leases the seeded rows carry: a node
	// that is gone.
	deadOwner = "bench-dead-node"
	// outboxTable is the framework's default table (jdbcstore.DefaultTable).
	outboxTable = "outbox_event"
	// seedAge is how long before the scenario the dead node's first row
	// was published; its leases expired a minute before the scenario.
	seedAge     = 10 * time.Minute
	seedExpired = time.Minute
)

// seedBacklog inserts n NEW rows shaped exactly as a node that crashed
// while holding them leaves them: status NEW, attempts 0, leased by
// deadOwner until a minute ago, created (and due) one microsecond apart
// ten minutes ago, payload the order JSON, the seq header carrying the
// row's index. With keys > 0 row i is ordered on key i mod keys at
// position i/keys+1 (and, where the database keeps one, the keys table
// holds each key's last position), as the ordered publish path numbers
// them. One INSERT … SELECT over a generated series per statement, in
// one transaction: the database makes the rows, not n round trips.
func seedBacklog(ctx context.Context, f *freshDB, n, keys int) error {
	now := time.Now().UTC()
	base, expired := now.Add(-seedAge), now.Add(-seedExpired)
	var stmts []seedStmt
	switch f.kind {
	case "mysql":
		stmts = seedMySQL(n, keys, base, expired)
	case "postgres":
		stmts = seedPostgres(n, keys, base, expired)
	default:
		stmts = seedSQLite(n, keys, base, expired)
	}
	tx, err := f.db.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	for _, s := range stmts {
		if _, err := tx.ExecContext(ctx, f.db.Rebind(s.sql), s.args...); err != nil {
			return fmt.Errorf("seed: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	return nil
}

// seedStmt is one statement of a seed, with '?' placeholders.
type seedStmt struct {
	sql  string
	args []any
}

// seedColumns are the columns every seed statement fills, in this order.
const seedColumns = "(event_id, event_type, aggregate_type, aggregate_id, occurred_at, payload, payload_kind, headers," +
	" status, attempts, available_at, created_at, locked_by, locked_until, order_key, order_seq, order_skip)"

// seedSQLite seeds from a recursive series; times are Unix microseconds.
func seedSQLite(n, keys int, base, expired time.Time) []seedStmt {
	okey, oseq := "NULL", "NULL"
	if keys > 0 {
		k := strconv.Itoa(keys)
		okey, oseq = "'"+recoveryKeyPrefix+"' || (x % "+k+")", "x / "+k+" + 1"
	}
	b, e := base.UnixMicro(), expired.UnixMicro()
	return []seedStmt{{
		sql: "WITH RECURSIVE s(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM s WHERE x < ?)" +
			" INSERT INTO " + outboxTable + " " + seedColumns +
			" SELECT printf('rcv-%09d', x), '" + recoveredType + "', '" + aggregateType + "', 'rcv-' || x, ? + x," +
			` CAST('{"ref":"rcv-' || x || '","amount_cents":1000,"currency":"EUR"}' AS BLOB), 0,` +
			` '{"` + seqHeader + `":"' || x || '"}', 0, 0, ? + x, ? + x, '` + deadOwner + `', ?, ` + okey + ", " + oseq + ", 0 FROM s",
		args: []any{n - 1, b, b, b, e},
	}}
}

// seedPostgres seeds from generate_series.
func seedPostgres(n, keys int, base, expired time.Time) []seedStmt {
	okey, oseq := "NULL", "NULL"
	if keys > 0 {
		k := strconv.Itoa(keys)
		okey, oseq = "'"+recoveryKeyPrefix+"' || (x % "+k+")", "x / "+k+" + 1"
	}
	at := "(?::timestamptz + x * interval '1 microsecond')"
	stmts := []seedStmt{{
		sql: "INSERT INTO " + outboxTable + " " + seedColumns +
			" SELECT 'rcv-' || lpad(x::text, 9, '0'), '" + recoveredType + "', '" + aggregateType + "', 'rcv-' || x, " + at + "," +
			` ('{"ref":"rcv-' || x || '","amount_cents":1000,"currency":"EUR"}')::jsonb, 0,` +
			` ('{"` + seqHeader + `":"' || x || '"}')::jsonb, 0, 0, ` + at + ", " + at + ", '" + deadOwner + "', ?::timestamptz, " +
			okey + ", " + oseq + ", 0 FROM generate_series(0, ?) AS x",
		args: []any{base, base, base, expired, n - 1},
	}}
	if keys > 0 {
		stmts = append(stmts, seedKeys(n, keys, "/", "generate_series(0, ?) AS k", []any{keys - 1}))
	}
	return stmts
}

// seedMySQL seeds from a cross join of digits (MySQL 8 and MariaDB both
// have it; recursive CTEs stop at a configurable depth). Times are UTC
// wall-clock DATETIME(6).
func seedMySQL(n, keys int, base, expired time.Time) []seedStmt {
	okey, oseq := "NULL", "NULL"
	if keys > 0 {
		k := strconv.Itoa(keys)
		okey, oseq = "CONCAT('"+recoveryKeyPrefix+"', x MOD "+k+")", "x DIV "+k+" + 1"
	}
	const layout = "2006-01-02 15:04:05.999999"
	b, e := base.Format(layout), expired.Format(layout)
	at := "TIMESTAMPADD(MICROSECOND, x, ?)"
	stmts := []seedStmt{{
		sql: "INSERT INTO " + outboxTable + " " + seedColumns +
			" SELECT CONCAT('rcv-', LPAD(x, 9, '0')), '" + recoveredType + "', '" + aggregateType + "', CONCAT('rcv-', x), " + at + "," +
			` CONCAT('{"ref":"rcv-', x, '","amount_cents":1000,"currency":"EUR"}'), 0,` +
			` CONCAT('{"` + seqHeader + `":"', x, '"}'), 0, 0, ` + at + ", " + at + ", '" + deadOwner + "', ?, " +
			okey + ", " + oseq + ", 0 FROM " + mysqlSeries("x") + " WHERE x < ?",
		args: []any{b, b, b, e, n},
	}}
	if keys > 0 {
		stmts = append(stmts, seedKeys(n, keys, "DIV", mysqlSeries("k")+" WHERE k < ?", []any{keys}))
	}
	return stmts
}

// mysqlSeries is a derived table of the numbers 0 to 999,999 in column
// col: six digit tables cross-joined.
func mysqlSeries(col string) string {
	digits := "(SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4" +
		" UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)"
	return "(SELECT d0.d + 10 * d1.d + 100 * d2.d + 1000 * d3.d + 10000 * d4.d + 100000 * d5.d AS " + col +
		" FROM " + digits + " d0, " + digits + " d1, " + digits + " d2, " + digits + " d3, " + digits + " d4, " + digits + " d5) AS series"
}

// seedKeys fills the keys table (MySQL, PostgreSQL) with each key's last
// position, as the publish path leaves it: key k (0 ≤ k < keys ≤ n, from
// the series in from) has the positions of rows k, k+keys, … below n. div
// is the dialect's integer division operator.
func seedKeys(n, keys int, div, from string, args []any) seedStmt {
	kk, nn := strconv.Itoa(keys), strconv.Itoa(n)
	return seedStmt{
		sql: "INSERT INTO " + outboxTable + "_keys (order_key, last_seq) SELECT CONCAT('" + recoveryKeyPrefix + "', k)," +
			" (" + nn + " - 1 - k) " + div + " " + kk + " + 1 FROM " + from,
		args: args,
	}
}

// maxSeed is the most rows seedBacklog makes (the MySQL series' size).
const maxSeed = 1_000_000
