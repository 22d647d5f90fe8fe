package acceptance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	outbox "github.com/outbox-go/outbox"
	"github.com/outbox-go/outbox/internal/testdb"
)

// mysqlErrTableAccessDenied is ER_TABLEACCESS_DENIED_ERROR ("CREATE command
// denied to user …").
const mysqlErrTableAccessDenied = 1142

// A MariaDB account holding nothing but SELECT, INSERT, UPDATE and DELETE
// on the outbox table and on a business table runs the whole framework
// (see runLeastPrivilege), the schema having been deployed by another
// account. The account really is least-privilege: it cannot create a
// table, so it also cannot apply the schema.
func TestPrivilegeMySQLLeastPrivilegeAccount(t *testing.T) {
	ctx := context.Background()
	rootCfg := testdb.MySQLConfig(t)
	root := testdb.OpenMySQL(t, rootCfg)
	deployForLeastPrivilege(t, root)

	userCfg := createLeastPrivilegeUser(t, root, rootCfg, "outbox_event", "orders")
	udb := testdb.OpenMySQL(t, userCfg)
	var current string
	if err := udb.GetContext(ctx, &current, `SELECT CURRENT_USER()`); err != nil {
		t.Fatal(err)
	}
	var grants []string
	if err := udb.SelectContext(ctx, &grants, `SHOW GRANTS`); err != nil {
		t.Fatal(err)
	}
	if len(grants) != 1+len([]string{"outbox_event", "orders"}) {
		t.Fatalf("the account holds %d grants, want USAGE and one per table", len(grants))
	}
	for _, g := range grants[1:] {
		if !strings.HasPrefix(g, "GRANT SELECT, INSERT, UPDATE, DELETE ON ") {
			t.Fatalf("unexpected grant %q", g)
		}
	}
	t.Logf("connected as %s with grants:\n  %s", current, strings.Join(grants[1:], "\n  "))

	// Negative: the account cannot create tables, not even the outbox
	// table that exists already (CREATE TABLE IF NOT EXISTS is checked
	// too), so New without SkipSchema fails.
	if _, err := udb.ExecContext(ctx, `CREATE TABLE lp_probe (id INT)`); !isMySQLError(err, mysqlErrTableAccessDenied) {
		t.Fatalf("CREATE TABLE as the least-privilege account: err = %v, want error %d (CREATE command denied)", err, mysqlErrTableAccessDenied)
	}
	if _, err := outbox.New(ctx, udb, outbox.Config{DisablePoller: true}); !isMySQLError(err, mysqlErrTableAccessDenied) {
		t.Fatalf("New without SkipSchema as the least-privilege account: err = %v, want error %d", err, mysqlErrTableAccessDenied)
	}

	runLeastPrivilege(t, udb)
}

// createLeastPrivilegeUser creates a user with a unique name, granted
// SELECT, INSERT, UPDATE and DELETE on the given tables of rootCfg's
// database and nothing else, drops it when t ends (after the pools opened
// later are closed) and returns rootCfg for that user. The user exists for
// host '%' and for 'localhost': a server resolving host names would match a
// 127.0.0.1 connection as 'localhost' (where an anonymous user would win
// over '%'); this server (skip_name_resolve) only needs '%'.
func createLeastPrivilegeUser(t *testing.T, root *sqlx.DB, rootCfg *mysql.Config, tables ...string) *mysql.Config {
	t.Helper()
	ctx := context.Background()
	var rnd [6]byte
	var pw [16]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		t.Fatal(err)
	}
	if _, err := rand.Read(pw[:]); err != nil {
		t.Fatal(err)
	}
	// Both are hex made here: safe to write into the statements.
	user := "outbox_lp_" + hex.EncodeToString(rnd[:])
	password := hex.EncodeToString(pw[:])
	hosts := []string{"%", "localhost"}
	t.Cleanup(func() {
		for _, h := range hosts {
			if _, err := root.ExecContext(context.Background(), fmt.Sprintf("DROP USER IF EXISTS '%s'@'%s'", user, h)); err != nil {
				t.Errorf("drop user %s@%s: %v", user, h, err)
			}
		}
	})
	for _, h := range hosts {
		if _, err := root.ExecContext(ctx, fmt.Sprintf("CREATE USER '%s'@'%s' IDENTIFIED BY '%s'", user, h, password)); err != nil {
			t.Fatalf("create user: %v", err)
		}
		for _, table := range tables {
			grant := fmt.Sprintf("GRANT SELECT, INSERT, UPDATE, DELETE ON `%s`.`%s` TO '%s'@'%s'", rootCfg.DBName, table, user, h)
			if _, err := root.ExecContext(ctx, grant); err != nil {
				t.Fatalf("%s: %v", grant, err)
			}
		}
	}
	cfg := rootCfg.Clone()
	cfg.User, cfg.Passwd = user, password
	return cfg
}

// isMySQLError reports whether err carries the server error number.
func isMySQLError(err error, number uint16) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == number
}
