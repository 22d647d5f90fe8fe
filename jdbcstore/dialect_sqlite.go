package jdbcstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/mattn/go-sqlite3"

	"github.com/outbox-go/outbox/core"
)

// SQLite is the dialect of github.com/mattn/go-sqlite3 (driver name
// "sqlite3"). Times are stored as INTEGER Unix microseconds in UTC, so
// comparisons are numeric and exact; payloads are stored as BLOB bytes,
// byte-exact for both payload kinds. Open the database with [OpenSQLite]
// (WAL, busy timeout, immediate transactions).
var SQLite Dialect = registerDialect(sqliteDialect{})

type sqliteDialect struct{}

func (sqliteDialect) Name() string          { return "sqlite" }
func (sqliteDialect) driverNames() []string { return []string{"sqlite3"} }
func (sqliteDialect) schemaFile() string    { return "sqlite.sql" }
func (sqliteDialect) bindType() int         { return sqlx.QUESTION }

func (sqliteDialect) caps() capabilities {
	// RETURNING needs SQLite 3.35 (2021). UPDATE ... LIMIT needs a
	// compile option a system libsqlite3 may lack, so claims will not
	// rely on it; SQLite has no row locks to skip.
	return capabilities{returning: true}
}

// quoteIdent uses standard double quotes; validated names hold no quote.
func (sqliteDialect) quoteIdent(name string) string { return `"` + name + `"` }

func (sqliteDialect) encodeTime(t time.Time) any { return t.UnixMicro() }

func (sqliteDialect) decodeTime(v any) (time.Time, error) {
	switch v := v.(type) {
	case nil:
		return time.Time{}, nil
	case int64:
		return time.UnixMicro(v).UTC(), nil
	}
	return time.Time{}, fmt.Errorf("stored time is %T, want INTEGER microseconds", v)
}

func (sqliteDialect) encodePayload(kind core.PayloadKind, p []byte) (any, error) {
	return sqliteEncodePayload(kind, p)
}

func (sqliteDialect) decodePayload(kind core.PayloadKind, v any) ([]byte, error) {
	switch v := v.(type) {
	case []byte:
		return sqliteDecodePayload(kind, v)
	case string: // a row written by hand with a TEXT payload
		return sqliteDecodePayload(kind, []byte(v))
	case nil:
		return nil, errors.New("stored payload is NULL")
	}
	return nil, fmt.Errorf("stored payload is %T, want BLOB", v)
}

// sqliteEncodePayload returns the BLOB stored for a payload: the bytes
// themselves, whatever the kind. It never returns nil for a known kind,
// because the driver binds a nil []byte as NULL.
func sqliteEncodePayload(kind core.PayloadKind, p []byte) ([]byte, error) {
	if err := checkPayloadKind(kind); err != nil {
		return nil, err
	}
	if p == nil {
		p = []byte{}
	}
	return p, nil
}

// sqliteDecodePayload is the inverse of sqliteEncodePayload. It rejects
// unknown kinds and never panics.
func sqliteDecodePayload(kind core.PayloadKind, stored []byte) ([]byte, error) {
	if err := checkPayloadKind(kind); err != nil {
		return nil, err
	}
	if stored == nil {
		stored = []byte{}
	}
	return stored, nil
}

func checkPayloadKind(kind core.PayloadKind) error {
	switch kind {
	case core.PayloadJSON, core.PayloadBytes:
		return nil
	}
	return fmt.Errorf("unknown payload kind %d", uint8(kind))
}

// classify maps mattn/go-sqlite3 errors: SQLITE_BUSY and SQLITE_LOCKED are
// contention, a primary key or unique constraint is a duplicate.
func (sqliteDialect) classify(err error) errClass {
	var se sqlite3.Error
	if !errors.As(err, &se) {
		var sp *sqlite3.Error
		if !errors.As(err, &sp) || sp == nil {
			return errOther
		}
		se = *sp
	}
	switch se.Code {
	case sqlite3.ErrBusy, sqlite3.ErrLocked:
		return errBusy
	case sqlite3.ErrConstraint:
		switch se.ExtendedCode {
		case sqlite3.ErrConstraintPrimaryKey, sqlite3.ErrConstraintUnique:
			return errDuplicate
		}
	}
	return errOther
}

// checkSetup warns when the connection has no busy timeout or does not use
// WAL: business transactions and status writes would then fail with
// "database is locked" or serialize readers behind writers.
func (sqliteDialect) checkSetup(ctx context.Context, db *sqlx.DB, log *slog.Logger) {
	var timeoutMS int64
	if err := db.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&timeoutMS); err != nil {
		log.DebugContext(ctx, "outbox: sqlite: cannot read busy_timeout", slog.Any("error", err))
		return
	}
	if timeoutMS == 0 {
		log.WarnContext(ctx, "outbox: sqlite: busy_timeout is 0; open the database with jdbcstore.OpenSQLite or set _busy_timeout in the DSN, or concurrent writers fail with \"database is locked\"")
	}
	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		log.DebugContext(ctx, "outbox: sqlite: cannot read journal_mode", slog.Any("error", err))
		return
	}
	if !strings.EqualFold(mode, "wal") && !strings.EqualFold(mode, "memory") {
		log.WarnContext(ctx, "outbox: sqlite: journal_mode is not WAL; readers and writers will block each other", slog.String("journal_mode", mode))
	}
}
