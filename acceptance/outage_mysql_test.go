package acceptance

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/testdb"
)

// mysqlErrNoSuchThread is ER_NO_SUCH_THREAD: the connection to KILL is gone.
const mysqlErrNoSuchThread = 1094

// Connections killed under load (see testKilledConnections): KILL <id>
// of every connection on the test database, found in the process list by
// its name, while an admin session holds the outbox table with LOCK
// TABLES … WRITE.
func TestOutageMySQLKilledConnections(t *testing.T) {
	testKilledConnections(t, newMySQLOutage(t, testdb.MySQLConfig(t)))
}

// A server restart while events flow (see testServerRestart), on a private
// MariaDB server: shut down cleanly (SIGTERM, as mysqladmin shutdown) or
// killed (SIGKILL, a crash: InnoDB recovers on the next start).
func TestOutageMySQLServerRestart(t *testing.T) {
	testServerRestarts(t, func(t *testing.T) privateServer {
		server := testdb.StartMariaDB(t)
		return privateServer{newMySQLOutage(t, server.Config()), server.Stop, server.Kill, server.Start}
	})
}

// mysqlOutage is a MySQL/MariaDB database for an outage test. The admin
// pool has no default database, so its connections are never in the
// framework's part of the process list.
type mysqlOutage struct {
	t         *testing.T
	cfg       *mysql.Config
	db, admin *sqlx.DB
}

// newMySQLOutage opens the pools on the empty database of cfg, which no
// other test uses.
func newMySQLOutage(t *testing.T, cfg *mysql.Config) *mysqlOutage {
	adminCfg := cfg.Clone()
	adminCfg.DBName = ""
	return &mysqlOutage{t: t, cfg: cfg, db: testdb.OpenMySQL(t, cfg), admin: testdb.OpenMySQL(t, adminCfg)}
}

func (m *mysqlOutage) pools() (framework, admin *sqlx.DB) { return m.db, m.admin }
func (m *mysqlOutage) table(name string) string           { return "`" + m.cfg.DBName + "`.`" + name + "`" }
func (m *mysqlOutage) addr() string                       { return m.cfg.Addr }

func (m *mysqlOutage) lockTable(ctx context.Context) (pending int, unlock func() error) {
	t := m.t
	t.Helper()
	lock, err := m.admin.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	unlock = func() error {
		defer lock.Close()
		_, err := lock.ExecContext(ctx, "UNLOCK TABLES")
		return err
	}
	if _, err := lock.ExecContext(ctx, "LOCK TABLES "+m.table("outbox_event")+" WRITE"); err != nil {
		lock.Close()
		t.Fatalf("lock the outbox table: %v", err)
	}
	if err := lock.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+m.table("outbox_event")+" WHERE status <> ?", int(core.StatusDone)).Scan(&pending); err != nil {
		_ = unlock()
		t.Fatal(err)
	}
	return pending, unlock
}

func (m *mysqlOutage) blocked(pattern string) int {
	var n int
	err := m.admin.GetContext(context.Background(), &n,
		`SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID() AND COMMAND <> 'Killed' AND INFO LIKE ?`,
		m.cfg.DBName, pattern)
	if err != nil {
		m.t.Fatalf("process list: %v", err)
	}
	return n
}

func (m *mysqlOutage) killFramework() int {
	t := m.t
	t.Helper()
	ctx := context.Background()
	var ids []int64
	if err := m.admin.SelectContext(ctx, &ids,
		`SELECT ID FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID()`, m.cfg.DBName); err != nil {
		t.Fatalf("process list: %v", err)
	}
	for _, id := range ids {
		// KILL takes no placeholder; id is the server's integer.
		if _, err := m.admin.ExecContext(ctx, fmt.Sprintf("KILL %d", id)); err != nil && !isMySQLError(err, mysqlErrNoSuchThread) {
			t.Fatalf("KILL %d: %v", id, err)
		}
	}
	if len(ids) > 0 {
		waitLong(t, "the killed connections to go", func() bool {
			q, args, err := sqlx.In(`SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID IN (?)`, ids)
			if err != nil {
				t.Fatal(err)
			}
			var n int
			if err := m.admin.GetContext(ctx, &n, q, args...); err != nil {
				t.Fatalf("process list: %v", err)
			}
			return n == 0
		})
	}
	return len(ids)
}

func (m *mysqlOutage) uptime() time.Duration {
	var uptime struct {
		Name  string `db:"Variable_name"`
		Value int64  `db:"Value"`
	}
	if err := m.admin.GetContext(context.Background(), &uptime, `SHOW GLOBAL STATUS LIKE 'Uptime'`); err != nil {
		m.t.Fatal(err)
	}
	return time.Duration(uptime.Value) * time.Second
}
