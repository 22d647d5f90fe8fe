package testdb

import (
	"fmt"
	"os"
	"os/user"
	"strconv"
	"syscall"
)

// osUser is the account a private PostgreSQL server runs as.
type osUser struct{ uid, gid int }

// postgresCredential is the OS user postgres when running as root
// (initdb and postgres refuse root), nil otherwise.
func postgresCredential() (*osUser, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root needs the OS user postgres to run the server: %w", err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("OS user postgres: uid %q, gid %q", u.Uid, u.Gid)
	}
	return &osUser{uid: uid, gid: gid}, nil
}

// postgresSysProcAttr runs a command as u (when set); the server (group
// true) gets a process group of its own, so killGroup ends its backends
// too, and is killed when the test binary dies without running its
// cleanups.
func postgresSysProcAttr(u *osUser, group bool) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: group}
	if group {
		a.Pdeathsig = syscall.SIGKILL
	}
	if u != nil {
		a.Credential = &syscall.Credential{Uid: uint32(u.uid), Gid: uint32(u.gid)}
	}
	return a
}

// killGroup sends SIGKILL to the process group pgid and reports whether
// any process was left in it.
func killGroup(pgid int) bool {
	return syscall.Kill(-pgid, syscall.SIGKILL) == nil
}
