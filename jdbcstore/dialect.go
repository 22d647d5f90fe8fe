package jdbcstore

import (
	"context"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
)

// Dialect is the SQL flavour of one database: its schema, how it stores
// times and payloads, how its placeholders look and how its driver reports
// duplicate keys and lock contention.
//
// Dialect has unexported methods: pick one of the exported values of this
// package ([SQLite], [MySQL]); other packages cannot implement it.
type Dialect interface {
	// Name returns a short lowercase name such as "sqlite".
	Name() string

	// driverNames lists the database/sql driver names this dialect is
	// chosen for when Config.Dialect is nil.
	driverNames() []string
	// caps declares what the database can do beyond the common SQL.
	caps() capabilities
	// schemaFile names the text/template under schema/ holding the DDL.
	schemaFile() string
	// quoteIdent quotes an identifier that already passed validation.
	quoteIdent(name string) string
	// bindType is the sqlx bind type of the driver's placeholders
	// (sqlx.QUESTION, sqlx.DOLLAR, ...). Statements are written with '?'
	// and rebound once.
	bindType() int
	// encodeTime turns t into the driver argument stored in a time column.
	encodeTime(t time.Time) any
	// decodeTime turns a scanned time column back into a UTC time; a NULL
	// (nil) gives the zero time and no error.
	decodeTime(v any) (time.Time, error)
	// encodePayload turns a payload into the driver argument stored in the
	// payload column.
	encodePayload(kind core.PayloadKind, p []byte) (any, error)
	// decodePayload turns a scanned payload column back into the payload
	// bytes. It must never panic, whatever v holds.
	decodePayload(kind core.PayloadKind, v any) ([]byte, error)
	// classify maps a driver error to what the store must do about it.
	classify(err error) errClass
	// checkSetup inspects the connection settings after the schema was
	// applied and logs what could hurt (it never fails).
	checkSetup(ctx context.Context, db *sqlx.DB, log *slog.Logger)
}

// capabilities are the optional SQL features of a database, for claim and
// batch strategies that differ between dialects.
type capabilities struct {
	// skipLocked: SELECT ... FOR UPDATE SKIP LOCKED.
	skipLocked bool
	// returning: UPDATE ... RETURNING.
	returning bool
	// updateOrderLimit: UPDATE ... LIMIT (MySQL); without it a LIMIT
	// goes into a subquery on the same table (SQLite, PostgreSQL).
	updateOrderLimit bool
	// silentRollback: the server may roll a transaction back on its own
	// (deadlock, lock wait timeout, killed connection) and still let a
	// later COMMIT succeed, on nothing (MySQL, MariaDB). The store then
	// checks before commit that the transaction's first event row is
	// still there.
	silentRollback bool
}

// timeSelector is implemented by dialects that must not let the driver
// decode time columns (go-sql-driver/mysql with parseTime=true builds a
// time.Time in the DSN's loc, which shifts wall clocks that fall into a
// daylight saving gap). Reads select selectTime(column) instead of the
// column itself; decodeTime receives what that expression returns.
type timeSelector interface {
	selectTime(column string) string
}

// errClass is how the store reacts to a driver error.
type errClass int

const (
	// errOther is returned to the caller as is (wrapped).
	errOther errClass = iota
	// errDuplicate is a primary key or unique violation: the event id
	// already exists (wrapped with core.ErrDuplicateEvent).
	errDuplicate
	// errBusy is transient lock contention; a single statement outside a
	// caller's transaction may be retried.
	errBusy
)

// knownDialects are the dialects New can pick from the driver name. Each
// dialect file adds itself with registerDialect.
var knownDialects []Dialect

// registerDialect adds d to the dialects New detects and returns it, so a
// dialect file declares its exported value in one line:
//
//	var SQLite Dialect = registerDialect(sqliteDialect{})
func registerDialect(d Dialect) Dialect {
	knownDialects = append(knownDialects, d)
	return d
}

// dialectForDriver returns the dialect registered for a database/sql
// driver name, or nil.
func dialectForDriver(driverName string) Dialect {
	for _, d := range knownDialects {
		for _, n := range d.driverNames() {
			if n == driverName {
				return d
			}
		}
	}
	return nil
}
