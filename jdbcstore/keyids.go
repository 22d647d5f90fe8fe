package jdbcstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/outbox-go/outbox/core"
)

// keyIDsRecheck is how long a store whose keys table lacked the id
// columns waits before it looks again (a migration may add them).
const keyIDsRecheck = 5 * time.Minute

// byID reports whether ordered inserts record and read the event ids of
// the keys table ([Capabilities].PredecessorByID, the columns there).
func (s *Store) byID() bool { return s.keyIDs.Load() }

// checkKeyIDs settles whether the keys table has the id columns, for a
// store whose schema ApplySchema did not install: on its first claim,
// then, while they are missing, every keyIDsRecheck. Until they are found
// ordered inserts read the event before by position.
func (s *Store) checkKeyIDs(ctx context.Context) {
	if s.q.keysProbe == "" || s.keyIDs.Load() {
		return
	}
	now := time.Now().UnixNano()
	last := s.keyIDsChecked.Load()
	if last != 0 && now-last < int64(keyIDsRecheck) || !s.keyIDsChecked.CompareAndSwap(last, now) {
		return
	}
	if runs(ctx, s.db, s.q.keysProbe) {
		s.keyIDs.Store(true) // never false again: ApplySchema may have set it meanwhile
	}
}

// keysColumns are the columns of every release's keys table.
var keysColumns = []string{"order_key", "last_seq"}

// checkKeysTable makes sure that the keys table the schema creates, if
// it does, is an outbox keys table before anything alters it or writes to
// it: its name is derived from the outbox table's, and a table of the
// application's may have it. It returns a *core.ConfigError of field
// Table when it is not.
func (s *Store) checkKeysTable(ctx context.Context, conn *sql.Conn) error {
	keys := keysTable(s.table)
	if !strings.Contains(s.schema, s.dialect.QuoteIdent(keys)) {
		return nil
	}
	err := checkTableShape(ctx, conn, s.dialect, keys, "outbox keys", keysColumns)
	var ce *core.ConfigError
	if errors.As(err, &ce) {
		ce.Msg = fmt.Sprintf("%q: its ordering-keys table %q exists and is not an outbox keys table (it lacks some of the columns %s): name another table, or rename yours",
			s.table, keys, strings.Join(keysColumns, ", "))
	}
	return err
}

// upgradeKeys adds the id columns to a keys table an earlier release
// created, when the dialect can ([KeysUpgrader]), and settles byID. A
// failed upgrade (no ALTER right) is logged, not returned: ordered
// inserts then read the event before by position, as they did.
func (s *Store) upgradeKeys(ctx context.Context, ddl ddlConn) error {
	if s.q.keysProbe == "" {
		return nil
	}
	if runs(ctx, ddl.conn, s.q.keysProbe) {
		s.keyIDs.Store(true)
		return nil
	}
	u, ok := s.dialect.(KeysUpgrader)
	if !ok {
		return nil
	}
	script, err := renderTemplate(s.dialect, "keys upgrade", u.KeysUpgrade(), s.table)
	if err != nil {
		return err
	}
	first := ddl.execEach(ctx, script)
	if !runs(ctx, ddl.conn, s.q.keysProbe) {
		s.log.LogAttrs(ctx, slog.LevelWarn, "outbox: jdbcstore: the keys table lacks its id columns and could not be upgraded;"+
			" an open transaction that published an ordered event holds up other inserts (see the keys upgrade in the schema)",
			slog.String("table", keysTable(s.table)), slog.Any("error", first))
		return nil
	}
	s.keyIDs.Store(true)
	if first == nil {
		// Only the node whose ALTER added them says so; the others lost
		// the upgrade to it (duplicate column), which is no error.
		s.log.LogAttrs(ctx, slog.LevelInfo, "outbox keys table upgraded: id columns added", slog.String("table", keysTable(s.table)))
	}
	return nil
}
