package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/dsnsecret"
	"github.com/outbox-go/outbox/jdbcstore"
	mysqldialect "github.com/outbox-go/outbox/jdbcstore/mysql"
	"github.com/outbox-go/outbox/jdbcstore/sqlite"
)

// looksMySQL reports whether a --dsn value is a MySQL DSN rather than a
// SQLite path.
func looksMySQL(dsn string) bool { return dsnsecret.LooksMySQL(dsn) }

// supportedDatabases names the databases --dsn accepts, for errors.
const supportedDatabases = "SQLite (a file path or file: URI), MySQL/MariaDB (user:pass@tcp(host:3306)/db) and PostgreSQL (postgres://user:pass@host:5432/db)"

// unsupportedDatabase reports the database a --dsn names by a URL scheme
// that outboxctl cannot open (sqlserver://...), so it is not taken for a
// SQLite file name. It never returns the DSN itself (it may hold a
// password).
func unsupportedDatabase(dsn string) (string, bool) {
	scheme, _, ok := strings.Cut(dsn, "://")
	if !ok || scheme == "" || strings.ContainsAny(scheme, "/\\@:()?") {
		return "", false
	}
	switch strings.ToLower(scheme) {
	case "mysql", "file", "postgres", "postgresql":
		return "", false
	case "pgx":
		return "PostgreSQL under the scheme pgx:// (write postgres://)", true
	case "sqlserver", "mssql":
		return "SQL Server", true
	}
	return strings.ToLower(scheme), true
}

// libpqKeywords are the connection keywords of libpq (PostgreSQL 15 to
// 18), any of which may start a key=value connection string.
var libpqKeywords = []string{
	"host", "hostaddr", "port", "dbname", "user", "password", "passfile", "channel_binding", "connect_timeout",
	"client_encoding", "options", "application_name", "fallback_application_name", "keepalives", "keepalives_idle",
	"keepalives_interval", "keepalives_count", "tcp_user_timeout", "replication", "gssencmode", "sslmode", "requiressl",
	"sslnegotiation", "sslcompression", "sslcert", "sslkey", "sslcertmode", "sslpassword", "sslkeylogfile", "sslrootcert",
	"sslcrl", "sslcrldir", "sslsni", "requirepeer", "require_auth", "ssl_min_protocol_version", "ssl_max_protocol_version",
	"min_protocol_version", "max_protocol_version", "krbsrvname", "gsslib", "gssdelegation", "service",
	"target_session_attrs", "load_balance_hosts", "scram_client_key", "scram_server_key",
	"oauth_issuer", "oauth_client_id", "oauth_client_secret", "oauth_scope",
}

// libpqKeyValue matches the start of a PostgreSQL key=value connection
// string (host=db user=app ...): a libpq keyword, then '='. Any case:
// libpq wants lower case, but Host=db User=app is still meant as one,
// not as a file. No SQLite path starts so.
var libpqKeyValue = regexp.MustCompile(`(?i)^\s*(?:` + strings.Join(libpqKeywords, "|") + `)\s*=`)

// unsupportedDSN returns the usage error for a --dsn of a database
// outboxctl does not support, or of a form it does not take (a JDBC URL,
// a libpq key=value string), or nil. It never quotes the DSN.
func unsupportedDSN(dsn string) error {
	switch {
	case len(dsn) >= 5 && strings.EqualFold(dsn[:5], "jdbc:"):
		return usagef("--dsn: JDBC URLs (jdbc:…) are not supported: write the database's own form; outboxctl supports %s", supportedDatabases)
	case libpqKeyValue.MatchString(dsn):
		return usagef("--dsn: PostgreSQL key=value connection strings are not supported: write a URL "+
			"(postgres://user:pass@host:5432/db?sslmode=disable); outboxctl supports %s", supportedDatabases)
	}
	if db, ok := unsupportedDatabase(dsn); ok {
		return usagef("--dsn: %s is not supported (yet); outboxctl supports %s", db, supportedDatabases)
	}
	return nil
}

// hiddenDSN stands for a --dsn whose password outboxctl cannot locate.
const hiddenDSN = "<the --dsn value, not shown: it may hold a password>"

// hidden reports whether dsn is shown as hiddenDSN: a URL of no database
// outboxctl knows (some scheme://), taken for a SQLite path, whose user
// information may hold a password.
func hidden(dsn string) bool {
	return strings.Contains(dsn, "://") && !looksPostgres(dsn) && !looksMySQL(dsn) &&
		!(len(dsn) >= 5 && strings.EqualFold(dsn[:5], "file:"))
}

// maskDSN returns dsn for people: with the password of a MySQL DSN or a
// PostgreSQL URL, and the value of every parameter named like a password,
// replaced by ***; so is anything that looks like one (user:pass@host/db,
// a MySQL DSN missing its tcp(...)). A URL of an unknown scheme comes back
// as hiddenDSN; other SQLite paths unchanged.
func maskDSN(dsn string) string {
	if hidden(dsn) {
		return hiddenDSN
	}
	return dsnsecret.Mask(dsn)
}

// scrubSecret masks the passwords of dsn (see maskDSN), and any piece of
// them, wherever they appear in msg, and a hidden dsn as a whole.
func scrubSecret(msg, dsn string) string {
	if hidden(dsn) {
		return strings.ReplaceAll(msg, dsn, hiddenDSN)
	}
	return dsnsecret.Scrub(msg, dsn)
}

// target is a parsed --dsn.
type target struct {
	driver  string // database/sql driver: "sqlite3", "mysql" or "pgx"
	dialect jdbcstore.Dialect
	source  string // what the driver opens: the SQLite path, the MySQL DSN or the PostgreSQL URL
	shown   string // for people: the path, or the DSN with its password masked
}

// parseTarget reads a --dsn value. Its errors are usage errors.
func parseTarget(raw string) (target, error) {
	if raw == "" {
		return target{}, usagef("no database: give --dsn (a SQLite file, a MySQL DSN or a PostgreSQL URL) or set $%s", envDSN)
	}
	if err := unsupportedDSN(raw); err != nil {
		return target{}, err
	}
	if looksPostgres(raw) {
		return parsePostgres(raw)
	}
	if !looksMySQL(raw) {
		return target{driver: "sqlite3", dialect: sqlite.Dialect, source: raw, shown: maskDSN(raw)}, nil
	}
	dsn, _ := dsnsecret.TrimMySQLScheme(raw)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return target{}, usagef("--dsn: not a MySQL DSN of the form user:pass@tcp(host:3306)/db: %v", err)
	}
	if cfg.Net != "tcp" && cfg.Net != "unix" {
		return target{}, usagef("--dsn: MySQL network %q: write tcp(host:port) or unix(/path/to/socket)", cfg.Net)
	}
	if cfg.DBName == "" {
		return target{}, usagef("--dsn: the MySQL DSN names no database: end it with /dbname")
	}
	return target{driver: "mysql", dialect: mysqldialect.Dialect, source: dsn, shown: maskDSN(dsn)}, nil
}

// reachError is a database that cannot be opened or does not answer.
type reachError struct{ err error }

func (e *reachError) Error() string { return "cannot reach database: " + e.err.Error() }
func (e *reachError) Unwrap() error { return e.err }

// open connects to t and pings it within ctx. Unless create is set, a
// SQLite file must exist already.
func (t target) open(ctx context.Context, create bool) (*sqlx.DB, error) {
	var (
		db  *sqlx.DB
		err error
	)
	if t.driver == "sqlite3" {
		if !create {
			if err := sqliteMustExist(t.source); err != nil {
				return nil, &reachError{err}
			}
		}
		source := t.source
		if deadline, ok := ctx.Deadline(); ok {
			source = sqliteBusyTimeout(source, time.Until(deadline))
		}
		db, err = sqlite.Open(source)
	} else {
		db, err = sqlx.Open(t.driver, t.source)
	}
	if err != nil {
		return nil, &reachError{err}
	}
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		if t.driver == "sqlite3" && (strings.HasPrefix(err.Error(), "Invalid _") || strings.HasPrefix(err.Error(), "Missing '_auth")) {
			// go-sqlite3's refusal of a URI parameter's value
			// ("Invalid _busy_timeout: abc: …"), or of _auth without
			// _auth_user or _auth_pass: bad usage, as a bad parameter
			// of a MySQL DSN or a PostgreSQL URL is.
			return nil, usagef("--dsn: %v", err)
		}
		return nil, &reachError{err}
	}
	return db, nil
}

// sqliteBusyTimeout returns source with a busy timeout of left (at least
// 1 ms) when that is shorter than sqlite.Open's: SQLite's wait for
// another connection's write lock cannot be interrupted, so it must end
// by itself within --timeout. A busy timeout the source sets wins.
func sqliteBusyTimeout(source string, left time.Duration) string {
	if left >= sqlite.DefaultBusyTimeout {
		return source
	}
	ms := max(left.Milliseconds(), 1)
	if !strings.HasPrefix(source, "file:") {
		// A plain file name as a URI path: '%', '?' and '#' escaped; an
		// absolute one after an empty authority, so that //tmp/a.db is
		// not read as the authority "tmp".
		path := (&url.URL{Path: source}).EscapedPath()
		if strings.HasPrefix(path, "/") {
			path = "//" + path
		}
		source = "file:" + path
	}
	name, query, _ := strings.Cut(source, "?")
	q, err := url.ParseQuery(query)
	if err != nil || q.Has("_busy_timeout") || q.Has("_timeout") {
		return source
	}
	if query != "" {
		query += "&"
	}
	return name + "?" + query + "_busy_timeout=" + strconv.FormatInt(ms, 10)
}

// sqliteMustExist fails unless the file a SQLite path or file: URI names
// exists. In-memory databases pass.
func sqliteMustExist(source string) error {
	path, ok := sqliteFile(source)
	if !ok {
		return nil
	}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist) && looksLikeUserAtHost(path):
		return fmt.Errorf("SQLite file %q does not exist (a MySQL DSN names its network: user:pass@tcp(host:3306)/db)", maskDSN(path))
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("SQLite file %q does not exist (check the DSN; only 'schema apply' creates a database)", maskDSN(path))
	case err != nil:
		return err
	case fi.IsDir():
		return fmt.Errorf("SQLite path %q is a directory", maskDSN(path))
	}
	return nil
}

// looksLikeUserAtHost reports whether a SQLite path that does not exist
// is rather a MySQL DSN without its network, like user:pass@host/db.
func looksLikeUserAtHost(path string) bool {
	at := strings.IndexByte(path, '@')
	return at > 0 && !strings.ContainsRune(path[:at], '/')
}

// sqliteFile returns the file a SQLite path or "file:" URI names, and false
// for an in-memory database.
func sqliteFile(source string) (string, bool) {
	if source == ":memory:" {
		return "", false
	}
	rest, isURI := strings.CutPrefix(source, "file:")
	if !isURI {
		return source, true
	}
	name, query, _ := strings.Cut(rest, "?")
	q, _ := url.ParseQuery(query)
	if name == ":memory:" || q.Get("mode") == "memory" {
		return "", false
	}
	if strings.HasPrefix(name, "//") { // file://[host]/path
		if k := strings.IndexByte(name[2:], '/'); k >= 0 {
			name = name[2+k:]
		}
	}
	if p, err := url.PathUnescape(name); err == nil {
		name = p
	}
	return name, true
}

// session is one run of a command: its outputs, the global flags and,
// once opened, the database and store.
type session struct {
	stdout, stderr io.Writer
	g              *globals
	target         target
	db             *sqlx.DB
}

// open parses --dsn and --table, connects (see target.open) and returns
// the store.
func (s *session) open(ctx context.Context, create bool) (*jdbcstore.Store, error) {
	t, err := parseTarget(s.g.dsn.raw)
	if err != nil {
		return nil, err
	}
	if err := jdbcstore.ValidateTableName(s.g.table); err != nil {
		return nil, usagef("--table: %v", err)
	}
	db, err := t.open(ctx, create)
	if err != nil {
		return nil, err
	}
	s.target, s.db = t, db
	store, err := jdbcstore.New(db, jdbcstore.Config{Table: s.g.table, Dialect: t.dialect, Logger: s.logger()})
	if err != nil {
		return nil, usagef("%v", err)
	}
	return store, nil
}

// logger receives the store's warnings (from ApplySchema), on stderr.
func (s *session) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(s.stderr, &slog.HandlerOptions{
		Level: slog.LevelWarn,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
}

func (s *session) close() {
	if s.db != nil {
		_ = s.db.Close()
	}
}

// missingTable adds a hint to an error of st saying its table, or one of
// the table's columns, does not exist. A table created by an earlier
// release lacks the ordering columns until schema apply upgrades it: the
// hint says so when the table has the columns of every release's outbox
// table, which schema apply checks before it upgrades one, and otherwise
// that the table is no outbox table (one schema apply refuses).
func missingTable(ctx context.Context, err error, st *jdbcstore.Store) error {
	if err == nil {
		return nil
	}
	table := st.Table()
	var me *mysql.MySQLError
	isMySQL := errors.As(err, &me)
	switch {
	case (isMySQL && me.Number == 1146) || postgresMissing(err, "42P01") || strings.Contains(err.Error(), "no such table"):
		return fmt.Errorf("%w (is --table %s right? 'outboxctl schema apply' creates the table)", err, table)
	case (isMySQL && me.Number == 1054) || postgresMissing(err, "42703") || strings.Contains(err.Error(), "no such column"):
		cerr := st.CheckTable(ctx)
		var ce *core.ConfigError
		switch {
		case cerr == nil:
			return fmt.Errorf("%w (a table created by an earlier release? 'outboxctl schema apply' upgrades %s in place)", err, table)
		case errors.As(cerr, &ce):
			return fmt.Errorf("%w (%s is not an outbox table: it lacks some of the columns every release's outbox table has; is --table right?)", err, table)
		}
		return fmt.Errorf("%w (is --table %s right? 'outboxctl schema apply' upgrades an outbox table of an earlier release in place, and refuses any other table)", err, table)
	}
	return err
}
