// Package pq stands for lib/pq in tests: its Driver's type prints as
// *pq.Driver, the type by which the dialect detection recognises lib/pq,
// a PostgreSQL driver no dialect serves.
package pq

import (
	"database/sql/driver"
	"errors"
)

// Driver is a database/sql driver that never connects.
type Driver struct{}

// Open fails: there is no server.
func (*Driver) Open(string) (driver.Conn, error) { return nil, errors.New("pq (test): no server") }
