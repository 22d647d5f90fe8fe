// Package mysql is the MySQL 8 / MariaDB 10.6+ dialect of package
// jdbcstore, over github.com/go-sql-driver/mysql (driver name "mysql").
//
// Importing this package registers [Dialect] with jdbcstore, so stores on
// a "mysql" handle detect it:
//
//	import _ "github.com/outbox-go/outbox/jdbcstore/mysql"
//
//	db, err := sqlx.Open("mysql", "user:pass@tcp(host:3306)/app?parseTime=true")
//
// The package is pure Go: a program using only this dialect builds with
// CGO_ENABLED=0.
package mysql
