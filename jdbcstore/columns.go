package jdbcstore

import (
	"errors"
	"fmt"
	"time"
)

// columns decodes the raw values of one scanned row, collecting every
// column problem instead of failing the read: the caller stores err() in
// the record's DecodeErr, so a corrupt row is reported, never a panic or a
// failed query.
type columns struct {
	d     Dialect
	names []string // column names, for the error messages
	v     []any
	errs  []error
}

func (c *columns) fail(i int, err error) {
	if err != nil {
		c.errs = append(c.errs, fmt.Errorf("column %s: %w", c.names[i], err))
	}
}

func (c *columns) str(i int, dst *string) {
	var err error
	*dst, err = asString(c.v[i])
	c.fail(i, err)
}

func (c *columns) int(i int) int64 {
	n, err := asInt(c.v[i])
	c.fail(i, err)
	return n
}

func (c *columns) time(i int, dst *time.Time, required bool) {
	var err error
	*dst, err = c.d.DecodeTime(c.v[i])
	if err == nil && required && c.v[i] == nil {
		err = errors.New("is NULL")
	}
	c.fail(i, err)
}

func (c *columns) err() error { return errors.Join(c.errs...) }
