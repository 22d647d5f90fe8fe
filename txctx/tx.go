package txctx

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/ctxerr"
)

// Context keys are unexported types so no other package can collide with them.
type txKey struct{}

type txState uint8

const (
	stateActive     txState = iota
	stateFinishing          // Commit or Rollback in progress: no more hooks
	stateCommitted          // committed; after-commit hooks ran or are running
	stateRolledBack         // rolled back or commit failed
	stateNoTx               // adopted from a nil transaction: never active
)

func (s txState) String() string {
	switch s {
	case stateActive:
		return "active"
	case stateFinishing:
		return "finishing"
	case stateCommitted:
		return "committed"
	case stateNoTx:
		return "no transaction"
	default:
		return "rolled back"
	}
}

const (
	hookAfterCommit   = "after_commit"
	hookAfterRollback = "after_rollback"
	hookBeforeCommit  = "before_commit"
)

// Tx is a database transaction with after-commit and after-rollback hooks.
// It implements [core.Tx]. A Tx comes from [Manager.Do] (then the Manager
// commits or rolls it back) or from [Adopt], [AdoptX], [Manager.Adopt] or
// [Manager.AdoptX] (then the caller commits or rolls back through it).
//
// All methods are safe for concurrent use; the statements themselves follow
// the rules of [sql.Tx]: one connection carries them, so a statement must
// not run while another's rows are still being read (pgx then fails it
// with "conn busy", and its stdlib adapter may panic reading the other
// rows). Publishing an ordered event reads its key's position on the
// transaction: publish on one transaction from one goroutine at a time.
type Tx struct {
	tx      *sql.Tx
	txx     *sqlx.Tx // nil when adopted from a plain *sql.Tx
	db      *sql.DB  // owning database; nil when unknown (package-level Adopt)
	managed bool     // owned by Manager.Do
	logger  *slog.Logger

	// mayHaveFailed is set when a statement failed, or may have failed
	// where this Tx cannot see it (see MayHaveFailed).
	mayHaveFailed atomic.Bool
	// rowsUndone is set when a row written in the transaction may have
	// been removed by a rollback to a savepoint (see RowsMayBeUndone).
	rowsUndone atomic.Bool

	mu    sync.Mutex
	state txState
	// adopted is the context given to Adopt (nil for Do's own
	// transactions): when it ended, a *sql.Tx begun with it may have been
	// rolled back by database/sql (see endedOutside).
	adopted       context.Context
	afterCommit   []func()
	afterRollback []func()
	beforeCommit  []commitCheck
	values        map[any]any // see TxValue
}

// commitCheck is a check registered with BeforeCommit.
type commitCheck struct {
	key   any
	check func(ctx context.Context) error
}

var (
	_ core.Tx               = (*Tx)(nil)
	_ core.CommitChecker    = (*Tx)(nil)
	_ core.TxDatabase       = (*Tx)(nil)
	_ core.StatementWatcher = (*Tx)(nil)
	_ core.SavepointWatcher = (*Tx)(nil)
	_ core.TxValues         = (*Tx)(nil)
)

func newTx(tx *sql.Tx, txx *sqlx.Tx, db *sql.DB, managed bool, logger *slog.Logger) *Tx {
	t := &Tx{tx: tx, txx: txx, db: db, managed: managed, logger: logger}
	if tx == nil {
		t.state = stateNoTx
	}
	if !managed {
		// The caller holds the raw transaction and may run statements on
		// it that this Tx never sees.
		t.mayHaveFailed.Store(true)
		t.rowsUndone.Store(true)
	}
	return t
}

// ExecContext runs a statement on the transaction. It implements [core.Execer].
// On a Tx adopted from a nil transaction it returns [core.ErrNoTransaction].
func (t *Tx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if t.tx == nil {
		return nil, core.ErrNoTransaction
	}
	t.watchRollback(q)
	res, err := t.tx.ExecContext(ctx, q, args...)
	if err != nil {
		t.failed()
	}
	return res, err
}

// failed notes a statement that failed. The database may have rolled the
// whole transaction back (MySQL/MariaDB on a deadlock; SQLite on a
// constraint declared ON CONFLICT ROLLBACK, or a trigger's RAISE(ROLLBACK));
// if the code goes on, a later statement may even begin another one (a
// SAVEPOINT on SQLite, PostgreSQL's COMMIT AND CHAIN): the transaction
// counts as one that may have failed, and whose rows may be undone.
func (t *Tx) failed() {
	t.mayHaveFailed.Store(true)
	t.rowsUndone.Store(true)
}

// watchRollback notes a statement that may roll back to a savepoint, or
// the whole transaction: any whose text holds "rollback" or "abort"
// (PostgreSQL's ROLLBACK) in any case (a ROLLBACK TO SAVEPOINT, perhaps
// after a comment). A false alarm costs the publishing transaction one
// read after commit (see RowsMayBeUndone). Once both this and
// MayHaveFailed are noted, the statements are not read again. A statement that runs others out of its sight (see
// classify) may also have rolled back, to a savepoint or the whole
// transaction, and report success: the transaction then counts as one
// that may have failed too (see MayHaveFailed). A SAVEPOINT after a
// statement that may have failed may begin another transaction (SQLite,
// after a failure that rolled the whole one back): its rows may be undone.
func (t *Tx) watchRollback(q string) {
	if t.rowsUndone.Load() && t.mayHaveFailed.Load() {
		return // nothing more to learn
	}
	switch classify(q) {
	case unseenStatement:
		t.mayHaveFailed.Store(true)
		t.rowsUndone.Store(true)
		return
	case savepointStatement:
		if t.mayHaveFailed.Load() {
			t.rowsUndone.Store(true)
			return
		}
	}
	if !t.rowsUndone.Load() && mayRollBack(q) {
		t.rowsUndone.Store(true)
	}
}

// statementKind is what classify makes of a statement.
type statementKind uint8

const (
	plainStatement     statementKind = iota // one statement of a plain keyword (see plainKeyword), or none
	savepointStatement                      // one SAVEPOINT
	unseenStatement                         // anything else
)

// classify reads q's first keyword, past white space and comments: one
// statement with a keyword of plainKeyword runs no code of its own able
// to roll back and report success. Anything else may (unseenStatement): a
// stored procedure (CALL: on MySQL/MariaDB its exit handler may run
// ROLLBACK), a prepared statement (EXECUTE), a compound statement
// (MariaDB's BEGIN NOT ATOMIC ... END, IF ... END IF: a CONTINUE handler
// in it may swallow a deadlock that rolled the transaction back),
// MariaDB's SET STATEMENT ... FOR, an executable comment (/*! ... */),
// several statements in one string (a ';' followed by more than white
// space), PostgreSQL's PREPARE TRANSACTION. A false alarm (a ';' in a
// string literal, a comment nested in a comment) costs the transaction a
// check before and a read after commit, as does a SET mentioning
// autocommit or completion_type anywhere (a string holding the word
// included). It reads the statement's start, and the rest for a ';' (and,
// after SET, those words) only.
func classify(q string) statementKind {
	q, ok := skipComments(q)
	if !ok {
		return unseenStatement
	}
	if q == "" {
		return plainStatement // nothing but comments: the server runs nothing
	}
	word, rest := keyword(q)
	kind := unseenStatement
	switch {
	case word == "set":
		// MariaDB's SET STATEMENT ... FOR <statement> runs any statement;
		// SET PASSWORD and SET DEFAULT ROLE commit the transaction, as
		// does setting autocommit on (setting it off after that, or after
		// the server rolled the transaction back, begins another); and
		// completion_type makes a COMMIT begin another, or end the
		// session.
		after, ok := skipComments(rest)
		if ok {
			next, _ := keyword(after)
			lower := strings.ToLower(after)
			switch {
			case next == "statement" || next == "password" || next == "default" || next == "role":
			case strings.Contains(lower, "autocommit") || strings.Contains(lower, "completion_type"):
			default:
				kind = plainStatement
			}
		}
	case word == "savepoint":
		kind = savepointStatement
	case plainKeyword(word):
		kind = plainStatement
	}
	if kind == unseenStatement {
		return kind
	}
	if i := strings.IndexByte(q, ';'); i >= 0 && strings.TrimRight(q[i+1:], sqlSpace+";") != "" {
		return unseenStatement
	}
	return kind
}

// skipComments returns q past leading white space and comments; false
// for a comment that runs (MySQL/MariaDB's /*! ... */, /*M! ... */), an
// optimizer hint (/*+ ... */) or a comment nested in a comment
// (PostgreSQL ends it at the matching */ only), which the caller takes
// as a statement it cannot see through.
func skipComments(q string) (string, bool) {
	for {
		q = strings.TrimLeft(q, sqlSpace)
		switch {
		case strings.HasPrefix(q, "/*!") || strings.HasPrefix(q, "/*M!") || strings.HasPrefix(q, "/*+"):
			return q, false
		case strings.HasPrefix(q, "/*"):
			end := strings.Index(q[2:], "*/")
			if end < 0 {
				return "", true // an unterminated comment: nothing runs
			}
			if strings.Contains(q[2:2+end], "/*") {
				return q, false
			}
			q = q[2+end+2:]
		case strings.HasPrefix(q, "--") || strings.HasPrefix(q, "#"):
			end := strings.IndexByte(q, '\n')
			if end < 0 {
				return "", true
			}
			q = q[end+1:]
		default:
			return q, true
		}
	}
}

// keyword returns q's leading word in lower case when it is at most 9
// ASCII letters long (every keyword plainKeyword knows), "" otherwise,
// and what follows it.
func keyword(q string) (string, string) {
	var w [9]byte
	n := 0
	for n < len(q) && n < len(w) {
		c := q[n] | 0x20
		if c < 'a' || c > 'z' {
			break
		}
		w[n] = c
		n++
	}
	if n == 0 || n < len(q) && isIdentByte(q[n]) {
		return "", q // no keyword, or a longer word than any plain one
	}
	return string(w[:n]), q[n:]
}

// sqlSpace is the white space a statement may begin or end with
// (MariaDB also takes \v).
const sqlSpace = " \t\r\n\f\v"

// plainKeyword reports whether a statement beginning with word (lower
// case) runs no code of its own able to roll back and report success, nor
// ends the transaction: queries and writes (their triggers and stored
// functions may not commit or roll back), RELEASE SAVEPOINT. A ROLLBACK
// (ABORT) is not one: it may have ended the transaction, after which a
// MySQL/MariaDB session writes in autocommit mode; nor is a COMMIT (END),
// which PostgreSQL answers with a rollback, and no error, in a
// transaction a failed statement aborted (COMMIT AND CHAIN then begins
// another, which the outbox's own COMMIT would commit); nor are DDL,
// LOCK TABLES, GRANT and the like, which MySQL/MariaDB commit implicitly:
// the events before them are then stored whatever follows, and a hidden
// rollback later in the session (a deadlock met reading a query's rows)
// removes only the events after them, which the check before commit,
// looking at the first event, does not see.
func plainKeyword(word string) bool {
	switch word {
	case "select", "insert", "update", "delete", "replace", "with", "values", "table", "merge",
		"show", "explain", "describe", "desc", "release", "comment", "copy", "notify", "listen", "unlisten":
		return true
	}
	return false
}

// isIdentByte reports whether c can continue an SQL identifier.
func isIdentByte(c byte) bool {
	return c == '_' || c == '$' || c >= '0' && c <= '9' || c|0x20 >= 'a' && c|0x20 <= 'z' || c >= 0x80
}

// mayRollBack reports whether q holds "rollback" or "abort" in any ASCII
// case. Both words have a 'b' (rare in SQL), which strings.IndexByte finds
// many bytes at a time: each one found is checked as the b of either. It
// allocates nothing: every statement of a managed transaction passes
// through it (strings.ToLower would copy the statement, and
// strings.EqualFold at every offset took as long as SQLite's INSERT
// itself). SQL keywords are ASCII, so Unicode folding (the Kelvin sign as
// a "k") is not wanted.
func mayRollBack(q string) bool {
	for _, b := range [2]byte{'b', 'B'} {
		for i := strings.IndexByte(q, b); i >= 0; {
			if i >= 1 && hasFoldASCII(q[i-1:], "abort") || i >= 4 && hasFoldASCII(q[i-4:], "rollback") {
				return true
			}
			j := strings.IndexByte(q[i+1:], b)
			if j < 0 {
				break
			}
			i += 1 + j
		}
	}
	return false
}

// hasFoldASCII reports whether s begins with word (lower-case ASCII) in
// any ASCII case.
func hasFoldASCII(s, word string) bool {
	if len(s) < len(word) {
		return false
	}
	for j := 0; j < len(word); j++ {
		if s[j]|0x20 != word[j] {
			return false
		}
	}
	return true
}

// QueryContext runs a query on the transaction. An error met while reading
// the rows is out of this Tx's sight, so the transaction then counts as one
// that may have failed (see [Tx.MayHaveFailed]). On a Tx adopted from a nil
// transaction it returns [core.ErrNoTransaction].
func (t *Tx) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if t.tx == nil {
		return nil, core.ErrNoTransaction
	}
	t.mayHaveFailed.Store(true)
	t.watchRollback(q)
	rows, err := t.tx.QueryContext(ctx, q, args...)
	if err != nil {
		t.failed()
	}
	return rows, err
}

// QueryRowContext runs a query expected to return at most one row on the
// transaction. Its error may only come with the row, at Scan (MySQL
// reports a deadlock met by a locking read of several rows there), out of
// this Tx's sight, so the transaction then counts as one that may have
// failed (see [Tx.MayHaveFailed]), as with QueryContext. A *sql.Row cannot
// carry an error from outside database/sql: on a Tx adopted from a nil
// transaction (see [Adopt]) it panics, as a nil *sql.Tx's does; check
// [Tx.Active] first.
func (t *Tx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	t.mayHaveFailed.Store(true)
	t.watchRollback(q)
	return t.tx.QueryRowContext(ctx, q, args...)
}

// SQL returns the underlying *sql.Tx (nil for a Tx adopted from a nil
// transaction). Do not commit or roll it back
// directly: hooks only run when the transaction ends through this package.
// Statements run on it are out of this Tx's sight (see [Tx.MayHaveFailed]).
func (t *Tx) SQL() *sql.Tx {
	t.mayHaveFailed.Store(true)
	t.rowsUndone.Store(true)
	return t.tx
}

// Sqlx returns the underlying *sqlx.Tx, or nil for a transaction adopted
// from a plain *sql.Tx with [Adopt] or [Manager.Adopt]. The same rules as
// for [Tx.SQL] apply.
func (t *Tx) Sqlx() *sqlx.Tx {
	t.mayHaveFailed.Store(true)
	t.rowsUndone.Store(true)
	return t.txx
}

// MayHaveFailed reports whether a statement on the transaction failed, or
// may have failed unseen: the raw transaction was taken with [Tx.SQL] or
// [Tx.Sqlx], the transaction was adopted (its owner holds the raw one), or
// a query ran through [Tx.QueryContext] or [Tx.QueryRowContext] (an error
// while reading its rows is not seen here), or a statement ran that is
// not one plain statement, or a ROLLBACK (a stored procedure's CALL, which
// may roll the transaction back in an exit handler and return success, a
// prepared statement's EXECUTE, a compound statement, several statements
// in one string: see the README's "Guarantees"). It implements [core.StatementWatcher]. On MySQL and MariaDB
// the outbox store checks before commit that the database did not roll the
// transaction back on its own, or in a procedure, which it only does in
// answer to such statements; a transaction for which MayHaveFailed is
// false skips that check and its round trip.
func (t *Tx) MayHaveFailed() bool { return t.mayHaveFailed.Load() }

// RowsMayBeUndone reports whether a row written in the transaction may
// have been removed before commit by a rollback to a savepoint (or of
// the whole transaction, which PostgreSQL's COMMIT then only warns
// about): a statement holding "rollback" (ROLLBACK TO SAVEPOINT) or
// "abort" (PostgreSQL's ABORT), one that is not one plain statement (see
// [Tx.MayHaveFailed]), or one that returned an error from ExecContext or
// QueryContext (the database may have rolled the whole transaction back,
// and a later statement begun another; an error met reading a query's
// rows, or at Scan, is not seen here, but a SAVEPOINT after such a query
// counts), ran through
// [Tx.ExecContext], [Tx.QueryContext] or [Tx.QueryRowContext], the raw
// transaction was taken with [Tx.SQL] or [Tx.Sqlx], or the transaction was
// adopted. It implements [core.SavepointWatcher]: the outbox then reads
// after commit which of the transaction's events are stored, one query,
// and delivers only those (none, should that read fail: the poller
// delivers those that are stored).
func (t *Tx) RowsMayBeUndone() bool { return t.rowsUndone.Load() }

// TxValue returns the value kept under key in this transaction, for as
// long as the Tx lives. When there is none it stores init() and returns
// it, or returns nil when init is nil. key must be comparable with ==
// (as a map key): TxValue panics otherwise; init runs under the Tx's lock
// and must not call the Tx. It implements
// [core.TxValues]: the outbox keeps there which publish inserted each
// event id last, once a row may have been undone (see
// [Tx.RowsMayBeUndone]).
func (t *Tx) TxValue(key any, init func() any) any {
	t.mu.Lock()
	defer t.mu.Unlock()
	if v, ok := t.values[key]; ok || init == nil {
		return v
	}
	if t.values == nil {
		t.values = make(map[any]any)
	}
	v := init()
	t.values[key] = v
	return v
}

// Database returns the database the transaction belongs to: the Manager's
// for transactions begun or adopted through a [Manager], nil for the
// package-level [Adopt] and [AdoptX]. The outbox store refuses to insert on
// a transaction of another database ([core.ErrForeignTx]). It implements
// [core.TxDatabase].
func (t *Tx) Database() *sql.DB { return t.db }

// BeforeCommit registers check to run once, just before the transaction
// commits, in registration order; a non-nil key registered before on this
// transaction is ignored. The key must be comparable with == (as a map
// key: not a slice, a map or a func, nor a value holding one): BeforeCommit
// panics otherwise, and the transaction rolls back as for any panic in
// fn. If a check fails, the transaction is rolled back
// instead, the after-rollback hooks run, and the commit ([Tx.Commit] or
// [Manager.Do]) returns an error wrapping the check's error. Checks run on
// the transaction with a context that is not cancelled ([Manager.Do]'s ctx
// without its cancellation; [context.Background] for [Tx.Commit]). A check
// that panics rolls the transaction back (the after-rollback hooks run)
// and the panic goes on. On a transaction that is no longer active it
// does nothing and logs a warning.
// It implements [core.CommitChecker]: the outbox store uses it on MySQL and
// MariaDB to notice a transaction the server already rolled back.
func (t *Tx) BeforeCommit(key any, check func(ctx context.Context) error) {
	if check == nil {
		return
	}
	if state := t.addCheck(key, check); state != stateActive {
		t.logger.LogAttrs(context.Background(), slog.LevelWarn,
			"outbox: hook registered on a finished transaction is ignored",
			slog.String("hook", hookBeforeCommit), slog.String("tx_state", state.String()))
	}
}

// addCheck registers check under key unless a check of key is there
// already, on an active transaction; it returns the transaction's state.
// The lock is released however the comparison of keys ends (a key whose
// value holds an uncomparable one panics there): left locked, the
// rollback of the panicking transaction waited for it for ever.
func (t *Tx) addCheck(key any, check func(ctx context.Context) error) txState {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.state != stateActive {
		return t.state
	}
	if key != nil {
		for _, c := range t.beforeCommit {
			if c.key == key {
				return t.state // the store's check, registered at its first insert: the usual case
			}
		}
		// Checked once per new key, not at every registration (each
		// publish on MySQL): a key holding an uncomparable value would
		// panic only when compared, a later registration.
		if !reflect.ValueOf(key).Comparable() {
			panic(fmt.Sprintf("outbox: txctx: BeforeCommit key of type %T is not comparable (==); use a comparable key, as for a map", key))
		}
	}
	t.beforeCommit = append(t.beforeCommit, commitCheck{key: key, check: check})
	return t.state
}

// Active reports whether the transaction can still be written to and accept
// hooks. It is false once Commit or Rollback has started, whether or not
// it succeeded, and always for a Tx adopted from a nil transaction.
func (t *Tx) Active() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.state == stateActive
}

// AfterCommit registers fn to run once, only after the transaction commits
// successfully. Hooks run in registration order after the commit, outside any
// lock; a panic in fn is recovered and logged. On a transaction that is no
// longer active it does nothing and logs a warning. A nil fn is ignored.
func (t *Tx) AfterCommit(fn func()) { t.register(hookAfterCommit, fn) }

// AfterRollback registers fn to run once, only after the transaction rolls
// back: explicitly, because the function given to [Manager.Do] failed or
// panicked, or because the commit failed; not when its *sql.Tx was ended
// before, outside this package (nor, for an adopted transaction, when
// database/sql rolled it back for its ended context before the Commit: see
// [Adopt]). Otherwise it behaves like [Tx.AfterCommit].
func (t *Tx) AfterRollback(fn func()) { t.register(hookAfterRollback, fn) }

func (t *Tx) register(kind string, fn func()) {
	if fn == nil {
		return
	}
	t.mu.Lock()
	state := t.state
	if state == stateActive {
		if kind == hookAfterCommit {
			t.afterCommit = append(t.afterCommit, fn)
		} else {
			t.afterRollback = append(t.afterRollback, fn)
		}
	}
	t.mu.Unlock()
	if state != stateActive {
		t.logger.LogAttrs(context.Background(), slog.LevelWarn,
			"outbox: hook registered on a finished transaction is ignored",
			slog.String("hook", kind), slog.String("tx_state", state.String()))
	}
}

// Commit commits an adopted transaction, then runs the after-commit hooks.
// If a check registered with [Tx.BeforeCommit] fails, the transaction is
// rolled back instead; if it or the commit fails, the error is returned
// wrapped and the after-rollback hooks run instead. A second Commit or
// Rollback returns [ErrTxDone], and so does one on a transaction whose
// *sql.Tx was ended outside this package (committed or rolled back
// directly, or rolled back by database/sql when its BeginTx context
// ended): whether it committed is unknown then, and no hooks run. On a
// transaction owned by [Manager.Do] it returns [ErrManagedTx], on one
// adopted from a nil transaction [core.ErrNoTransaction].
func (t *Tx) Commit() error {
	if t.tx == nil {
		return core.ErrNoTransaction
	}
	if t.managed {
		return ErrManagedTx
	}
	return t.commit(context.Background())
}

// Rollback rolls back an adopted transaction, then runs the after-rollback
// hooks (also when the rollback itself reports an error, since the
// transaction did not commit). A second Commit or Rollback returns
// [ErrTxDone], as does one on a transaction ended outside this package,
// without running hooks (see [Tx.Commit]); on a transaction owned by [Manager.Do] it returns
// [ErrManagedTx], on one adopted from a nil transaction
// [core.ErrNoTransaction].
func (t *Tx) Rollback() error {
	if t.tx == nil {
		return core.ErrNoTransaction
	}
	if t.managed {
		return ErrManagedTx
	}
	return t.rollback()
}

// finish moves an active transaction to stateFinishing and hands out its
// hooks. ok is false when the transaction was already finishing or done.
func (t *Tx) finish() (checks []commitCheck, commitHooks, rollbackHooks []func(), ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.state != stateActive {
		return nil, nil, nil, false
	}
	t.state = stateFinishing
	checks, commitHooks, rollbackHooks = t.beforeCommit, t.afterCommit, t.afterRollback
	t.beforeCommit, t.afterCommit, t.afterRollback = nil, nil, nil
	return checks, commitHooks, rollbackHooks, true
}

func (t *Tx) setState(s txState) {
	t.mu.Lock()
	t.state = s
	t.mu.Unlock()
}

func (t *Tx) commit(ctx context.Context) error {
	checks, commitHooks, rollbackHooks, ok := t.finish()
	if !ok {
		return ErrTxDone
	}
	if err := t.runChecks(ctx, checks, rollbackHooks); err != nil {
		notCommitted := fmt.Errorf("outbox: commit: check before commit failed, rolled back: %w", err)
		if rbErr := t.abort(rollbackHooks); rbErr != nil && !errors.Is(rbErr, sql.ErrTxDone) {
			return errors.Join(notCommitted, fmt.Errorf("outbox: rollback: %w", rbErr))
		}
		return notCommitted
	}
	if err := t.tx.Commit(); err != nil {
		t.setState(stateRolledBack)
		if errors.Is(err, sql.ErrTxDone) {
			return t.endedOutside("commit")
		}
		t.runHooks(hookAfterRollback, rollbackHooks)
		return fmt.Errorf("outbox: commit: %w", err)
	}
	t.setState(stateCommitted)
	t.runHooks(hookAfterCommit, commitHooks)
	return nil
}

// runChecks runs the checks registered with BeforeCommit and returns the
// first failure. A check that panics (or calls runtime.Goexit) leaves no
// transaction open: it is rolled back and the after-rollback hooks run
// before the panic goes on.
func (t *Tx) runChecks(ctx context.Context, checks []commitCheck, rollbackHooks []func()) error {
	returned := false
	defer func() {
		if returned {
			return
		}
		if err := t.abort(rollbackHooks); err != nil && !errors.Is(err, sql.ErrTxDone) {
			t.logger.LogAttrs(context.Background(), slog.LevelError,
				"outbox: rollback after a check before commit panicked failed", slog.String("error", err.Error()))
		}
	}()
	for _, c := range checks {
		if err := c.check(ctx); err != nil {
			returned = true
			return err
		}
	}
	returned = true
	return nil
}

func (t *Tx) rollback() error {
	_, _, rollbackHooks, ok := t.finish()
	if !ok {
		return ErrTxDone
	}
	if err := t.abort(rollbackHooks); errors.Is(err, sql.ErrTxDone) {
		return t.endedOutside("rollback")
	} else if err != nil {
		return fmt.Errorf("outbox: rollback: %w", err)
	}
	return nil
}

// abort rolls the finishing transaction back, marks it rolled back
// and runs its after-rollback hooks (also when the rollback reports an
// error: it did not commit), unless the *sql.Tx was ended outside this
// package (sql.ErrTxDone: it may have committed). It returns the
// rollback's error.
func (t *Tx) abort(hooks []func()) error {
	err := t.tx.Rollback()
	t.setState(stateRolledBack)
	if !errors.Is(err, sql.ErrTxDone) {
		t.runHooks(hookAfterRollback, hooks)
	}
	return err
}

// endedOutside is the error of op (commit, rollback) on a transaction
// whose *sql.Tx was ended before (sql.ErrTxDone): committed or rolled
// back directly (through [Tx.SQL], say), or rolled back by database/sql
// when the context it was begun with ended. Which one is unknown (a
// context that ended after a direct commit looks the same), so neither
// kind of hook runs: after-rollback hooks ran after a direct commit. When
// the context given to Adopt has ended, the error wraps its error too.
func (t *Tx) endedOutside(op string) error {
	if t.adopted != nil && t.adopted.Err() != nil {
		return fmt.Errorf("outbox: %s: the transaction was ended before: its context ended (database/sql then rolls it back), or its *sql.Tx was committed or rolled back directly; which is unknown, so no hooks ran: %w: %w",
			op, ErrTxDone, ctxerr.Of(t.adopted))
	}
	return fmt.Errorf("outbox: %s: the transaction was ended outside txctx (its *sql.Tx committed or rolled back directly, or rolled back by database/sql when its context ended), so no hooks ran: %w", op, ErrTxDone)
}

func (t *Tx) runHooks(kind string, hooks []func()) { t.runHooksFrom(kind, hooks, 0) }

// runHooksFrom runs hooks[from:]. A hook that calls runtime.Goexit ends
// the goroutine (the caller's), but the hooks after it still run while it
// unwinds: one of them may hand a committed event to the dispatcher.
func (t *Tx) runHooksFrom(kind string, hooks []func(), from int) {
	next := from
	defer func() {
		if next < len(hooks) { // hooks[next-1] called runtime.Goexit
			t.runHooksFrom(kind, hooks, next)
		}
	}()
	for next < len(hooks) {
		i := next
		next++
		t.runHook(kind, i, hooks[i])
	}
}

// runHook runs one hook and contains its panic: the remaining hooks must run
// and a hook must never crash the process. A hook that calls runtime.Goexit
// is logged as an ERROR too.
func (t *Tx) runHook(kind string, index int, fn func()) {
	goexit := true // until fn returned or panicked
	defer func() {
		p := recover()
		if p == nil {
			if goexit {
				t.logger.LogAttrs(context.Background(), slog.LevelError,
					"outbox: transaction hook called runtime.Goexit; the hooks after it still run, then the goroutine ends",
					slog.String("hook", kind), slog.Int("index", index), slog.String("stack", string(debug.Stack())))
			}
			return
		}
		attrs := []slog.Attr{
			slog.String("hook", kind),
			slog.Int("index", index),
			slog.String("panic_type", fmt.Sprintf("%T", p)),
		}
		// Only messages are logged, never arbitrary values that could
		// carry event payloads.
		switch v := p.(type) {
		case error:
			attrs = append(attrs, slog.String("panic", v.Error()))
		case string:
			attrs = append(attrs, slog.String("panic", v))
		}
		attrs = append(attrs, slog.String("stack", string(debug.Stack())))
		t.logger.LogAttrs(context.Background(), slog.LevelError, "outbox: transaction hook panicked", attrs...)
	}()
	fn()
	goexit = false
}

// From returns the [*Tx] carried by ctx, if any. It looks first at this
// package's own key, then at the transaction stored by [core.ContextWithTx].
// The returned Tx may already be finished; check [Tx.Active].
func From(ctx context.Context) (*Tx, bool) {
	if t, ok := ctx.Value(txKey{}).(*Tx); ok && t != nil {
		return t, true
	}
	if ct, ok := core.TxFromContext(ctx); ok {
		if t, ok := ct.(*Tx); ok && t != nil {
			return t, true
		}
	}
	return nil, false
}

// withTx stores t under this package's key and core's key.
func withTx(ctx context.Context, t *Tx) context.Context {
	return core.ContextWithTx(context.WithValue(ctx, txKey{}, t), t)
}

// Adopt wraps a transaction that the caller manages itself and returns a
// context carrying it (for outbox.Outbox.Publish and [From]). Hooks run
// when the caller commits or rolls back through the returned [*Tx]; ending
// tx directly skips them (its Commit and Rollback then return [ErrTxDone]).
// When the context tx was begun with ends before the commit, database/sql
// rolls tx back: Commit returns an error wrapping ctx's error (ctx taken
// to be that context) and runs the after-rollback hooks if the rollback
// was still to come; once database/sql has rolled tx back, Commit cannot
// tell that from a direct end (both are sql.ErrTxDone) and runs no hooks.
// [Tx.Sqlx] returns nil. Only [WithLogger] applies.
//
// The database of tx is unknown, so [Manager.Do] called with the returned
// context reports [ErrForeignTx]; use [Manager.Adopt] to let Do join it.
//
// A nil tx gives a Tx that is never [Tx.Active], carried by the returned
// context all the same (it hides a transaction ctx may carry): publishing
// on that context, and the Tx's Commit, Rollback, ExecContext and
// QueryContext return [core.ErrNoTransaction], hooks are ignored with a
// warning, and [Manager.Do] on it begins a transaction of its own, as after
// any finished transaction.
//
// ctx must not be nil: Adopt returns no error, so a nil ctx panics, as it
// does in context.WithValue.
func Adopt(ctx context.Context, tx *sql.Tx, opts ...Option) (context.Context, *Tx) {
	o := buildOptions(opts)
	t := newTx(tx, nil, nil, false, o.Logger)
	t.adopted = ctx
	return withTx(ctx, t), t
}

// AdoptX is [Adopt] for an *sqlx.Tx; [Tx.Sqlx] returns tx. A nil tx, or
// one wrapping a nil *sql.Tx, is adopted as Adopt adopts a nil one.
func AdoptX(ctx context.Context, tx *sqlx.Tx, opts ...Option) (context.Context, *Tx) {
	o := buildOptions(opts)
	t := newTx(sqlTxOf(tx), tx, nil, false, o.Logger)
	t.adopted = ctx
	return withTx(ctx, t), t
}

func sqlTxOf(tx *sqlx.Tx) *sql.Tx {
	if tx == nil {
		return nil
	}
	return tx.Tx
}
