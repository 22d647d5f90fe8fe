package testdb

import "syscall"

// sysProcAttr makes the kernel kill a private server when the test binary
// dies without running its cleanups (a panic, a test timeout).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
