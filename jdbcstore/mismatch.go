package jdbcstore

import (
	"database/sql/driver"
	"fmt"
	"reflect"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/sqldriver"
)

// dialectMismatch describes the problem of a handle named after a driver
// of another database than its own, such as sqlx.NewDb(sqliteDB, "mysql"),
// or after a driver whose dialect needs that very driver, such as
// sqlx.NewDb(libpqDB, "pgx"): the store would take the name's dialect and
// its statements, error classes or notifications would fail on the
// handle. It returns "" when the name and the driver have the same
// dialect, when the name has none (a third-party driver, "postgres" over
// pgx), when the driver is neither of a dialect nor well known (a driver
// wrapped for instrumentation, named after the driver it wraps), or when
// database/sql has the name registered for a driver of the handle's type
// (a third-party dialect over a known driver).
//
// The problem is a *core.ConfigError of field Dialect; for a well-known
// driver without a dialect it also wraps ErrUnsupportedDriver.
func dialectMismatch(db *sqlx.DB) error {
	named, err := Lookup(db.DriverName())
	if err != nil || registeredFor(db.DriverName(), db.Driver()) {
		return nil
	}
	driverName := sqldriver.Name(db.DB)
	detected, err := Lookup(driverName)
	switch {
	case err == nil && detected == named:
		return nil
	case err == nil:
		return &core.ConfigError{Field: "Dialect", Msg: fmt.Sprintf(
			"is not set, and the handle's driver name %q has dialect %s but its driver (%T) is %q, of dialect %s: "+
				"name the handle after its driver (sqlx.NewDb(db, %q)) or set Dialect",
			db.DriverName(), named.Name(), db.Driver(), driverName, detected.Name(), driverName)}
	case sqldriver.WellKnown(db.Driver()) != "":
		return &core.ConfigError{Field: "Dialect", Msg: fmt.Sprintf(
			"is not set, and the handle's driver name %q has dialect %s, which works with its own driver only, but its driver is another",
			db.DriverName(), named.Name()), Err: unsupported(driverName, db.Driver())}
	}
	return nil
}

// registeredFor reports whether database/sql has a driver of drv's type
// registered under name.
func registeredFor(name string, drv driver.Driver) bool {
	other := sqldriver.ByName(name)
	return other != nil && reflect.TypeOf(other) == reflect.TypeOf(drv)
}
