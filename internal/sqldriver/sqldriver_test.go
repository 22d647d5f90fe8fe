package sqldriver_test

import (
	"database/sql"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/outbox-go/outbox/internal/sqldriver"
)

// A driver of a well-known type registered under a name of its own (a
// third-party dialect for a MySQL-protocol database, say) is named by
// that name when a dialect knows it, not by its type's usual name; the
// usual registration, and a handle of sql.OpenDB (registered under no
// name), keep the type's name.
func TestNamePrefersTheRegisteredNameOfADialect(t *testing.T) {
	const own = "sqldriver_test_mysqlish"
	sql.Register(own, &mysql.MySQLDriver{})
	sqldriver.SetKnown(func(name string) bool { return name == own || name == "mysql" })
	t.Cleanup(func() { sqldriver.SetKnown(nil) })

	for _, tc := range []struct {
		name string
		open func() (*sql.DB, error)
		want string
	}{
		{"own name", func() (*sql.DB, error) { return sql.Open(own, "root@tcp(127.0.0.1:1)/x") }, own},
		{"usual name", func() (*sql.DB, error) { return sql.Open("mysql", "root@tcp(127.0.0.1:1)/x") }, "mysql"},
		{"OpenDB", func() (*sql.DB, error) {
			c, err := mysql.NewConnector(&mysql.Config{Net: "tcp", Addr: "127.0.0.1:1", User: "root"})
			if err != nil {
				return nil, err
			}
			return sql.OpenDB(c), nil
		}, "mysql"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, err := tc.open()
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if got := sqldriver.Name(db); got != tc.want {
				t.Errorf("Name = %q, want %q", got, tc.want)
			}
		})
	}
}
