package jdbcstore

import (
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/outbox-go/outbox/core"
	"github.com/outbox-go/outbox/internal/cfgpath"
	"github.com/outbox-go/outbox/internal/nilval"
	"github.com/outbox-go/outbox/internal/sqldriver"
)

// Defaults applied by [New] to zero [Config] fields.
const (
	// DefaultTable is the outbox table name.
	DefaultTable = "outbox_event"
	// DefaultMaxErrorLen is the number of characters of an error message
	// kept in last_error.
	DefaultMaxErrorLen = 4000
	// MaxMaxErrorLen is the most Config.MaxErrorLen may be: MySQL's and
	// MariaDB's last_error column (TEXT) holds 65,535 bytes, and a
	// character takes up to 4 of them. A longer message could not be
	// stored, so a failed delivery could never be recorded.
	MaxMaxErrorLen = 16383
)

// tableNamePattern is the only shape of table name accepted: a plain SQL
// identifier of at most 48 characters, which leaves room for the index
// names derived from it within every supported database's identifier limit
// (64 in MySQL, 63 in PostgreSQL).
var tableNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,47}$`)

// Config configures a [Store]. The zero value is usable with any database
// whose dialect is registered for the handle's driver name.
type Config struct {
	// Dialect selects the SQL dialect. Defaults to the dialect registered
	// (see [Register]) for db.DriverName(): "sqlite3" once the program
	// imports jdbcstore/sqlite, "mysql" once it imports jdbcstore/mysql.
	// When that name has none (a handle named after another driver), the
	// dialect registered for the driver the handle really uses is taken
	// (detected from its driver.Driver). Without either, New fails with a
	// *core.ConfigError for this field that wraps both
	// core.ErrInvalidConfig and [ErrUnsupportedDriver].
	// A nil value of a type (a nil *T) is refused.
	Dialect Dialect
	// Table is the outbox table name. It must match
	// ^[A-Za-z_][A-Za-z0-9_]{0,47}$ and not be one SQLite reserves (see
	// [ValidateTableName]). Defaults to [DefaultTable].
	Table string
	// MaxErrorLen is how many characters (runes) of an error message are
	// stored in last_error. Defaults to [DefaultMaxErrorLen]; negative
	// values and values above [MaxMaxErrorLen] are rejected.
	MaxErrorLen int
	// Now is the clock used for created_at, available_at on insert and
	// done_at. Defaults to time.Now.
	Now func() time.Time
	// Logger receives warnings about the database setup. Defaults to
	// slog.Default(). Payloads are never logged.
	Logger *slog.Logger
}

// withDefaults returns cfg with every zero field set to its default.
// driverName is the name the *sqlx.DB was opened with.
// resolve checks db, fills cfg's defaults for db's driver and validates
// the result, reporting every problem at once: the common start of New
// and of the inbox store.
func (cfg Config) resolve(db *sqlx.DB) (Config, error) {
	if db == nil {
		return cfg, &core.ConfigError{Field: "db", Msg: "must not be nil"}
	}
	if db.DB == nil {
		return cfg, &core.ConfigError{Field: "db", Msg: "is an *sqlx.DB holding a nil *sql.DB"}
	}
	explicit := cfg.Dialect != nil
	cfg = cfg.withDefaults(db.DriverName())
	if cfg.Dialect == nil {
		// The handle's name has no dialect (a *sqlx.DB named "postgres"
		// over pgx, or a *sql.DB of a driver only a third-party dialect
		// knows): detect the driver itself.
		cfg.Dialect = dialectForDriver(sqldriver.Name(db.DB))
	}
	var dialectErr error
	if cfg.Dialect == nil {
		dialectErr = noDialect(unsupported(db.DriverName(), db.Driver()))
	} else if nilval.Is(cfg.Dialect) {
		dialectErr = &core.ConfigError{Field: "Dialect", Msg: fmt.Sprintf("is a nil %T (leave it nil for the dialect registered for the driver)", cfg.Dialect)}
	} else if c := cfg.Dialect.Capabilities(); !c.SkipLocked && !c.Returning {
		dialectErr = &core.ConfigError{Field: "Dialect", Msg: fmt.Sprintf(
			"dialect %s supports neither SKIP LOCKED nor RETURNING (Capabilities): the store could claim no row", cfg.Dialect.Name())}
	} else if !explicit {
		dialectErr = dialectMismatch(db)
	}
	return cfg, errors.Join(dialectErr, cfg.validateFields())
}

func (cfg Config) withDefaults(driverName string) Config {
	if cfg.Dialect == nil {
		cfg.Dialect = dialectForDriver(driverName)
	}
	if cfg.Table == "" {
		cfg.Table = DefaultTable
	}
	if cfg.MaxErrorLen == 0 {
		cfg.MaxErrorLen = DefaultMaxErrorLen
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return cfg
}

// noDialect is the configuration error of a Config without a Dialect for
// a driver that has none registered: err, from unsupported, wraps
// ErrUnsupportedDriver, the result core.ErrInvalidConfig as well.
func noDialect(err error) error {
	return &core.ConfigError{Field: "Dialect", Msg: "is not set and none is registered for the driver", Err: err}
}

// Validate reports every invalid field of cfg, after the defaults are
// applied, at once: each problem is a *core.ConfigError (wrapping
// core.ErrInvalidConfig) naming its field ("Table"), joined with
// errors.Join. The dialect is not checked: it depends on the database
// handle (New reports a missing one). New and inbox.New run it;
// outbox.New and tenant.New run it before they touch the database,
// naming the fields "Store.Table".
func (cfg Config) Validate() error {
	if cfg.Table == "" {
		cfg.Table = DefaultTable
	}
	return cfg.validateFields()
}

// validateFields checks every field but the dialect.
func (cfg Config) validateFields() error {
	var p cfgpath.Collector
	p.Add("", ValidateTableName(cfg.Table))
	p.Logger("Logger", cfg.Logger)
	switch {
	case cfg.MaxErrorLen < 0:
		p.Field("MaxErrorLen", fmt.Sprintf("must not be negative, got %d", cfg.MaxErrorLen))
	case cfg.MaxErrorLen > MaxMaxErrorLen:
		p.Field("MaxErrorLen", fmt.Sprintf("must be at most %d (what MySQL's TEXT column holds at 4 bytes a character), got %d",
			MaxMaxErrorLen, cfg.MaxErrorLen))
	}
	return p.Err()
}

// ValidateTableName reports whether name can be used as [Config.Table]
// (an empty Config.Table means [DefaultTable], but "" itself is not a
// valid name): it must match ^[A-Za-z_][A-Za-z0-9_]{0,47}$, and must not
// be a name SQLite reserves (beginning with sqlite_, in any case, or
// sqlite itself, whose indexes would), on any database. The error is a
// *core.ConfigError for the field "Table"; it wraps
// [core.ErrInvalidIdentifier] and core.ErrInvalidConfig.
func ValidateTableName(name string) error {
	if !tableNamePattern.MatchString(name) {
		return &core.ConfigError{Field: "Table", Err: core.ErrInvalidIdentifier,
			Msg: fmt.Sprintf("%q must match %s", name, tableNamePattern)}
	}
	if l := strings.ToLower(name); l == "sqlite" || strings.HasPrefix(l, "sqlite_") {
		// SQLite refuses such names ("reserved for internal use"), for
		// the table or for the indexes named after it; refused on every
		// database, so that a name valid for one is valid for all.
		return &core.ConfigError{Field: "Table", Err: core.ErrInvalidIdentifier,
			Msg: fmt.Sprintf("%q: names beginning with sqlite_ (in any case), and sqlite itself, whose indexes would, are reserved by SQLite", name)}
	}
	return nil
}
