//go:build !cgo

package sqlite

// This package needs cgo: github.com/mattn/go-sqlite3 is SQLite compiled
// from C. Build with CGO_ENABLED=1 and a C compiler, or leave this package
// out of a program that uses MySQL or PostgreSQL only (see the README,
// "Install").
var _ = this_package_needs_cgo_build_with_CGO_ENABLED_1_and_a_C_compiler
