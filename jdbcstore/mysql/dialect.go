package mysql

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/jsoncol"
	"github.com/outbox-go/outbox/jdbcstore"
)

// Dialect is the dialect of MySQL 8 and MariaDB 10.6+ through
// github.com/go-sql-driver/mysql (driver name "mysql"), registered with
// [jdbcstore.Register] when this package is imported.
//
// Times are DATETIME(6) columns holding UTC wall-clock time. The store
// sends them as "2006-01-02 15:04:05.000000" text computed from the UTC
// instant truncated (never rounded) to microseconds, and reads them as text
// too, so they come back as exact UTC instants whatever the DSN's
// parseTime and loc and the session time_zone are (DATETIME is never
// converted by time_zone).
//
// event_id is VARBINARY(144): ids compare byte for byte. The utf8mb4_bin
// collation would be case-sensitive but pads spaces ('a' = 'a ').
//
// The payload column is JSON. A JSON payload is stored as the document
// itself (MySQL 8 normalizes key order and whitespace, MariaDB keeps the
// text; the JSON value is kept either way). A bytes payload is stored as a
// JSON string holding its standard base64 encoding (`"AAEC/w=="`), so it
// round-trips byte-exact and a 1 MiB payload takes about 1.4 MB. A JSON
// payload the column would refuse (a lone UTF-16 surrogate escape, more
// than [MaxJSONDepth] levels of nesting, a number beyond a double's range)
// is refused before the server with core.ErrInvalidJSON, on both servers.
var Dialect jdbcstore.Dialect = mysqlDialect{}

//go:embed schema/outbox.sql
var outboxSchema string

//go:embed schema/inbox.sql
var inboxSchema string

//go:embed schema/outbox_upgrade.sql
var outboxUpgrade string

//go:embed schema/keys_upgrade.sql
var keysUpgrade string

func init() { jdbcstore.Register(Dialect) }

type mysqlDialect struct{}

func (mysqlDialect) Name() string          { return "mysql" }
func (mysqlDialect) DriverNames() []string { return []string{"mysql"} }
func (mysqlDialect) OutboxSchema() string  { return outboxSchema }
func (mysqlDialect) InboxSchema() string   { return inboxSchema }

// OutboxUpgrade implements jdbcstore.SchemaUpgrader: the ordering columns
// for a table created before ordered delivery.
func (mysqlDialect) OutboxUpgrade() string { return outboxUpgrade }

// KeysUpgrade implements jdbcstore.KeysUpgrader: the keys table's id
// columns for a table created before the ordered insert read the event
// before its own by id.
func (mysqlDialect) KeysUpgrade() string { return keysUpgrade }
func (mysqlDialect) BindType() int       { return sqlx.QUESTION }

// DDLLockTimeout implements jdbcstore.DDLLockTimeouter: the session's wait
// for a metadata lock is bounded to one second (the least
// lock_wait_timeout takes), and its own value is restored afterwards.
func (mysqlDialect) DDLLockTimeout() (set, reset string) {
	return "SET @outbox_lock_wait_timeout = @@SESSION.lock_wait_timeout, SESSION lock_wait_timeout = 1",
		"SET SESSION lock_wait_timeout = @outbox_lock_wait_timeout"
}

func (mysqlDialect) Capabilities() jdbcstore.Capabilities {
	// FOR UPDATE SKIP LOCKED: MySQL 8.0.1, MariaDB 10.6. RETURNING exists
	// in MariaDB for INSERT and DELETE only, and not at all in MySQL.
	// InnoDB rolls back the whole transaction after a deadlock (and a lock
	// wait timeout with innodb_rollback_on_timeout); the session goes on in
	// autocommit mode and COMMIT succeeds on nothing.
	// InnoDB's locking read of a unique index over nullable columns
	// locks the gap before the entry it finds under REPEATABLE READ: an
	// ordered insert reads the event before its own by primary key.
	return jdbcstore.Capabilities{SkipLocked: true, UpdateOrderLimit: true, SilentRollback: true, OnDuplicateKeyUpdate: true,
		PredecessorByID: true, PadSpace: true, MaxBindParams: 65535}
}

// quoteIdent uses backticks, which work whatever sql_mode (ANSI_QUOTES)
// says; validated names hold no backtick.
func (mysqlDialect) QuoteIdent(name string) string { return "`" + name + "`" }

// mysqlTimeLayout is the text form of a DATETIME(6) value: always six
// fractional digits, so the server never has to round.
const mysqlTimeLayout = "2006-01-02 15:04:05.000000"

// encodeTime returns the UTC wall clock of t, truncated (never rounded) to
// microseconds, as text. Text keeps the value independent of the driver's
// loc setting, which converts time.Time arguments.
func (mysqlDialect) EncodeTime(t time.Time) any {
	return t.UTC().Truncate(time.Microsecond).Format(mysqlTimeLayout)
}

// selectTime reads a DATETIME(6) column as its text
// ("2006-01-02 15:04:05.000000"), whatever the DSN's parseTime says: with
// parseTime=true the driver would build a time.Time in the DSN's loc, and
// time.Date moves a wall clock that falls into that location's daylight
// saving gap by an hour before the dialect could take it as UTC.
func (mysqlDialect) SelectTime(column string) string { return "CAST(" + column + " AS CHAR)" }

// decodeTime accepts the text of a DATETIME column (what reads through
// selectTime return) and, for callers reading a column directly with
// parseTime=true, a time.Time whose wall clock is taken as UTC whatever
// location the driver attached.
func (mysqlDialect) DecodeTime(v any) (time.Time, error) {
	switch v := v.(type) {
	case nil:
		return time.Time{}, nil
	case time.Time:
		if v.IsZero() {
			return time.Time{}, errors.New("stored time is the zero date")
		}
		y, mo, d := v.Date()
		h, mi, s := v.Clock()
		return time.Date(y, mo, d, h, mi, s, v.Nanosecond(), time.UTC).Truncate(time.Microsecond), nil
	case []byte:
		return mysqlParseTime(string(v))
	case string:
		return mysqlParseTime(v)
	}
	return time.Time{}, fmt.Errorf("stored time is %T, want DATETIME", v)
}

// mysqlParseTime parses the text form of a DATETIME as UTC.
func mysqlParseTime(s string) (time.Time, error) {
	// The layout without fraction also accepts any fraction after the
	// seconds.
	t, err := time.ParseInLocation(time.DateTime, s, time.UTC)
	if err != nil {
		return time.Time{}, fmt.Errorf("stored time %.40q: %w", s, err)
	}
	return t.Truncate(time.Microsecond), nil
}

func (mysqlDialect) EncodePayload(kind core.PayloadKind, p []byte) (any, error) {
	if kind == core.PayloadJSON {
		if err := jsonColumnStores(p); err != nil {
			return nil, err
		}
	}
	return jsoncol.Encode(kind, p)
}

// MaxJSONDepth is the deepest nesting of arrays and objects a JSON payload
// may have on MySQL/MariaDB: MariaDB's JSON check refuses 32 levels
// (MySQL 8 accepts 100; the dialect cannot tell the servers apart before
// the insert, so it keeps to the lower limit).
const MaxJSONDepth = 31

// jsonColumnStores refuses, before the INSERT, the valid JSON the JSON
// column refuses: a lone UTF-16 surrogate escape (\ud800), more than
// MaxJSONDepth levels of nesting, or a number beyond a double's range
// (MySQL 8; MariaDB keeps the text). The server's refusal is an error the
// caller could not tell from any other (on MariaDB a CHECK constraint's).
func jsonColumnStores(p []byte) error {
	f := jsoncol.Inspect(p)
	switch {
	case f.LoneSurrogate:
		return fmt.Errorf(`%w: it holds a lone UTF-16 surrogate escape (such as \ud800), which MySQL's and MariaDB's JSON refuse`, core.ErrInvalidJSON)
	case f.Depth > MaxJSONDepth:
		return fmt.Errorf("%w: it is nested %d levels deep, more than the %d MariaDB's JSON accepts", core.ErrInvalidJSON, f.Depth, MaxJSONDepth)
	case f.FloatOverflow:
		return fmt.Errorf("%w: it holds a number beyond the range of a double (±1.8e308), which MySQL 8's JSON refuses", core.ErrInvalidJSON)
	}
	return nil
}

func (mysqlDialect) DecodePayload(kind core.PayloadKind, v any) ([]byte, error) {
	return jsoncol.Decode(kind, v)
}

// MySQL and MariaDB server error numbers the store reacts to.
const (
	mysqlErrDupEntry        = 1062 // ER_DUP_ENTRY
	mysqlErrDupEntryWithKey = 1586 // ER_DUP_ENTRY_WITH_KEY_NAME
	mysqlErrLockWaitTimeout = 1205 // ER_LOCK_WAIT_TIMEOUT
	mysqlErrLockDeadlock    = 1213 // ER_LOCK_DEADLOCK
)

// mysqlMinMaxAllowedPacket is the max_allowed_packet below which
// checkSetup warns: a 1 MiB bytes payload alone is 1,398,106 bytes of
// base64 JSON, and headers come on top.
const mysqlMinMaxAllowedPacket = 4 << 20

// classify maps go-sql-driver/mysql server errors: a duplicate key is a
// duplicate event, a deadlock or a lock wait timeout is contention (both
// roll back the statement's transaction, so only a lone autocommit
// statement may be retried, which is what the store does).
func (mysqlDialect) Classify(err error) jdbcstore.ErrorClass {
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me == nil {
		return jdbcstore.ClassOther
	}
	switch me.Number {
	case mysqlErrDupEntry, mysqlErrDupEntryWithKey:
		return jdbcstore.ClassDuplicate
	case mysqlErrLockDeadlock, mysqlErrLockWaitTimeout:
		return jdbcstore.ClassBusy
	}
	return jdbcstore.ClassOther
}

// CheckSession implements jdbcstore.SessionChecker: autocommit must be on.
// Turned off (autocommit=0 in the DSN, or the server's init_connect), the
// store's writes outside a transaction open one that never commits: DONE
// never reached other sessions (every event was delivered again after a
// restart), its claims failed with error 1568 and a purge waited for the
// locks of idle connections.
func (mysqlDialect) CheckSession(ctx context.Context, conn *sql.Conn) error {
	var autocommit int
	if err := conn.QueryRowContext(ctx, "SELECT @@autocommit").Scan(&autocommit); err == nil && autocommit == 0 {
		return errors.New("autocommit is off (autocommit=0 in the DSN, or the server's init_connect): the outbox's writes outside a transaction would never commit; leave autocommit on")
	}
	return nil
}

// mysqlVersion matches the leading "major.minor" of @@version.
var mysqlVersion = regexp.MustCompile(`^(\d+)\.(\d+)`)

// checkSetup warns when a character set of the connection is not utf8mb4
// (the client's, the connection's, the results'), when max_allowed_packet
// cannot carry a 1 MiB payload, and when the server is older than the
// supported MySQL 8.0 / MariaDB 10.6.
func (mysqlDialect) CheckSetup(ctx context.Context, db *sqlx.DB, log *slog.Logger) {
	var (
		client, charset, version string
		results                  sql.NullString // NULL: results are not converted
		packet                   int64
	)
	err := db.QueryRowContext(ctx, "SELECT @@character_set_client, @@character_set_connection, @@character_set_results, @@version, @@max_allowed_packet").
		Scan(&client, &charset, &results, &version, &packet)
	if err != nil {
		log.DebugContext(ctx, "outbox: mysql: cannot read the connection settings", slog.Any("error", err))
		return
	}
	var attrs []slog.Attr
	for _, v := range []struct{ name, value string }{
		{"character_set_client", client}, {"character_set_connection", charset}, {"character_set_results", results.String},
	} {
		if v.value != "" && v.value != "utf8mb4" && v.value != "binary" {
			attrs = append(attrs, slog.String(v.name, v.value))
		}
	}
	if len(attrs) > 0 {
		log.LogAttrs(ctx, slog.LevelWarn, "outbox: mysql: a character set of the connection is not utf8mb4; events with characters outside it fail or are stored with '?' in their place (utf8/utf8mb3: emoji), long non-ASCII text is stored double-encoded (latin1), or text is read back in another encoding (garbled headers, payloads that are not valid JSON: DEAD). Remove charset/collation and character_set_* from the DSN, or set charset=utf8mb4",
			attrs...)
	}
	if packet < mysqlMinMaxAllowedPacket {
		log.WarnContext(ctx, "outbox: mysql: max_allowed_packet is below 4 MiB; a 1 MiB bytes payload is stored as about 1.4 MB of base64 and may be rejected",
			slog.Int64("max_allowed_packet", packet))
	}
	if m := mysqlVersion.FindStringSubmatch(version); m != nil {
		major, _ := strconv.Atoi(m[1])
		minor, _ := strconv.Atoi(m[2])
		maria := strings.Contains(strings.ToLower(version), "mariadb")
		if (maria && (major < 10 || major == 10 && minor < 6)) || (!maria && major < 8) {
			log.WarnContext(ctx, "outbox: mysql: server older than MySQL 8.0 / MariaDB 10.6 (no SKIP LOCKED); it is not supported",
				slog.String("version", version))
		}
	}
}

// HasIndex implements jdbcstore.IndexChecker: whether table, in the
// connection's database, has an index called name whose key holds
// columns.
func (mysqlDialect) HasIndex(ctx context.Context, db sqlx.QueryerContext, table, name string, columns ...string) (bool, error) {
	var have []string
	if err := sqlx.SelectContext(ctx, db, &have,
		"SELECT column_name FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name = ? AND index_name = ?",
		table, name); err != nil {
		return false, err
	}
	if len(have) == 0 {
		return false, nil
	}
	for _, c := range columns {
		if !slices.ContainsFunc(have, func(h string) bool { return strings.EqualFold(h, c) }) {
			return false, nil
		}
	}
	return true, nil
}

// DeadTypeHint implements jdbcstore.DeadTypeHinter: a dead-letter list
// filtered by type (or by tenant or time, which the store hints alike)
// reads the DEAD rows of the type from idx_status_done
// (status, done_at, event_type) and sorts that page's candidates, instead
// of walking the primary key until it has found a page of matches (1,000,000
// rows, 10,000 DEAD over 20 types: ~37 against ~2 ms; a type without
// DEAD rows walked the whole table). Tables whose idx_status_done lacks
// event_type are not hinted.
func (mysqlDialect) DeadTypeHint() (index string, columns []string, clause string) {
	return "idx_status_done", []string{"event_type"}, "USE INDEX (idx_status_done)"
}
