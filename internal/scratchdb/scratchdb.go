// Package scratchdb creates throw-away databases for the command-line
// tools (outbox-bench, outbox-torture): a SQLite file in a new temporary
// directory, or a new MySQL/MariaDB or PostgreSQL database on a DSN's
// server.
package scratchdb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	// The database/sql driver "pgx".
	_ "github.com/jackc/pgx/v5/stdlib"
)

// dropTimeout bounds the DROP DATABASE of Drop.
const dropTimeout = 30 * time.Second

// SQLite creates a new temporary directory (named after pattern, as
// os.MkdirTemp takes it) and returns the path of file in it and a function
// removing the directory.
func SQLite(pattern, file string) (path string, remove func() error, err error) {
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", nil, fmt.Errorf("create temporary directory: %w", err)
	}
	return filepath.Join(dir, file), func() error { return os.RemoveAll(dir) }, nil
}

// MySQL creates the database <prefix><random hex> (utf8mb4) on the server
// of dsn, whatever database dsn names. It returns dsn pointing at the new
// database, its name, and drop, which drops the database when remove is
// true and always closes the admin connection.
func MySQL(ctx context.Context, dsn, prefix string) (newDSN, name string, drop func(remove bool) error, err error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", "", nil, fmt.Errorf("-dsn: %w", err)
	}
	var suffix [6]byte
	_, _ = rand.Read(suffix[:]) // never fails (crypto/rand panics instead)
	name = prefix + hex.EncodeToString(suffix[:])

	adminCfg := cfg.Clone()
	adminCfg.DBName = ""
	admin, err := sql.Open("mysql", adminCfg.FormatDSN())
	if err != nil {
		return "", "", nil, fmt.Errorf("open mysql: %w", err)
	}
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4"); err != nil {
		return "", "", nil, errors.Join(fmt.Errorf("create database %s on %s: %w", name, cfg.Addr, err), admin.Close())
	}
	drop = func(remove bool) error {
		var err error
		if remove {
			dctx, cancel := context.WithTimeout(context.Background(), dropTimeout)
			defer cancel()
			if _, err = admin.ExecContext(dctx, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
				err = fmt.Errorf("drop database %s: %w", name, err)
			}
		}
		return errors.Join(err, admin.Close())
	}
	cfg.DBName = name
	return cfg.FormatDSN(), name, drop, nil
}

// Postgres creates the database <prefix><random hex> on the server of dsn
// (a pgx URL or keyword/value DSN), whatever database dsn names. It
// returns dsn pointing at the new database, its name, and drop, which
// drops the database when remove is true (ending any session still on
// it) and always closes the admin connection.
func Postgres(ctx context.Context, dsn, prefix string) (newDSN, name string, drop func(remove bool) error, err error) {
	if _, err := pgconn.ParseConfig(dsn); err != nil {
		return "", "", nil, fmt.Errorf("-dsn: %w", err)
	}
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	name = prefix + hex.EncodeToString(suffix[:])
	newDSN, err = postgresWithDatabase(dsn, name)
	if err != nil {
		return "", "", nil, fmt.Errorf("-dsn: %w", err)
	}
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		return "", "", nil, fmt.Errorf("open postgres: %w", err)
	}
	if _, err := admin.ExecContext(ctx, `CREATE DATABASE "`+name+`"`); err != nil {
		return "", "", nil, errors.Join(fmt.Errorf("create database %s: %w", name, err), admin.Close())
	}
	drop = func(remove bool) error {
		var err error
		if remove {
			dctx, cancel := context.WithTimeout(context.Background(), dropTimeout)
			defer cancel()
			if _, err = admin.ExecContext(dctx, `DROP DATABASE IF EXISTS "`+name+`" WITH (FORCE)`); err != nil {
				err = fmt.Errorf("drop database %s: %w", name, err)
			}
		}
		return errors.Join(err, admin.Close())
	}
	return newDSN, name, drop, nil
}

// postgresWithDatabase returns dsn with its database set to name.
func postgresWithDatabase(dsn, name string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", err
		}
		u.Path = "/" + name
		u.RawPath = ""
		return u.String(), nil
	}
	// Keyword/value: a later keyword wins.
	return dsn + " dbname=" + name, nil
}
