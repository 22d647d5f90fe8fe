package tenant

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/cfgpath"
	"github.com/outbox-go/outbox/internal/dsnsecret"
	"github.com/outbox-go/outbox/internal/ident"
	"github.com/outbox-go/outbox/jdbcstore"
)

// DefaultRefreshInterval is how often Config.Discover is called by default.
const DefaultRefreshInterval = 5 * time.Minute

// Database describes one database of the set. Two Databases with the same
// ID and equal fields are the same database: a refresh leaves its store
// alone; a changed Driver or DSN replaces it.
type Database struct {
	// ID is the store's stable identifier: the routing key (unless
	// Config.Route maps keys), the "store" attribute of logs and the label
	// given to core.StoreMetrics. Non-empty text of at most 128 bytes
	// without control characters.
	ID string
	// Driver is the database/sql driver name: "sqlite3", "mysql" or "pgx"
	// (the program imports jdbcstore/sqlite, jdbcstore/mysql or
	// jdbcstore/postgres to register it), or the driver of another
	// registered dialect.
	Driver string
	// DSN is the data source name. For "sqlite3" a file path or "file:"
	// URI, opened with sqlite.Open's settings (WAL, busy timeout,
	// immediate transactions); for "mysql" a go-sql-driver/mysql DSN; for
	// "pgx" a pgx URL or keyword/value DSN.
	DSN string
}

// Discovery returns the current set of databases. It is
// called once by New and then every RefreshInterval; an error, or a
// panic, keeps the current set. Each periodic call gets 30 s: its ctx
// then ends and the refresh counts as failed (logged; the next one runs
// at the next interval), so honour ctx.
type Discovery func(ctx context.Context) ([]Database, error)

// OpenFunc opens a database of the set. The pool it returns belongs to the
// package from then on: it is closed when the database leaves the set or
// on Close. An error, or a panic, leaves the database out of the set (it
// fails New for a database of the first set).
type OpenFunc func(ctx context.Context, db Database) (*sqlx.DB, error)

// Open is the default OpenFunc: [jdbcstore.Open], which opens the
// database with its registered dialect (sqlite.Open's settings for
// "sqlite3", sqlx.Open for "mysql" and "pgx") and fails with an error wrapping
// jdbcstore.ErrUnsupportedDriver for a driver without one. It checks the
// connection with a ping. The error's text never shows a password of the
// DSN, nor a piece of one: the driver's error, which may quote the DSN,
// is shown with them replaced by *** (the driver's error it wraps, for
// errors.Is and errors.As, is as the driver made it).
func Open(ctx context.Context, d Database) (*sqlx.DB, error) {
	if ctx == nil {
		return nil, core.ErrNilContext
	}
	db, err := jdbcstore.Open(d.Driver, d.DSN)
	if err != nil {
		return nil, &openError{what: "open", d: d, err: err}
	}
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, &openError{what: "connect to", d: d, err: err}
	}
	return db, nil
}

// openError is an error of Open: the driver's error, whose text may quote
// the DSN (pgx quotes a DSN it cannot parse, masking only the password it
// found), shown with every password of the DSN, and any piece of one,
// replaced by ***. It wraps the driver's error for errors.Is and As.
type openError struct {
	what string // "open" or "connect to"
	d    Database
	err  error
}

func (e *openError) Error() string {
	// One line: pgx puts each address it tried on a line of its own.
	msg := strings.NewReplacer(":\n\t", ": ", "\n\t", "; ", "\r\n", " ", "\n", " ", "\r", " ").Replace(dsnsecret.Scrub(e.err.Error(), e.d.DSN))
	msg = dsnsecret.Scrub(msg, e.d.DSN) // a piece the joined lines made whole
	return fmt.Sprintf("outbox: %s database %q (%s): %s", e.what, e.d.ID, e.d.Driver, msg)
}

func (e *openError) Unwrap() error { return e.err }

// validateSet checks a list of databases, reporting every problem at once
// (errors.Join of *core.ConfigError named "Databases[i].Field", i the
// position in dbs), and returns a copy sorted by id.
func validateSet(dbs []Database) ([]Database, error) {
	var p cfgpath.Collector
	first := make(map[string]int, len(dbs))
	for i, d := range dbs {
		at := fmt.Sprintf("Databases[%d]", i)
		if err := ident.ValidateStoreID(d.ID); err != nil {
			var ce *core.ConfigError
			if errors.As(err, &ce) {
				p.Field(at+".ID", ce.Msg)
			} else {
				p.Field(at+".ID", err.Error())
			}
		} else if j, dup := first[d.ID]; dup {
			p.Field(at+".ID", fmt.Sprintf("%q appears twice (also Databases[%d])", d.ID, j))
		} else {
			first[d.ID] = i
		}
		if d.Driver == "" {
			p.Field(at+".Driver", "must not be empty")
		}
		if d.DSN == "" {
			p.Field(at+".DSN", "must not be empty")
		}
	}
	if err := p.Err(); err != nil {
		return nil, err
	}
	out := slices.Clone(dbs)
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// UUIDKey returns the canonical text form of a UUID
// (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, lower case), the routing key the
// ForUUID methods look up. Any [16]byte UUID type (github.com/google/uuid,
// github.com/gofrs/uuid) converts to the parameter.
func UUIDKey(u [16]byte) string {
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:], u[10:])
	return string(b[:])
}
