package sqldriver

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"testing"
)

// ptrDriver is a third-party driver of a pointer type: two values are
// different drivers to ==.
type ptrDriver struct{ tag string }

func (*ptrDriver) Open(string) (driver.Conn, error) { return nil, errors.New("no server") }

// connector makes a new driver value, as go-sql-driver/mysql's does.
type connector struct{}

func (connector) Connect(context.Context) (driver.Conn, error) { return nil, errors.New("no server") }
func (connector) Driver() driver.Driver                        { return &ptrDriver{tag: "new"} }

var (
	withDialect = &ptrDriver{tag: "with dialect"}
	plain       = &ptrDriver{tag: "plain"}
)

func init() {
	// "a_plain" sorts before "b_known": a name with a dialect must win
	// over an earlier one without.
	sql.Register("outbox_sqldriver_test_a_plain", plain)
	sql.Register("outbox_sqldriver_test_b_known", withDialect)
	SetKnown(func(name string) bool { return name == "outbox_sqldriver_test_b_known" })
}

func TestRegisteredMatchesByValueThenByType(t *testing.T) {
	for _, tc := range []struct {
		name string
		drv  driver.Driver
		want string
	}{
		{"the registered value with a dialect", withDialect, "outbox_sqldriver_test_b_known"},
		// The same type under a name with a dialect beats the exact value
		// under a name without one.
		{"the registered value without a dialect", plain, "outbox_sqldriver_test_b_known"},
		// sql.OpenDB with a connector making its own driver value.
		{"a new value of a registered type", connector{}.Driver(), "outbox_sqldriver_test_b_known"},
		{"a type registered under no name", unknownDriver{}, ""},
		{"nil", nil, ""},
	} {
		if got := Registered(tc.drv); got != tc.want {
			t.Errorf("%s: Registered = %q, want %q", tc.name, got, tc.want)
		}
	}
	db := sql.OpenDB(connector{})
	defer db.Close()
	if got := Name(db); got != "outbox_sqldriver_test_b_known" {
		t.Errorf("Name of a sql.OpenDB handle = %q", got)
	}
}

type unknownDriver struct{}

func (unknownDriver) Open(string) (driver.Conn, error) { return nil, errors.New("no server") }
