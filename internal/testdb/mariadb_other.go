//go:build !linux

package testdb

import "syscall"

// sysProcAttr has nothing to add outside Linux: a private server outlives
// a test binary that dies without running its cleanups.
func sysProcAttr() *syscall.SysProcAttr { return nil }
