package jdbcstore_test

import (
	"bytes"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/inbox"
	"github.com/outbox-go/outbox/internal/cfgpath"
	"github.com/outbox-go/outbox/internal/testdb"
	"github.com/outbox-go/outbox/jdbcstore"
	"github.com/outbox-go/outbox/jdbcstore/postgres"
)

// wantSessionRefused checks that the outbox's and the inbox's ApplySchema
// on db refuse the connection, saying why (want), and create nothing.
func wantSessionRefused(t *testing.T, d jdbcstore.Dialect, open func() *jdbcstore.Store, want string) {
	t.Helper()
	st := open()
	err := st.ApplySchema(t.Context())
	if !errors.Is(err, core.ErrInvalidConfig) || !slices.Equal(cfgpath.Fields(err), []string{"db"}) || !strings.Contains(err.Error(), want) {
		t.Errorf("ApplySchema = %v, want a ConfigError of field db saying %q", err, want)
	}
	if err := st.CheckTable(t.Context()); err == nil {
		t.Error("ApplySchema created the outbox table on a refused connection")
	}
	_, err = inbox.New(t.Context(), st.DB(), inbox.Config{Dialect: d})
	if !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), want) {
		t.Errorf("inbox.New = %v, want a ConfigError saying %q", err, want)
	}
}

// autocommit=0 in the DSN is refused before the schema: the store's
// writes outside a transaction opened one that never committed (DONE
// never reached other sessions, claims failed with error 1568, a purge
// waited for idle connections' locks).
func TestMySQLAutocommitOffIsRefused(t *testing.T) {
	t.Parallel()
	c := testdb.MySQLConfig(t)
	c.Params = map[string]string{"autocommit": "0"}
	db := testdb.OpenMySQL(t, c)
	wantSessionRefused(t, nil, func() *jdbcstore.Store {
		st, err := jdbcstore.New(db, jdbcstore.Config{})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}, "autocommit is off")
}

// Every character set of the connection is checked, not only the
// connection's: a latin1 character_set_client garbled the text the poller
// read, a latin1 character_set_results sent it DEAD as invalid JSON.
func TestMySQLCheckSetupWarnsAboutEveryCharset(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"character_set_client", "character_set_results"} {
		var (
			mu  sync.Mutex
			buf bytes.Buffer
		)
		log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, nil))
		openMySQLTestStore(t, jdbcstore.Config{Logger: log}, func(c *mysql.Config) { c.Params = map[string]string{v: "latin1"} })
		mu.Lock()
		if !strings.Contains(buf.String(), "not utf8mb4") || !strings.Contains(buf.String(), v+"=latin1") {
			t.Errorf("%s=latin1: warnings %q, want one naming it", v, buf.String())
		}
		mu.Unlock()
	}
}

// A DateStyle other than ISO on a connection that reads results as text
// is refused before the schema: no time could be read back (every claim
// failed, "invalid PostgreSQL date/time value", while publishing went
// on). Read in binary (pgx's default), any DateStyle works.
func TestPostgresDateStyleReadAsTextIsRefused(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"simple_protocol", "exec"} {
		dsn := testdb.WithPostgresParam(t, testdb.PostgresSchemaDSN(t), "default_query_exec_mode", mode)
		db := testdb.OpenPostgres(t, testdb.WithPostgresParam(t, dsn, "DateStyle", "German"))
		wantSessionRefused(t, postgres.Dialect, func() *jdbcstore.Store {
			st, err := jdbcstore.New(db, jdbcstore.Config{Dialect: postgres.Dialect})
			if err != nil {
				t.Fatal(err)
			}
			return st
		}, `DateStyle is "German, DMY"`)
	}
	db := testdb.OpenPostgres(t, testdb.WithPostgresParam(t, testdb.PostgresSchemaDSN(t), "DateStyle", "German"))
	st, err := jdbcstore.New(db, jdbcstore.Config{Dialect: postgres.Dialect})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.ApplySchema(t.Context()); err != nil {
		t.Errorf("ApplySchema with DateStyle German read in binary: %v", err)
	}
}
