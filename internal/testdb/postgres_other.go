//go:build !linux

package testdb

import (
	"errors"
	"syscall"
)

type osUser struct{ uid, gid int }

// postgresCredential: private PostgreSQL servers are supported on Linux
// only.
func postgresCredential() (*osUser, error) {
	return nil, errors.New("private PostgreSQL servers need Linux")
}

func postgresSysProcAttr(*osUser, bool) *syscall.SysProcAttr { return nil }

func killGroup(int) bool { return false }
