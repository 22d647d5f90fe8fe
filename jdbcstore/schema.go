package jdbcstore

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"text/template"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/ctxerr"
)

// SchemaData is what a schema template ([Dialect.OutboxSchema],
// [Dialect.InboxSchema]) is executed with. Every name it returns is
// derived from a validated table name and quoted with the dialect's
// [Dialect.QuoteIdent].
type SchemaData struct {
	d     Dialect
	table string
}

// Table returns the quoted table name.
func (sd SchemaData) Table() string { return sd.d.QuoteIdent(sd.table) }

// Keys returns the quoted name of the table's companion table of ordering
// keys ("<table>_keys"): one row per key with the position of its last
// event, taken under a row lock by each transaction that publishes on the
// key.
func (sd SchemaData) Keys() string { return sd.d.QuoteIdent(keysTable(sd.table)) }

// keysTable is the name of table's ordering-keys table.
func keysTable(table string) string { return table + "_keys" }

// Index returns the quoted name of an index of the table: index names are
// global in some databases (SQLite, PostgreSQL), so they carry the table
// name ("<table>_<suffix>_idx"). PostgreSQL cuts every identifier to 63
// bytes, in each statement alike: with a table name of 48 characters the
// status_done index is "<table>_status_done_id".
func (sd SchemaData) Index(suffix string) string {
	return sd.d.QuoteIdent(sd.table + "_" + suffix + "_idx")
}

// Trigger returns the quoted name of a trigger on the table
// ("<table>_<suffix>_trg"; trigger names are global in SQLite).
func (sd SchemaData) Trigger(suffix string) string {
	return sd.d.QuoteIdent(sd.table + "_" + suffix + "_trg")
}

// renderSchema executes the dialect's outbox DDL template for table.
func renderSchema(d Dialect, table string) (string, error) {
	return renderTemplate(d, "schema", d.OutboxSchema(), table)
}

// renderTemplate executes one of the dialect's DDL templates for table;
// what names the template in errors.
func renderTemplate(d Dialect, what, src, table string) (string, error) {
	if strings.TrimSpace(src) == "" {
		return "", fmt.Errorf("outbox: jdbcstore: %s %s: the dialect has no DDL template", d.Name(), what)
	}
	tmpl, err := template.New(d.Name() + " " + what).Option("missingkey=error").Parse(src)
	if err != nil {
		return "", fmt.Errorf("outbox: jdbcstore: %s %s: %w", d.Name(), what, err)
	}
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, SchemaData{d: d, table: table}); err != nil {
		return "", fmt.Errorf("outbox: jdbcstore: %s %s: %w", d.Name(), what, err)
	}
	return buf.String(), nil
}

// splitStatements cuts a DDL script into statements, one per trailing
// ';'. Lines holding only a "--" comment are dropped, so comments may
// contain semicolons. Drivers such as go-sql-driver/mysql run one
// statement per Exec unless multiStatements is enabled.
func splitStatements(script string) []string {
	var (
		stmts []string
		cur   strings.Builder
	)
	for line := range strings.Lines(script) {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "--") {
			continue
		}
		cur.WriteString(line)
		if strings.HasSuffix(trimmed, ";") {
			stmts = append(stmts, strings.TrimSpace(cur.String()))
			cur.Reset()
		}
	}
	if rest := strings.TrimSpace(cur.String()); rest != "" {
		stmts = append(stmts, rest)
	}
	return stmts
}

// SchemaSQL returns the DDL that [Store.ApplySchema] runs for this
// store's dialect and table, for printing or for a migration tool.
func (s *Store) SchemaSQL() string { return s.schema }

// ApplySchema creates the outbox table, its indexes and its keys table if
// they do not exist. It is idempotent and safe to run at every start. A
// table created by an earlier release, without the ordering columns, is
// upgraded in place when the dialect implements [SchemaUpgrader] (every
// dialect of this module does): its upgrade statements run right after
// the table's CREATE TABLE, then the rest of the schema. Several nodes
// starting at once may all try; the upgrade a node loses to another is
// not an error. Where the dialect bounds its wait for table locks
// ([DDLLockTimeouter]: MySQL/MariaDB, PostgreSQL), a statement that meets
// a transaction open on the table is tried again every one to two
// seconds, with a WARN, until that transaction ends or ctx does, so that
// the table's other statements are not held behind it meanwhile. An
// existing table that lacks an outbox table's columns
// (one of the application's tables, or an inbox table, named by mistake)
// is refused with a *core.ConfigError of field Table before anything
// alters it, and so is an existing "<table>_keys" that is not an outbox
// keys table, or (SQLite, PostgreSQL, whose index names are global to a
// schema) an index or trigger of the schema that another table holds: one
// the outbox table kept when it was renamed away, say, which left the new
// table without it.
func (s *Store) ApplySchema(ctx context.Context) error {
	if ctx == nil {
		return core.ErrNilContext
	}
	err := s.withSchemaLock(ctx, s.table, func(ddl ddlConn) error {
		if err := checkSession(ctx, ddl.conn, s.dialect); err != nil {
			return err
		}
		found, err := ddl.createAll(ctx, s.schema, "schema", s.table, func() error {
			// Before the upgrade alters it: the table may be one of the
			// application's own, named by mistake.
			if err := checkTableShape(ctx, ddl.conn, s.dialect, s.table, "outbox", everyReleaseColumns()); err != nil {
				return err
			}
			if err := s.upgrade(ctx, ddl); err != nil {
				return fmt.Errorf("outbox: jdbcstore: upgrade %s table %q: %w", s.dialect.Name(), s.table, err)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if err := foreignObject(found, s.table, keysTable(s.table)); err != nil {
			return err
		}
		if err := s.checkKeysTable(ctx, ddl.conn); err != nil {
			return err
		}
		if err := s.upgradeKeys(ctx, ddl); err != nil {
			return fmt.Errorf("outbox: jdbcstore: upgrade %s keys table of %q: %w", s.dialect.Name(), s.table, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.shapeChecked.Store(true) // the table was created so, or checked before its upgrade
	s.dialect.CheckSetup(ctx, s.db, s.log)
	if s.dialect.Capabilities().SingleWriter && strings.Contains(s.schema, stalePosition) && s.keys.Load() == nil {
		s.keys.Store(newKeyCache())
	}
	if s.q.claimPinned != "" && strings.Contains(s.schema, s.dialect.QuoteIdent(pendingIndex(s.table))) {
		s.pinPending.Store(true)
	}
	if s.q.claimPinned != "" && strings.Contains(s.schema, s.dialect.QuoteIdent(deadIndex(s.table))) {
		s.pinDead.Store(true)
	}
	if s.q.claimNextPinned != "" && strings.Contains(s.schema, s.dialect.QuoteIdent(orderIndex(s.table))) {
		s.pinOrder.Store(true)
	}
	return nil
}

// ddlConn runs the schema statements of one ApplySchema: on the
// connection that holds the dialect's schema lock ([SchemaLocker]).
type ddlConn struct {
	conn *sql.Conn
	s    *Store
	// lockBounded: the session's wait for a table lock is bounded
	// ([DDLLockTimeouter]); a statement that met a transaction open on
	// the table is tried again after a pause (see exec).
	lockBounded bool
}

// ddlRetryPause is the pause between two tries of a schema statement
// whose bounded wait for a table lock ended (jitter: half of it to all
// of it): the statements of the table's other users, queued behind the
// waiting one, run meanwhile.
const ddlRetryPause = 2 * time.Second

// schemaObject is an index or trigger of a schema and the table holding
// it.
type schemaObject struct{ name, table string }

// createAll runs the statements of schema in order, and afterTable once
// the first one (the table's) ran. It returns the indexes and triggers
// create found already (see foreignObject). A statement's error is
// wrapped, naming what the schema is ("schema", "inbox schema") and table;
// afterTable's is returned as it is.
func (c ddlConn) createAll(ctx context.Context, schema, what, table string, afterTable func() error) ([]schemaObject, error) {
	var found []schemaObject
	for i, stmt := range splitStatements(schema) {
		o, err := c.create(ctx, stmt)
		if err != nil {
			return found, fmt.Errorf("outbox: jdbcstore: apply %s %s for table %q: %w", c.s.dialect.Name(), what, table, err)
		}
		if o != nil {
			found = append(found, *o)
		}
		if i == 0 {
			if err := afterTable(); err != nil {
				return found, err
			}
		}
	}
	return found, nil
}

// create runs one statement of a schema. A CREATE … IF NOT EXISTS of an
// index or trigger whose name is taken already is skipped where the
// dialect tells which table holds a name ([ObjectOwnerFinder]), as it
// would create nothing; create returns the object found (see
// foreignObject). PostgreSQL takes the table's SHARE lock before it finds
// that the index exists: a node starting while a transaction that wrote
// to the table stayed open waited for it, and every write to the table,
// on every node, waited behind the starting node in turn.
func (c ddlConn) create(ctx context.Context, stmt string) (found *schemaObject, err error) {
	if f, ok := c.s.dialect.(ObjectOwnerFinder); ok {
		if m := createdObjectRe.FindStringSubmatchIndex(stmt); m != nil && m[0] == 0 {
			name := strings.ReplaceAll(stmt[m[2]:m[3]], `""`, `"`)
			owner, err := f.TableOf(ctx, c.conn, name)
			if err != nil {
				return nil, fmt.Errorf("find the table of %q: %w", name, err)
			}
			if owner != "" {
				return &schemaObject{name: name, table: owner}, nil
			}
		}
	}
	return nil, c.exec(ctx, stmt)
}

// exec runs one schema statement, retrying lock contention. On a
// session whose lock wait is bounded, contention is a transaction open
// on the table: the statement is tried again every ddlRetryPause, with
// a WARN at the first try that met it and an INFO when it went through.
func (c ddlConn) exec(ctx context.Context, stmt string) error {
	if !c.lockBounded {
		_, err := retryBusy(ctx, c.s, func() (struct{}, error) {
			_, err := c.conn.ExecContext(ctx, stmt)
			return struct{}{}, err
		})
		return err
	}
	what, _, _ := strings.Cut(stmt, "\n")
	if len(what) > 80 {
		what = what[:80] + "…"
	}
	tries := 0
	_, err := retryBusyPaced(ctx, c.s, ddlRetryPause, ddlRetryPause, func() (struct{}, error) {
		_, err := c.conn.ExecContext(ctx, stmt)
		switch {
		case err != nil && c.s.dialect.Classify(err) == ClassBusy:
			if tries++; tries == 1 {
				c.s.log.LogAttrs(ctx, slog.LevelWarn, "outbox: a schema change waits for the transactions open on its table, which hold a lock it needs; it tries again every one to two seconds, and the table's other statements wait for it up to a second at each try",
					slog.String("statement", what), slog.Any("error", err))
			}
		case err == nil && tries > 0:
			c.s.log.LogAttrs(ctx, slog.LevelInfo, "outbox: the schema change went through", slog.String("statement", what), slog.Int("tries", tries+1))
		}
		return struct{}{}, err
	})
	if err != nil && tries > 0 {
		return fmt.Errorf("%w (transactions open on the table held a lock the schema change needs: end them, or apply the schema when the table is quiet)", err)
	}
	return err
}

// execEach runs every statement of script, whatever the ones before did
// (an upgrade an earlier process left half done is completed), and
// returns the first error.
func (c ddlConn) execEach(ctx context.Context, script string) error {
	var first error
	for _, stmt := range splitStatements(script) {
		if err := c.exec(ctx, stmt); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// withSchemaLock runs apply on one connection of the store's database,
// under the dialect's schema lock for name when it has one
// ([SchemaLocker]), so nodes that start at once apply the schema one
// after the other.
func (s *Store) withSchemaLock(ctx context.Context, name string, apply func(ddlConn) error) error {
	// Opening the connection may meet lock contention: SQLite's first
	// connection to a new file turns it to WAL, which fails at once while
	// another process's first connection writes to it (processes that
	// start together on a new file).
	conn, err := retryBusy(ctx, s, func() (*sql.Conn, error) { return s.db.Conn(ctx) })
	if err != nil {
		return fmt.Errorf("outbox: jdbcstore: apply %s schema for %q: %w", s.dialect.Name(), name, err)
	}
	defer conn.Close() //nolint:errcheck // returned to the pool
	release := func(bool) error { return nil }
	if l, ok := s.dialect.(SchemaLocker); ok {
		release, err = retryBusy(ctx, s, func() (func(bool) error, error) { return l.LockSchema(ctx, conn, name) })
		if err != nil {
			return fmt.Errorf("outbox: jdbcstore: apply %s schema for %q: take the schema lock: %w", s.dialect.Name(), name, err)
		}
	}
	ddl := ddlConn{conn: conn, s: s}
	if t, ok := s.dialect.(DDLLockTimeouter); ok {
		set, reset := t.DDLLockTimeout()
		if _, err := conn.ExecContext(ctx, set); err != nil {
			return errors.Join(fmt.Errorf("outbox: jdbcstore: apply %s schema for %q: bound the wait for table locks: %w", s.dialect.Name(), name, err), release(false))
		}
		ddl.lockBounded = true
		defer func() {
			if _, err := conn.ExecContext(context.WithoutCancel(ctx), reset); err != nil {
				// The session must not go back to the pool with its bound.
				_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			}
		}()
	}
	err = apply(ddl)
	if rerr := release(err == nil); rerr != nil && err == nil {
		err = fmt.Errorf("outbox: jdbcstore: apply %s schema for %q: release the schema lock: %w", s.dialect.Name(), name, rerr)
	}
	return err
}

// upgrade adds the ordering columns to a table that lacks them. Every
// statement of the upgrade is tried, whatever the ones before did, so a
// table an earlier upgrade left half done (a process stopped between two
// of SQLite's ALTERs) is completed: the upgrade succeeds when the columns
// are there at the end.
func (s *Store) upgrade(ctx context.Context, ddl ddlConn) error {
	u, ok := s.dialect.(SchemaUpgrader)
	if !ok || s.hasOrderColumns(ctx, ddl.conn) {
		return nil
	}
	script, err := renderTemplate(s.dialect, "upgrade", u.OutboxUpgrade(), s.table)
	if err != nil {
		return err
	}
	first := ddl.execEach(ctx, script)
	if first != nil && !s.hasOrderColumns(ctx, ddl.conn) {
		return first
	}
	if first == nil {
		s.log.LogAttrs(ctx, slog.LevelInfo, "outbox table upgraded: ordering columns added", slog.String("table", s.table))
	}
	return nil
}

// createdObjectRe finds the (double-quoted) name of each index and
// trigger a schema creates.
var createdObjectRe = regexp.MustCompile(`(?i)CREATE\s+(?:UNIQUE\s+)?(?:INDEX|TRIGGER)\s+IF\s+NOT\s+EXISTS\s+"((?:[^"]|"")+)"`)

// foreignObject makes sure that every index and trigger a schema found
// already (create skipped them) belongs to table (or to one of owners,
// the table's companion tables), where the dialect's names are global to
// a schema ([ObjectOwnerFinder]): one a renamed table kept (an outbox
// table archived under another name) made CREATE … IF NOT EXISTS create
// nothing for table, which then had no pending index (SQLite's claims,
// which name it, failed at every poll) nor the unique index and trigger
// that keep an ordering key's positions apart. It returns a
// *core.ConfigError of field Table naming the object and the table
// holding it. (Names compare without case: SQLite's are case-insensitive.)
func foreignObject(found []schemaObject, table string, owners ...string) error {
	for _, o := range found {
		if !strings.EqualFold(o.table, table) && !slices.ContainsFunc(owners, func(n string) bool { return strings.EqualFold(n, o.table) }) {
			return &core.ConfigError{Field: "Table", Msg: fmt.Sprintf(
				"%q: the index or trigger %q its schema creates belongs to the table %q (a table renamed away keeps the names of its indexes and triggers), so %q would have none: drop or rename %q's, then apply the schema again",
				table, o.name, o.table, table, o.table)}
		}
	}
	return nil
}

// everyReleaseColumns are the columns of every release's outbox table:
// all but the ordering columns, which an upgrade adds.
func everyReleaseColumns() []string { return recordColumns[:len(recordColumns)-3] }

// CheckTable reports whether the store's table is an outbox table, of
// this release or of an earlier one (which ApplySchema upgrades in
// place): nil then; a *core.ConfigError of field Table when the table
// exists but lacks some of the columns every release's outbox table has
// (another table, which ApplySchema refuses); the read's error when the
// table cannot be read (it does not exist, say). It only reads.
func (s *Store) CheckTable(ctx context.Context) error {
	if ctx == nil {
		return core.ErrNilContext
	}
	err := checkTableShapeOn(ctx, s.db, s.dialect, s.table, "outbox", everyReleaseColumns())
	if err == nil {
		s.shapeChecked.Store(true)
	}
	return err
}

// checkTableShapeOn is checkTableShape on a connection of db's own (the
// stores' CheckTable).
func checkTableShapeOn(ctx context.Context, db *sqlx.DB, d Dialect, table, what string, cols []string) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("outbox: jdbcstore: check %s table %q: %w", what, table, err)
	}
	defer conn.Close()
	return checkTableShape(ctx, conn, d, table, what, cols)
}

// checkTableShape makes sure that table, which exists now, has every
// column in cols (those of every release's outbox or inbox table): a
// table of the application's named by mistake, or an inbox table given as
// the outbox's, is refused before anything alters it or writes to it. It
// returns a *core.ConfigError of field Table when the table is there but
// lacks a column, the probe's error when even the table cannot be read.
func checkTableShape(ctx context.Context, conn *sql.Conn, d Dialect, table, what string, cols []string) error {
	from := " FROM " + d.QuoteIdent(table) + " WHERE 1 = 0"
	rows, err := conn.QueryContext(ctx, "SELECT "+strings.Join(cols, ", ")+from)
	if err == nil {
		err = rows.Close()
	}
	if err == nil {
		return nil
	}
	if cerr := ctxerr.Of(ctx); cerr != nil {
		// The probe ended with ctx (on MySQL/MariaDB the driver closes
		// the connection, and a second probe would fail with "bad
		// connection", hiding why).
		return fmt.Errorf("outbox: jdbcstore: read %s table %q: %w (%w)", what, table, err, cerr)
	}
	if rows, rerr := conn.QueryContext(ctx, "SELECT 1"+from); rerr != nil {
		return fmt.Errorf("outbox: jdbcstore: read %s table %q: %w", what, table, rerr)
	} else if rerr := rows.Close(); rerr != nil {
		return fmt.Errorf("outbox: jdbcstore: read %s table %q: %w", what, table, rerr)
	}
	// The probe's error goes in the message, not the chain: printed
	// first, the driver's text read as if it were the problem.
	return &core.ConfigError{Field: "Table", Msg: fmt.Sprintf(
		"names the existing table %q, which is not an %s table (it lacks some of the columns %s: %v): name another table",
		table, what, strings.Join(cols, ", "), err)}
}

// hasOrderColumns reports whether the table has the ordering columns.
func (s *Store) hasOrderColumns(ctx context.Context, conn *sql.Conn) bool {
	return runs(ctx, conn, "SELECT order_key, order_seq, order_skip FROM "+s.dialect.QuoteIdent(s.table)+" WHERE 1 = 0")
}

// runs reports whether query runs on q: a probe such as a SELECT of
// columns WHERE 1 = 0, which fails when one is missing.
func runs(ctx context.Context, q queryer, query string) bool {
	rows, err := q.QueryContext(ctx, query)
	if err != nil {
		return false
	}
	return rows.Close() == nil
}

// checkPins settles, once, which indexes the store's queries may name:
// SQLite's pending and dead indexes (claims, polls, dead-letter lists,
// DEAD by type) and the dialect's dead-by-type hint ([DeadTypeHinter]).
// An index is named only when the dialect can say it exists with the
// columns the query needs ([IndexChecker]). A failed lookup names none
// this time and is tried again on the next call.
func (s *Store) checkPins(ctx context.Context) {
	if s.pinsKnown.Load() {
		return
	}
	s.pinMu.Lock()
	defer s.pinMu.Unlock()
	if s.pinsKnown.Load() {
		return
	}
	if err := s.lookUpPins(ctx); err != nil {
		s.log.DebugContext(ctx, "outbox: jdbcstore: index lookup failed", "table", s.table, "error", err)
		return
	}
	s.pinsKnown.Store(true)
}

func (s *Store) lookUpPins(ctx context.Context) error {
	ic, ok := s.dialect.(IndexChecker)
	if !ok {
		return nil
	}
	if s.q.claimPinned != "" {
		pending, err := ic.HasIndex(ctx, s.db, s.table, pendingIndex(s.table))
		if err != nil {
			return err
		}
		dead, err := ic.HasIndex(ctx, s.db, s.table, deadIndex(s.table), "event_type")
		if err != nil {
			return err
		}
		s.pinPending.Store(s.pinPending.Load() || pending)
		s.pinDead.Store(s.pinDead.Load() || dead)
	}
	if s.q.claimNextPinned != "" {
		order, err := ic.HasIndex(ctx, s.db, s.table, orderIndex(s.table), "order_key", "order_seq")
		if err != nil {
			return err
		}
		s.pinOrder.Store(s.pinOrder.Load() || order)
	}
	if h, ok := s.dialect.(DeadTypeHinter); ok {
		index, columns, clause := h.DeadTypeHint()
		found, err := ic.HasIndex(ctx, s.db, s.table, index, columns...)
		if err != nil {
			return err
		}
		if found {
			s.deadTypeHint.Store(&clause)
		}
	}
	return nil
}
